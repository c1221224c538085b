"""The endpoint and api-version checks shared by the client, the config and the CLI."""

from __future__ import annotations

import pytest

from setui.core.endpoint import (
    DEFAULT_ENDPOINT,
    check_api_version,
    check_endpoint,
    endpoint_key,
)


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


@pytest.mark.parametrize(("spellings", "key"), [
    (["HTTP://127.0.0.1:8080", "http://localhost:8080/", "http://[::1]:8080//",
      "http://LOCALHOST.:8080", "http://127.1:8080", "http://[::ffff:127.0.0.1]:8080"],
     "http://127.0.0.1:8080"),
    (["http://169.254.169.254", "http://169.254.169.254:80/", "HTTP://169.254.169.254/",
      "http://2852039166", "http://0xa9fea9fe:80", "http://169.254.43518"],
     "http://169.254.169.254"),
    (["https://Example.COM:443/Path/", "https://example.com/Path", "https://example.com/./Path",
      "https://example.com/x/../Path//", "https://example.com/%50ath", "https://example.com/%2e/Path"],
     "https://example.com/Path"),
    (["http://h/a%2fb", "http://h/a%2Fb/"], "http://h/a%2Fb"),
    (["http://169.254.169.254/.", "http://169.254.169.254/a/..", "http://169.254.169.254/%2E/"],
     "http://169.254.169.254"),
    (["http://[FE80::1%25eth0]:9/", "http://[fe80::1%25eth0]:9"], "http://[fe80::1%25eth0]:9"),
])
def test_every_spelling_of_one_endpoint_is_one_key(spellings: list[str], key: str) -> None:
    assert {endpoint_key(s) for s in spellings} == {key}


def test_what_differs_stays_apart() -> None:
    keys = {endpoint_key(s) for s in ("http://127.0.0.1:8080", "http://127.0.0.1:8081",
                                      "https://127.0.0.1:8080", "http://127.0.0.2:8080",
                                      "http://127.0.0.1:8080/a", "http://127.0.0.1:8080/A")}
    assert len(keys) == 6


@pytest.mark.parametrize("text", ["garbage", "ftp://x", "http://[::1", "http://x:99999", ""])
def test_what_is_not_an_endpoint_comes_back_as_it_was(text: str) -> None:
    assert endpoint_key(f" {text} ") == text
