"""Frames and requests as a hostile peer sends them: whatever the bytes, the parser gives
a frame or a ProtocolError in words, never anything else, and never more than its limit."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from setui.api.protocol import (
    BAD_REQUEST,
    MAX_DEPTH,
    MAX_REQUEST,
    TOO_LARGE,
    UNKNOWN_OP,
    Fields,
    Frames,
    ProtocolError,
    decode_frame,
    encode_frame,
    parse_request,
    parse_server_frame,
)
from tests.support.api_helpers import JSON
from tests.support.examples import examples

OBJECTS = st.dictionaries(st.text(max_size=8), JSON, max_size=6)


@given(frames=st.lists(st.binary(max_size=50).filter(lambda b: b"\n" not in b), max_size=8),
       cuts=st.lists(st.integers(min_value=0, max_value=500), max_size=10))
def test_frames_come_out_whole_however_the_stream_is_cut(frames: list[bytes],
                                                         cuts: list[int]) -> None:
    stream = b"".join(f + b"\n" for f in frames)
    splitter = Frames(64)
    got: list[bytes] = []
    start = 0
    for cut in [*sorted({min(c, len(stream)) for c in cuts}), len(stream)]:
        out, error = splitter.feed(stream[start:cut])
        assert error is None
        got.extend(out)
        start = cut
    assert got == frames and splitter.pending == 0


def test_a_frame_past_the_limit_ends_the_stream_after_the_frames_before_it() -> None:
    splitter = Frames(10)
    out, error = splitter.feed(b"short\n" + b"x" * 11 + b"\nnext\n")
    assert out == [b"short"]
    assert error is not None and error.code == TOO_LARGE
    # Without an end: refused as soon as it passes the limit, not when the end comes.
    splitter = Frames(10)
    assert splitter.feed(b"x" * 6) == ([], None)
    out, error = splitter.feed(b"x" * 5)
    assert out == [] and error is not None and error.code == TOO_LARGE
    assert splitter.pending == 0  # nothing kept of it


@settings(max_examples=examples(300), deadline=None)
@given(st.binary(max_size=300))
def test_any_bytes_are_a_frame_or_a_protocol_error(data: bytes) -> None:
    try:
        assert isinstance(decode_frame(data), dict)
    except ProtocolError as exc:
        assert exc.code == BAD_REQUEST and exc.message


@pytest.mark.parametrize(("line", "words"), [
    (b"\xff\xfe", "not UTF-8"),
    (b"[1, 2]", "must be a JSON object"),
    (b'"text"', "must be a JSON object"),
    (b'{"a": NaN}', "not JSON"),
    (b'{"a": Infinity}', "not JSON"),
    (b'{"a": ' + b"9" * 5000 + b"}", "not JSON"),
    (b"[" * 100_000 + b"]" * 100_000, "nests deeper"),
    (b'{"a":' * (MAX_DEPTH + 1) + b"1" + b"}" * (MAX_DEPTH + 1), "nests deeper"),
])
def test_hostile_frames_are_refused_in_words(line: bytes, words: str) -> None:
    with pytest.raises(ProtocolError) as refused:
        decode_frame(line)
    assert words in refused.value.message


@settings(max_examples=examples(200), deadline=None)
@given(OBJECTS)
def test_what_is_encoded_is_ascii_one_line_and_reads_back_the_same(value: dict[str, Any],
                                                                   ) -> None:
    frame = encode_frame(value)
    assert frame.endswith(b"\n") and frame.count(b"\n") == 1 and frame.isascii()
    assert decode_frame(frame[:-1]) == json.loads(frame)


def test_controls_and_bidi_never_leave_raw() -> None:
    frame = encode_frame({"detail": "a\x1b[2Jb\u202ec\udc80"})
    assert b"\x1b" not in frame and "\u202e".encode() not in frame
    assert decode_frame(frame[:-1]) == {"detail": "a\x1b[2Jb\u202ec\udc80"}


@settings(max_examples=examples(300), deadline=None)
@given(OBJECTS)
def test_any_object_is_a_request_or_a_protocol_error(frame: dict[str, Any]) -> None:
    try:
        request = parse_request(frame)
    except ProtocolError as exc:
        assert exc.code in (BAD_REQUEST, UNKNOWN_OP) and exc.message
    else:
        assert isinstance(request.id, int) and request.op


def test_requests_name_what_is_wrong_and_keep_the_id_they_could_read() -> None:
    with pytest.raises(ProtocolError) as no_id:
        parse_request({"op": "state"})
    assert no_id.value.request_id is None and "id" in no_id.value.message
    for bad in (True, -1, 2**53, "1", 1.0):
        with pytest.raises(ProtocolError):
            parse_request({"id": bad, "op": "state"})
    with pytest.raises(ProtocolError) as unknown:
        parse_request({"id": 7, "op": "format_disk"})
    assert unknown.value.code == UNKNOWN_OP and unknown.value.request_id == 7
    assert parse_request({"id": 7, "op": "state"}).op == "state"


def test_fields_take_only_what_they_say() -> None:
    fields = Fields({"s": "x" * 11, "n": True, "f": 1e308,
                     "t": "2026-01-02T03:04:05.000000Z", "bad_t": "yesterday",
                     "l": [1] * 5}, "args")
    with pytest.raises(ProtocolError, match=r"args\.s: longer than 10"):
        fields.text("s", limit=10)
    with pytest.raises(ProtocolError, match=r"args\.n: expected a whole number"):
        fields.integer("n")
    with pytest.raises(ProtocolError, match=r"args\.missing: missing"):
        fields.text("missing")
    with pytest.raises(ProtocolError, match=r"args\.bad_t: expected a time"):
        fields.time("bad_t")
    with pytest.raises(ProtocolError, match=r"args\.l: more than 4 items"):
        fields.items("l", limit=4)
    assert fields.time("t").year == 2026 and fields.number("f") == 1e308
    assert fields.text("missing", optional=True) is None


@settings(max_examples=examples(300), deadline=None)
@given(OBJECTS)
def test_any_server_frame_is_an_answer_or_a_protocol_error(frame: dict[str, Any]) -> None:
    try:
        answer = parse_server_frame(frame)
    except ProtocolError:
        return
    assert answer.kind in ("hello", "ok", "error", "progress", "push")


def test_the_request_limit_is_what_the_docs_say() -> None:
    assert MAX_REQUEST == 64 * 1024
