"""Settings: file < environment < command line, and bad settings explained."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from setui.settings.config import Config, ConfigError, config_source, load_config, save_setting
from tests.support.children import SETUI


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_without_a_file(tmp_path: Path) -> None:
    config = load_config(None, environ={"SETUI_CONFIG": str(tmp_path / "absent.toml")})
    assert config == Config()


def test_file_then_environment_then_command_line(tmp_path: Path) -> None:
    path = write(tmp_path, 'endpoint = "http://127.0.0.1:1"\ninterval = 2\ntheme = "setui-mono"\n'
                           'read-only = true\nvm-name = "web-0"\nbell = false\n')
    config = load_config(path, environ={})
    assert (config.endpoint, config.interval, config.theme) == ("http://127.0.0.1:1", 2.0,
                                                                "setui-mono")
    assert config.read_only and not config.bell and config.vm_name == "web-0"
    config = load_config(path, environ={"SETUI_ENDPOINT": "http://127.0.0.1:2",
                                        "SETUI_API_VERSION": "2019-08-01"})
    assert config.endpoint == "http://127.0.0.1:2" and config.api_version == "2019-08-01"
    config = config.with_overrides(endpoint="http://127.0.0.1:3", interval=None)
    assert config.endpoint == "http://127.0.0.1:3" and config.interval == 2.0


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("endpoint = ", "not valid TOML"),
        ("colour = 'red'", "unknown setting 'colour'"),
        ("interval = 'fast'", "interval must be a number"),
        ("interval = 0.05", "must be 0.2 to 300 seconds"),
        ("interval = 1e9", "must be 0.2 to 300 seconds"),
        ("bell = 1", "bell must be true or false"),
        ("endpoint = 'ftp://x'", "must start with http://"),
    ],
)
def test_bad_files_are_explained(tmp_path: Path, text: str, words: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    assert words in str(info.value)
    if "at least" not in words and "must start" not in words:
        assert str(path) in str(info.value)


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("# a comment\n\ncolour = 'red'\n", 3, "unknown setting 'colour'"),
        ("theme = 'setui-mono'\n  interval = 'fast'\n", 2, "interval must be a number"),
        ("bell = true\n'interval' = 0.05\n", 2, "must be 0.2 to 300 seconds"),
        ("\n\n\nendpoint = 'ftp://x'\n", 4, "must start with http://"),
        ("history_days = 0\nhistory-days = -1\n", 2, "history-days must be a number"),
        ("bell = true\nprometheus-user = 'u'\n", 2, "basic auth needs both"),
        ("read-only = true\napprovers = ['a b']\n", 2, "approvers must be user names"),
    ],
)
def test_a_bad_setting_is_named_at_its_line(tmp_path: Path, text: str, line: int,
                                            words: str) -> None:
    """As a policy's errors are: ``FILE:LINE: why``."""
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    assert f"config file {path}:{line}: " in str(info.value), str(info.value)
    assert words in str(info.value)


def test_a_bad_setting_from_the_environment_names_no_line_of_the_file(
        tmp_path: Path) -> None:
    path = write(tmp_path, "\nendpoint = 'http://127.0.0.1:1'\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={"SETUI_ENDPOINT": "ftp://x"})
    assert str(info.value).startswith("environment variable SETUI_ENDPOINT: "), info.value


def test_a_file_nested_too_deeply_is_explained(tmp_path: Path) -> None:
    # The parser recurses once a level: this once ended in a RecursionError traceback.
    path = write(tmp_path, "endpoint = " + "[" * 100_000 + "\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    assert "not valid TOML" in str(info.value) and "nested too deeply" in str(info.value)
    assert str(path) in str(info.value)


def test_explicit_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.toml", environ={})


def test_data_dir_from_environment(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, ""), environ={"SETUI_DATA_DIR": str(tmp_path / "d")})
    assert config.data_dir == tmp_path / "d"


def test_history_days_zero_keeps_the_history_forever(tmp_path: Path) -> None:
    from datetime import datetime, timedelta, timezone

    from setui.core.model import parse_document
    from setui.store import Store

    config = load_config(write(tmp_path, "history-days = 0\n"), environ={})
    assert config.history_days == 0
    # As the dashboard and approve pass it on: 0 must keep everything, not prune all.
    t0 = datetime(2024, 5, 14, tzinfo=timezone.utc)
    with Store.open_dir(tmp_path / "data", history_days=config.history_days) as store:
        for number in (1, 2):
            store.history.record(parse_document({"DocumentIncarnation": number,
                                                 "Events": []}),
                                  seen_at=t0 + timedelta(days=3650 * number),
                                  endpoint="http://e")
        assert store.history.prune(now=t0 + timedelta(days=100_000)) == 0
        assert [r.incarnation for r in store.history.incarnations()] == [2, 1]
    with pytest.raises(ConfigError, match="history-days must be a number of days, or 0"):
        load_config(write(tmp_path, "history-days = -1\n"), environ={})


@pytest.mark.parametrize(("env", "named"), [
    ({"SETUI_ENDPOINT": "http://x/?a=1"}, "environment variable SETUI_ENDPOINT"),
    ({"SETUI_ENDPOINT": "http://[::1"}, "environment variable SETUI_ENDPOINT"),
    ({"SETUI_API_VERSION": "{latest}"}, "environment variable SETUI_API_VERSION"),
])
def test_bad_environment_values_are_refused_and_named(tmp_path: Path, env: dict[str, str],
                                                      named: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(environ={"SETUI_CONFIG": str(tmp_path / "absent.toml"), **env})
    assert str(caught.value).startswith(named + ": ")


@pytest.mark.parametrize("value", ["nan", "inf"])
def test_a_non_finite_interval_in_the_file_is_refused(tmp_path: Path, value: str) -> None:
    file = tmp_path / "config.toml"
    file.write_text(f"interval = {value}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"interval must be 0\.2 to 300 seconds"):
        load_config(file, environ={})


# -- the config must be a small regular file ---------------------------------------------------
def test_a_device_is_refused_in_words() -> None:
    if not Path("/dev/zero").exists():
        pytest.skip("no /dev/zero")
    with pytest.raises(ConfigError, match="not a regular file"):
        load_config(Path("/dev/zero"), environ={})


def test_a_directory_is_refused_in_words(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file"):
        load_config(tmp_path, environ={})


def test_a_file_over_a_megabyte_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "big.toml"
    path.write_text("# " + "x" * (1024 * 1024) + "\n")
    with pytest.raises(ConfigError, match="larger than 1024 KB"):
        load_config(path, environ={})


@pytest.mark.slow
def test_a_named_pipe_is_refused_without_waiting(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    if not hasattr(os, "mkfifo"):
        pytest.skip("no named pipes here")
    fifo = tmp_path / "config.toml"
    os.mkfifo(fifo)
    # A real process: were the open to block on the pipe, the timeout would end the test.
    done = subprocess.run([sys.executable, "-m", "setui.cli", "history", "--config",
                           str(fifo)], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and "is not a regular file" in done.stderr
    assert "Traceback" not in done.stderr


def test_audit_forward_setting_from_file_and_environment(tmp_path: Path) -> None:
    path = write(tmp_path, 'audit-forward = "udp://127.0.0.1:5514"\n')
    assert load_config(path, environ={}).audit_forward == "udp://127.0.0.1:5514"
    env = {"SETUI_AUDIT_FORWARD": "none"}
    assert load_config(path, environ=env).audit_forward == "none"
    with pytest.raises(ConfigError, match="audit-forward"):
        load_config(write(tmp_path, 'audit-forward = "smtp://x"\n'), environ={})


# -- save_setting: the dashboard's palette remembers a theme ---------------------------------
def test_save_setting_replaces_one_value_and_keeps_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('# mine\nendpoint = "http://127.0.0.1:8080"\n\ntheme = \'setui-dark\'  '
                    '# at night\ninterval = 2\n', encoding="utf-8")
    path.chmod(0o640)
    save_setting(path, "theme", "setui-light")
    assert path.read_text(encoding="utf-8") == (
        '# mine\nendpoint = "http://127.0.0.1:8080"\n\ntheme = "setui-light"  # at night\n'
        'interval = 2\n')
    assert path.stat().st_mode & 0o777 == 0o640
    assert load_config(path).theme == "setui-light"
    assert [p.name for p in tmp_path.iterdir()] == ["config.toml"]  # no temporary left


def test_save_setting_adds_the_line_or_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "new" / "config.toml"
    save_setting(missing, "theme", "setui-amber")
    assert missing.read_text(encoding="utf-8") == 'theme = "setui-amber"\n'
    other = tmp_path / "other.toml"
    other.write_text("bell = false", encoding="utf-8")  # no newline at the end
    save_setting(other, "theme", "setui-mono")
    assert other.read_text(encoding="utf-8") == 'bell = false\ntheme = "setui-mono"\n'


def test_save_setting_leaves_a_file_it_cannot_edit_alone(tmp_path: Path) -> None:
    broken = tmp_path / "broken.toml"
    broken.write_text("theme = \n", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid TOML, so it is left alone"):
        save_setting(broken, "theme", "setui-light")
    assert broken.read_text(encoding="utf-8") == "theme = \n"
    multiline = tmp_path / "multi.toml"
    multiline.write_text('theme = """setui-dark"""\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="add the line"):
        save_setting(multiline, "theme", "setui-light")
    assert multiline.read_text(encoding="utf-8") == 'theme = """setui-dark"""\n'


def test_save_setting_reads_the_file_as_load_config_does(tmp_path: Path) -> None:
    big = tmp_path / "big.toml"
    big.write_text("# " + "x" * (1024 * 1024) + "\n")
    with pytest.raises(ConfigError, match="larger than 1024 KB"):
        save_setting(big, "theme", "setui-light")
    with pytest.raises(ConfigError):  # a directory is no config file to rewrite
        save_setting(tmp_path, "theme", "setui-light")


def test_the_agents_socket_and_approvers(tmp_path: Path) -> None:
    path = write(tmp_path, 'socket = "~/api.sock"\napprovers = ["alice", "%sre", "svc_1$"]\n')
    config = load_config(path, environ={})
    assert config.socket == Path("~/api.sock").expanduser()
    assert config.approvers == ("alice", "%sre", "svc_1$")
    assert load_config(path, environ={"SETUI_SOCKET": "/run/x.sock"}).socket == \
        Path("/run/x.sock")
    assert load_config(write(tmp_path, "approvers = []\n"), environ={}).approvers == ()


@pytest.mark.parametrize("text", ['approvers = "alice"', 'approvers = ["al ice"]',
                                  'approvers = [1]', 'approvers = ["%"]',
                                  'approvers = ["alice\\u202e"]', 'approvers = ["-rf"]'])
def test_approvers_must_be_names(tmp_path: Path, text: str) -> None:
    with pytest.raises(ConfigError, match="approvers"):
        load_config(write(tmp_path, text), environ={})


# Each setting a SETUI_* variable stands for: (the file's value, the environment's), and
# what the environment's reads as. The user and the password go in pairs (basic auth needs
# both), so the file gives both and the environment one.
_BOTH: dict[str, tuple[str, str, object]] = {
    "endpoint": ("http://127.0.0.1:1", "http://127.0.0.1:2", "http://127.0.0.1:2"),
    "api_version": ("2019-08-01", "2020-07-01", "2020-07-01"),
    "data_dir": ("/srv/file-data", "/srv/env-data", Path("/srv/env-data")),
    "audit_forward": ("udp://127.0.0.1:5514", "none", "none"),
    "prometheus": ("http://127.0.0.1:9090", "http://127.0.0.1:9091", "http://127.0.0.1:9091"),
    "prometheus_token": ("file-token", "env-token", "env-token"),
    "prometheus_user": ("file-user", "env-user", "env-user"),
    "prometheus_password": ("file-secret", "env-secret", "env-secret"),
    "socket": ("/run/file.sock", "/run/env.sock", Path("/run/env.sock")),
}


def test_every_setting_a_variable_stands_for_is_tried_below() -> None:
    from setui.settings.environment import VARIABLES

    assert set(_BOTH) == set(VARIABLES)


@pytest.mark.parametrize("setting", sorted(_BOTH))
def test_the_environment_wins_over_the_file(tmp_path: Path, setting: str) -> None:
    from setui.settings.environment import VARIABLES

    in_file, in_env, read_as = _BOTH[setting]
    lines = {setting: in_file}
    if setting in ("prometheus_user", "prometheus_password"):
        lines = {"prometheus_user": "file-user", "prometheus_password": "file-secret"}
    path = write(tmp_path, "".join(f'{key.replace("_", "-")} = "{value}"\n'
                                   for key, value in lines.items()))
    path.chmod(0o600)  # it may hold a secret
    assert getattr(load_config(path, environ={}), setting) != read_as  # the file's, alone
    assert getattr(load_config(path, environ={VARIABLES[setting]: in_env}), setting) == read_as
    # Empty is unset: the file's value stands.
    assert getattr(load_config(path, environ={VARIABLES[setting]: ""}), setting) != read_as


def test_without_a_config_the_store_reads_the_same_variables(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from setui.store import Store, default_data_dir

    monkeypatch.setenv("SETUI_DATA_DIR", str(tmp_path / "env-data"))
    monkeypatch.setenv("SETUI_AUDIT_FORWARD", "none")
    assert default_data_dir() == tmp_path / "env-data"
    with Store.open_dir(None) as store:
        assert store.path.parent == tmp_path / "env-data"
        assert store.audit_log.forwarder.target.kind == "none"
    monkeypatch.setenv("SETUI_DATA_DIR", "")  # empty is unset, here as in the config
    assert default_data_dir() != Path("")



@pytest.mark.slow
def test_a_config_file_that_cannot_be_looked_for_is_said_not_a_traceback(
        tmp_path: Path, unwritable: tuple[Path, Callable[[], Any] | None]) -> None:
    """The config file under a directory this user may not search: said in words, exit
    2 (it raised PermissionError from Path.exists: a traceback)."""
    _, how = unwritable
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "config.toml").write_text('vm-name = "x"\n')
    hidden.chmod(0o000)
    try:
        done = subprocess.run([*SETUI, "events", "--endpoint", "http://127.0.0.1:9"],
                              env={**os.environ, "SETUI_CONFIG": str(hidden / "config.toml")},
                              preexec_fn=how, capture_output=True, text=True, timeout=60)
    finally:
        hidden.chmod(0o700)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 2, done.stderr
    assert "cannot look for the config file" in done.stderr, done.stderr
    assert "Permission denied" in done.stderr, done.stderr


def test_what_the_root_agent_reads_is_checked_before_it_is_read(tmp_path: Path) -> None:
    # setui agent passes setui.agent.trust's check (tests/agent/test_trust.py, and at
    # SIGHUP tests/api/test_config_trust.py); a front end passes none.
    file = write(tmp_path, "not TOML [")
    asked: list[Path] = []

    def trust(path: Path) -> str | None:
        asked.append(path)
        return f"{path}: owned by uid 1001 (alice), not by root or this agent's user"

    with pytest.raises(ConfigError) as refused:
        load_config(file, environ={}, trust=trust)
    assert str(refused.value) == (f"the config file: {file}: owned by uid 1001 (alice), "
                                  "not by root or this agent's user")
    assert asked == [file.absolute()]
    # No file to read: nothing to ask of it.
    absent = {"SETUI_CONFIG": str(tmp_path / "absent.toml")}
    assert config_source(None, absent) is None
    assert load_config(None, environ=absent, trust=trust) == Config()
    assert config_source(None, {"SETUI_CONFIG": str(file)}) == file
    assert len(asked) == 1
