"""`setui fleet`'s settings: the URL from the command line, config or environment; the
credentials only from the config file or the environment; bad ones in words, exit 2."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from children import SETUI
from setui.config import ConfigError, load_config


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run([*SETUI, "fleet", *args], capture_output=True, text=True,
                          timeout=60, env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)


def test_credentials_from_file_and_environment(tmp_path: Path) -> None:
    file = tmp_path / "config.toml"
    file.write_text('prometheus = "http://prom:9090"\nprometheus-user = "ops"\n'
                    'prometheus-password = "pw"\n')
    config = load_config(file, environ={})
    assert (config.prometheus, config.prometheus_user, config.prometheus_password) == (
        "http://prom:9090", "ops", "pw")
    assert "pw" not in repr(config)
    token = load_config(None, environ={"SETUI_CONFIG": str(tmp_path / "none.toml"),
                                       "SETUI_PROMETHEUS_TOKEN": "t0k",
                                       "SETUI_PROMETHEUS_URL": "https://p"})
    assert token.prometheus_token == "t0k" and token.prometheus == "https://p"
    assert "t0k" not in repr(token)


@pytest.mark.parametrize(("text", "words"), [
    ('prometheus-user = "ops"\n', "prometheus-password is not"),
    ('prometheus-token = "t"\nprometheus-user = "u"\nprometheus-password = "p"\n',
     "give one"),
    ("prometheus-token = 5\n", "must be a string"),
])
def test_bad_credentials_are_refused_in_words(tmp_path: Path, text: str, words: str) -> None:
    file = tmp_path / "config.toml"
    file.write_text(text)
    with pytest.raises(ConfigError, match=words):
        load_config(file, environ={})


@pytest.mark.slow
def test_no_url_and_bad_urls_exit_2() -> None:
    missing = run()
    assert missing.returncode == 2 and "which Prometheus?" in missing.stderr
    inline = run("--prometheus", "http://ops:pw@prom:9090")
    assert inline.returncode == 2 and "holds a user or password" in inline.stderr
    fast = run("--prometheus", "http://prom:9090", "--refresh", "1")
    assert fast.returncode == 2 and "at least 5 seconds" in fast.stderr
    # There is no way to give a secret on the command line.
    token = run("--prometheus", "http://prom:9090", "--token", "x")
    assert token.returncode == 2 and "unrecognized arguments" in token.stderr
    assert "Traceback" not in missing.stderr + inline.stderr + fast.stderr


@pytest.mark.slow
def test_not_a_terminal_is_said_in_words() -> None:
    done = run("--prometheus", "http://127.0.0.1:9")
    assert done.returncode == 2 and "needs a terminal" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
