"""What counts as this machine's loopback: strict, since secrets go only there in clear."""

from __future__ import annotations

import pytest

from setui.system.loopback import is_loopback


@pytest.mark.parametrize("host", ["localhost", "LOCALHOST.", "127.0.0.1", "127.8.9.10",
                                  "::1", "[::1]", "::ffff:127.0.0.1"])
def test_loopback(host: str) -> None:
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["", "localhost.example", "evil-localhost", "10.0.0.1",
                                  "0.0.0.0", "::", "::ffff:10.0.0.1", "128.0.0.1",
                                  "prom.example"])
def test_not_loopback(host: str) -> None:
    assert not is_loopback(host)
