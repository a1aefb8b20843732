"""docs/protocol.md, section 3.9: the stop rules as the doc states them are the code's."""

from __future__ import annotations

from pathlib import Path

from switchboard.engine.stopping import STOP_TAIL_SLACK, finish_reason

PROTOCOL = Path(__file__).resolve().parents[3] / "docs" / "protocol.md"


def _section_3_9() -> str:
    text = PROTOCOL.read_text(encoding="utf-8")
    start = text.index("\n### 3.9 ")
    return " ".join(text[start : text.index("\n### 3.10 ", start)].split())


def test_the_tail_is_the_longest_stop_string_plus_the_slack() -> None:
    assert f"length in UTF-8 bytes plus {STOP_TAIL_SLACK} (`STOP_TAIL_SLACK`)" in _section_3_9()


def test_a_stop_string_of_characters_split_over_byte_tokens_is_found() -> None:
    """Two 4-byte emoji spread over 8 one-byte tokens: the tail is counted in bytes, so
    the string completed by the last byte is seen."""
    data = "ab😀😀".encode()
    pieces = {index: bytes([byte]) for index, byte in enumerate(data)}

    def decode(ids: list[int]) -> str:
        return b"".join(pieces[i] for i in ids).decode("utf-8", errors="replace")

    ids = list(range(len(data)))
    assert finish_reason(ids, max_new_tokens=99, stop=("😀😀",), decode=decode) == {
        "type": "stop",
        "matched": "😀😀",
    }


def test_length_comes_first_and_does_not_wait_for_min_new_tokens() -> None:
    eos = 7
    ended = finish_reason([1, eos], max_new_tokens=2, min_new_tokens=5, end_token_ids={eos})
    assert ended == {"type": "length", "length": 2}


def test_nothing_else_ends_a_request_before_min_new_tokens() -> None:
    early = finish_reason([1, 7], max_new_tokens=9, min_new_tokens=3, stop_token_ids={7})
    assert early is None
    assert finish_reason([1, 2, 7], max_new_tokens=9, min_new_tokens=3, stop_token_ids={7}) == {
        "type": "stop",
        "matched": 7,
    }


def test_ignore_eos_leaves_stop_token_ids_alone() -> None:
    ids = [1, 7]
    assert finish_reason(ids, max_new_tokens=9, end_token_ids={7}, ignore_eos=True) is None
    stopped = finish_reason(ids, max_new_tokens=9, stop_token_ids={7}, ignore_eos=True)
    assert stopped == {"type": "stop", "matched": 7}


def test_stop_strings_in_the_requests_order_in_the_tail() -> None:
    text = {1: "a", 2: "b", 3: "c"}

    def decode(ids: list[int]) -> str:
        return "".join(text[i] for i in ids)

    # Both strings end at the new token: the request's order decides.
    for stop in (("c", "bc"), ("bc", "c")):
        ended = finish_reason([1, 2, 3], max_new_tokens=9, stop=stop, decode=decode)
        assert ended == {"type": "stop", "matched": stop[0]}
    # The tail is len("ab") + STOP_TAIL_SLACK ids: a string whose start lies further
    # back (behind ids of no text, skipped special tokens) is not seen.
    blank = {**text, 9: ""}

    def spaced(ids: list[int]) -> str:
        return "".join(blank[i] for i in ids)

    near = [1, *[9] * (1 + STOP_TAIL_SLACK - 1), 2]
    far = [1, *[9] * (2 + STOP_TAIL_SLACK), 2]
    assert finish_reason(near, max_new_tokens=99, stop=("ab",), decode=spaced) is not None
    assert finish_reason(far, max_new_tokens=99, stop=("ab",), decode=spaced) is None


def test_a_stop_string_passed_over_before_min_new_tokens_does_not_match_later() -> None:
    """ " two" is whole before min_new_tokens lets anything stop: it does not end the
    request later (the detokenizer could not trim it at the end); a new " two" does."""
    words = {1: "one", 2: " two", 3: " three", 4: " four"}

    def decode(ids: list[int]) -> str:
        return "".join(words[i] for i in ids)

    params = {"max_new_tokens": 9, "min_new_tokens": 3, "stop": (" two",), "decode": decode}
    assert finish_reason([1, 2, 3], **params) is None  # type: ignore[arg-type]
    assert finish_reason([1, 2, 3, 4], **params) is None  # type: ignore[arg-type]
    ended = finish_reason([1, 2, 3, 4, 2], **params)  # type: ignore[arg-type]
    assert ended == {"type": "stop", "matched": " two"}
