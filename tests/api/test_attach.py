"""A front end attaches to the agent when its socket answers, and otherwise says in words
why it runs standalone: told so, nothing there, another version of the API."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest

from setui.api.attach import attach, attached_words, reach
from setui.emulator.scenario import parse_scenario
from setui.emulator.server import Emulator
from setui.settings.config import Config
from tests.support.api_helpers import plain_env, stand_in_agent, start_agent, stop

pytestmark = pytest.mark.skipif(os.name != "posix", reason="Unix sockets")


def test_told_to_run_standalone_it_does_not_even_look(tmp_path: Path) -> None:
    client, words = attach(Config(standalone=True, socket=tmp_path / "api.sock"))
    assert client is None
    assert words == "standalone (--standalone): polling IMDS itself"


def test_nothing_at_the_socket_is_standalone_and_says_where_it_looked(tmp_path: Path) -> None:
    client, words = attach(Config(socket=tmp_path / "api.sock"))
    assert client is None
    assert words == (f"standalone: no agent at {tmp_path / 'api.sock'}: nothing is there "
                     "(the socket named by --socket, SETUI_SOCKET or socket = in the config)")
    # The service's own socket, with no service here: standalone, nothing to go around.
    found = reach(Config(), default=tmp_path / "run" / "api.sock")
    assert found.client is None and found.line is None and found.around is None
    assert found.words == f"standalone: no agent at {tmp_path / 'run' / 'api.sock'}"


def test_a_file_or_a_directory_given_as_the_socket_is_not_a_socket(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    (tmp_path / "dir").mkdir()
    for name, kind in (("file", "a regular file"), ("dir", "a directory")):
        found = reach(Config(socket=tmp_path / name))
        assert found.client is None and found.wrong
        assert found.line == (f"standalone: no agent at {tmp_path / name}: it is {kind}, "
                              "not a socket")
        assert found.around is not None and "--standalone" in found.around


def test_the_service_installed_and_not_answering_is_said_and_not_gone_around(
        tmp_path: Path) -> None:
    """Found by the layout under a test root (SETUI_SYSTEM_ROOT): never the real /run."""
    from setui.install.layout import system_layout

    layout = system_layout({"SETUI_SYSTEM_ROOT": str(tmp_path)})
    assert layout.service_installed() is None
    layout.runtime_dir.mkdir(parents=True)
    assert layout.service_installed() == tmp_path / "run" / "setui"
    found = reach(Config(), default=layout.socket, service=layout.service_installed())
    assert found.client is None and not found.wrong
    assert found.line == (f"standalone: no agent at {layout.socket}, though the agent is "
                          f"installed as this VM's service ({layout.runtime_dir})")
    assert found.around is not None and found.around.startswith(
        f"the agent is installed as this VM's service ({layout.runtime_dir}) "
        f"and cannot be reached: no agent at {layout.socket}. ")
    told = reach(Config(standalone=True), default=layout.socket,
                 service=layout.service_installed())
    assert told.told and told.around is None and told.line is None


def test_an_agent_of_another_api_version_is_not_attached_to(tmp_path: Path) -> None:
    """A hello of version 99 (a newer agent beside an older front end): standalone, and
    the status line says which version each speaks."""
    path = tmp_path / "api.sock"
    with stand_in_agent(path, {"api": 99}):
        client, words = attach(Config(socket=path))
    assert client is None
    assert words.startswith("standalone: the agent sent something unreadable: ")
    assert "API version 99; this setui speaks version 1" in words


@pytest.mark.slow
def test_a_running_agent_is_attached_to_and_named(tmp_path: Path) -> None:
    scenario = parse_scenario('name = "quiet"\nvm_name = "vm-0"\ntail = 600\n')
    with Emulator(scenario) as emulator:
        env = plain_env(tmp_path, sock="api.sock")
        proc, _ = start_agent(emulator.url, tmp_path, env=env)
        try:
            client, words = attach(Config(socket=tmp_path / "api.sock"))
            assert client is not None
            with client:
                agent = client.hello.agent
                assert agent.pid == proc.pid
                assert words.startswith(f"attached to the agent (pid {proc.pid}, up ")
                later = agent.since + timedelta(days=3, hours=2)
                assert attached_words(client, later) == \
                    f"attached to the agent (pid {proc.pid}, up 3d 02h)"
        finally:
            assert stop(proc) == 0


def test_the_agent_itself_refuses_standalone(capsys: pytest.CaptureFixture[str]) -> None:
    from setui.cli import main

    assert main(["agent", "--standalone"]) == 2
    assert "--standalone is for the other commands" in capsys.readouterr().err


def test_standalone_from_the_config_file_and_the_command_line(tmp_path: Path) -> None:
    from setui.cli import build_parser, resolve_config
    from setui.settings.config import load_config

    config_file = tmp_path / "config.toml"
    config_file.write_text("standalone = true\n")
    assert load_config(config_file).standalone is True
    argv = ["events", "--standalone", "--socket", str(tmp_path / "s")]
    config = resolve_config(build_parser(argv).parse_args(argv))
    assert config.standalone is True and config.socket == tmp_path / "s"
