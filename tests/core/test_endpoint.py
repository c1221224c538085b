"""The endpoint and api-version checks shared by the client, the config and the CLI."""

from __future__ import annotations

import pytest

from setui.core.endpoint import DEFAULT_ENDPOINT, check_api_version, check_endpoint


@pytest.mark.parametrize("endpoint", [
    "http://u:secret@host?x=1", "http://u:secret@host/ x", "https://secret@[::1",
    "http://u:secret@host:99999",
])
def test_a_password_in_the_endpoint_is_never_repeated(endpoint: str) -> None:
    with pytest.raises(ValueError) as caught:
        check_endpoint(endpoint)
    assert "secret" not in str(caught.value)
    assert "user name or password" in str(caught.value)


@pytest.mark.parametrize(("endpoint", "words"), [
    ("", "empty"), ("ftp://x", "must start with http"), ("http://", "no host"),
    ("http://[::1", "not a valid URL"), ("http://x:0", "outside 1-65535"),
    ("http://x:99999", "outside 1-65535"), ("http://x/?a=1", "query or fragment"),
    ("http://x y", "spaces"),
])
def test_bad_endpoints_are_explained(endpoint: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        check_endpoint(endpoint)


def test_good_endpoints_lose_their_trailing_slash() -> None:
    assert check_endpoint(DEFAULT_ENDPOINT + "/") == DEFAULT_ENDPOINT
    assert check_endpoint(" https://[::1]:8080/ ") == "https://[::1]:8080"


def test_api_versions_are_checked_by_shape() -> None:
    assert check_api_version("2099-01-01") == "2099-01-01"
    with pytest.raises(ValueError, match="known versions"):
        check_api_version("{latest}")


def test_ports() -> None:
    assert check_endpoint("http://[::1]:65535") == "http://[::1]:65535"
    assert check_endpoint("http://[::1]") == "http://[::1]"
    with pytest.raises(ValueError, match="not a number"):
        check_endpoint("http://x:8o")
