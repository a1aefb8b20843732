"""Admin tokens: parsing ``name:token`` lists and constant-time identification."""

from __future__ import annotations

import hmac
from collections.abc import Callable

import pytest

from app.tokens import (
    NamedToken,
    Principal,
    TokenError,
    TokenTable,
    format_tokens,
    generate_token,
    parse_tokens,
)


class TestParseTokens:
    """``name:token,...`` lists."""

    def test_pairs_in_order(self) -> None:
        """Each entry becomes a named token; whitespace and empty entries are ignored."""
        parsed = parse_tokens(" alice:tok1 , ,ci:t0k-2.x= ,")
        assert parsed == (NamedToken("alice", "tok1"), NamedToken("ci", "t0k-2.x="))

    @pytest.mark.parametrize("text", [None, "", " , "])
    def test_nothing(self, text: str | None) -> None:
        """Unset or blank is no token at all."""
        assert parse_tokens(text) == ()

    def test_token_may_hold_a_colon_free_base64(self) -> None:
        """Only the first colon separates: base64 and URL-safe tokens parse whole."""
        assert parse_tokens("ops:ab+/cd==")[0].token == "ab+/cd=="

    @pytest.mark.parametrize(
        ("text", "problem"),
        [
            ("just-a-secret", "entry 1 is not name:token"),
            ("a:ok,:s3cret", "entry 2 is not name:token"),
            ("alice:", "entry 1 is not name:token"),
            ("al ice:s3cret", "name 'al ice'"),
            ("alice:s3c ret", "entry 1 (alice): the token has characters"),
            ("alice:s3cret,alice:other", "name 'alice' appears twice"),
        ],
    )
    def test_refusals_never_show_the_token(self, text: str, problem: str) -> None:
        """A malformed list is refused, naming the entry and never a token."""
        with pytest.raises(TokenError) as caught:
            parse_tokens(text, what="OPS")
        message = str(caught.value)
        assert problem in message and message.startswith("OPS: ")
        for secret in ("s3cret", "s3c ret", "just-a-secret", "other"):
            assert secret not in message

    def test_round_trip(self) -> None:
        """format_tokens writes what parse_tokens reads back."""
        tokens = (NamedToken("a", "x1"), NamedToken("b", "y2"))
        assert parse_tokens(format_tokens(tokens)) == tokens

    def test_repr_hides_the_token(self) -> None:
        """A named token's repr (in a log or a traceback) shows the name only."""
        assert "hunter2" not in repr(NamedToken("alice", "hunter2"))

    def test_generated_tokens_are_long_and_fresh(self) -> None:
        """Generated tokens carry 256 bits, parse as tokens, and never repeat."""
        tokens = {generate_token() for _ in range(50)}
        assert len(tokens) == 50 and all(len(token) == 64 for token in tokens)
        assert not any(token.startswith("-") for token in tokens), "reads as an option"
        assert all(parse_tokens(f"console:{token}") for token in tokens)


class TestTokenTable:
    """Who presented a token."""

    table = TokenTable(
        operators=(NamedToken("alice", "op-token-1"), NamedToken("ci", "op-token-2")),
        viewers=(NamedToken("grafana", "view-token"),),
    )

    def test_roles(self) -> None:
        """Operators and viewers are identified by name and role."""
        assert self.table.identify("op-token-2") == Principal("ci", "operator")
        assert self.table.identify("view-token") == Principal("grafana", "viewer")
        assert Principal("ci", "operator").can_operate
        assert not Principal("grafana", "viewer").can_operate

    @pytest.mark.parametrize("presented", ["", "op-token", "op-token-10", "OP-TOKEN-1", "é"])
    def test_near_misses_are_nobody(self, presented: str) -> None:
        """A prefix, an extension, another case or an empty string matches nobody."""
        assert self.table.identify(presented) is None

    def test_every_token_is_compared(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """hmac.compare_digest runs against every configured token, whoever matches first."""
        calls: list[bytes] = []
        real: Callable[[bytes, bytes], bool] = hmac.compare_digest

        def counting(given: bytes, expected: bytes) -> bool:
            calls.append(expected)
            return real(given, expected)

        monkeypatch.setattr(hmac, "compare_digest", counting)
        assert self.table.identify("op-token-1") == Principal("alice", "operator")
        assert len(calls) == 3
        calls.clear()
        assert self.table.identify("nobody's") is None and len(calls) == 3

    def test_a_name_or_token_in_both_roles_is_refused(self) -> None:
        """One name, or one token, may not be both an operator's and a viewer's."""
        with pytest.raises(TokenError, match="both"):
            TokenTable((NamedToken("a", "x"),), (NamedToken("a", "y"),))
        with pytest.raises(TokenError, match="two names") as caught:
            TokenTable((NamedToken("a", "same"),), (NamedToken("b", "same"),))
        assert "same" not in str(caught.value).replace("the same token", "")

    def test_empty(self) -> None:
        """A table without tokens says so and identifies nobody."""
        assert TokenTable().empty and TokenTable().identify("") is None
