"""`setui fleet`'s settings: the URL from the command line, config or environment; the
credentials only from the config file or the environment; bad ones in words, exit 2."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from setui.settings.config import ConfigError, load_config
from tests.support.children import SETUI


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run([*SETUI, "fleet", *args], capture_output=True, text=True,
                          timeout=60, env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)


def test_credentials_from_file_and_environment(tmp_path: Path) -> None:
    file = tmp_path / "config.toml"
    file.write_text('prometheus = "http://prom:9090"\nprometheus-user = "ops"\n'
                    'prometheus-password = "pw"\n')
    file.chmod(0o600)
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
    file.chmod(0o600)
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


@pytest.mark.parametrize(("text", "mode", "named"), [
    ('prometheus-token = "t0k"\n', 0o644, "prometheus-token"),
    ('prometheus-user = "ops"\nprometheus-password = "pw"\n', 0o640, "prometheus-password"),
    ('prometheus-token = "t0k"\n', 0o602, "prometheus-token"),
])
def test_a_config_holding_a_secret_that_others_can_open_is_refused(
        tmp_path: Path, text: str, mode: int, named: str) -> None:
    """As ssh refuses a private key others can read: the message says how to fix it."""
    file = tmp_path / "my config.toml"
    file.write_text(text)
    file.chmod(mode)
    with pytest.raises(ConfigError) as caught:
        load_config(file, environ={})
    message = str(caught.value)
    assert named in message and f"mode {mode:04o}" in message
    assert f"chmod 600 '{file}'" in message
    assert "t0k" not in message and "pw" not in message.replace(named, "")
    file.chmod(0o600)
    load_config(file, environ={})  # the owner's alone: read
    plain = tmp_path / "plain.toml"
    plain.write_text('prometheus = "https://p"\nprometheus-user = "ops"\n')
    plain.chmod(0o644)
    with pytest.raises(ConfigError, match="prometheus-password is not"):
        load_config(plain, environ={})  # no secret in it: its mode is not the problem


@pytest.mark.slow
def test_the_command_refuses_a_readable_secret_and_a_token_over_plain_http(
        tmp_path: Path) -> None:
    file = tmp_path / "config.toml"
    file.write_text('prometheus-token = "t0k"\n')
    file.chmod(0o644)
    readable = run("--prometheus", "https://prom:9090", env={"SETUI_CONFIG": str(file)})
    assert readable.returncode == 2, readable.stderr
    assert f"chmod 600 {file}" in readable.stderr and "t0k" not in readable.stderr
    plain = run("--prometheus", "http://prom.example:9090",
                env={"SETUI_CONFIG": str(tmp_path / "none.toml"),
                     "SETUI_PROMETHEUS_TOKEN": "t0k"})
    assert plain.returncode == 2, plain.stderr
    assert "clear text" in plain.stderr and "use https://" in plain.stderr
    assert "t0k" not in plain.stderr
    assert "Traceback" not in readable.stderr + plain.stderr
