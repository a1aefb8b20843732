"""httpkit.refusals: Starlette's routing refusals, worded as what was asked."""

from __future__ import annotations

from httpkit.refusals import routing_message


def test_an_unknown_path_is_named() -> None:
    assert routing_message("GET", "/nope", 404, "Not Found", None) == "no path /nope"


def test_a_wrong_method_names_the_methods_the_path_takes() -> None:
    message = routing_message("GET", "/generate", 405, "Method Not Allowed", {"Allow": "POST"})
    assert message == "GET is not allowed on /generate; it takes POST"
    bare = routing_message("PUT", "/x", 405, "Method Not Allowed", None)
    assert bare == "PUT is not allowed on /x"


def test_other_refusals_keep_their_detail() -> None:
    """A route's own 404 (an unknown model, say) is its message, not a missing path."""
    assert routing_message("GET", "/v1/models/x", 404, "no model 'x'", None) == "no model 'x'"
    assert routing_message("POST", "/generate", 413, "too large", None) == "too large"
