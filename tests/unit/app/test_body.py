"""The admin app reads a body as JSON whatever its Content-Type says, and words what is
wrong with it for an operator: the decoder by itself, then the real app in-process over
the canned routers, its router calls for pause and continue recorded instead of sent."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.body import decode_body
from app.errors import ApiException, json_kind
from app.main import create_app
from app.settings import AdminSettings
from router_core.control.replies import OperationOutcome

OPS = "o" * 32
EXAMPLE = 'send a JSON object, such as {"timeout_s":5.0}'
PAUSE_EXAMPLE = 'send a JSON object, such as {"mode":"abort","timeout_s":5.0}'
FORM = "application/x-www-form-urlencoded"


def refusal(raw: bytes) -> str:
    """The message :func:`decode_body` refuses ``raw`` with."""
    with pytest.raises(ApiException) as refused:
        decode_body(raw, EXAMPLE)
    assert (refused.value.status, refused.value.code) == (400, "bad_request")
    return refused.value.message


class TestDecodeBody:
    """The body as a JSON value, or a 400 saying what is wrong with it and where."""

    @pytest.mark.parametrize("raw", [b"", b"  \r\n\t", b"\xef\xbb\xbf", b"null"])
    def test_no_body(self, raw: bytes) -> None:
        """Empty, blank, a byte order mark alone and ``null`` are no body."""
        assert decode_body(raw, EXAMPLE) is None

    def test_an_object(self) -> None:
        """An object is its value; a UTF-8 byte order mark before it is skipped."""
        assert decode_body(b'\xef\xbb\xbf{"mode": "in_place"}', EXAMPLE) == {"mode": "in_place"}

    @pytest.mark.parametrize(
        ("raw", "problem"),
        [
            (b"{not json", "object keys must be strings at byte 1"),
            (b'{"mode": "abort",}', "trailing comma in object at byte 17"),
            (b"mode=in_place&timeout_s=5", "invalid character at byte 0"),
            (b'{"a": 1} x', "trailing characters at byte 10"),
            (b'{"timeout_s": NaN}', "invalid character at byte 14"),
            (b'{"mode": "abort"', "it ends at byte 16, before the JSON value does"),
            (b'{"mode": "\\ud800"}', "a string holds a lone surrogate escape (such as \\ud800)"),
            (b'{"mode": "\xed\xa0\x80"}', "invalid UTF-8 encoded string"),
            (b'{"timeout_s": 1e400}', "number out of range"),
            (b"[" * 100_000, "it nests too deeply"),
        ],
    )
    def test_not_json(self, raw: bytes, problem: str) -> None:
        """Each way a body fails to be JSON is named, with where, and a body that would do."""
        message = refusal(raw)
        assert message.startswith(f"the body is not valid JSON: {problem}"), message
        assert message.endswith(f"; {EXAMPLE}")

    @pytest.mark.parametrize(
        ("raw", "kind"),
        [
            (b"[1, 2]", "an array"),
            (b'"in_place"', 'the string "in_place"'),
            (b"5", "5"),
            (b"true", "true"),
        ],
    )
    def test_not_an_object(self, raw: bytes, kind: str) -> None:
        """JSON that is not an object is named for what it is."""
        assert refusal(raw) == f"the body should be a JSON object, not {kind}; {EXAMPLE}"

    def test_kinds_are_printable_and_short(self) -> None:
        """A quoted string is ASCII-escaped (a lone surrogate cannot break the answer's
        encoding) and cut after 40 characters."""
        assert json_kind("\ud800\n") == 'the string "\\ud800\\n"'
        assert json_kind("x" * 100) == f'the string "{"x" * 40}"...'
        assert (json_kind(None), json_kind(0.5), json_kind({})) == ("null", "0.5", "an object")


class Recorder:
    """Stands in for the router's end of :meth:`RouterApi.call`: records each barrier's
    command and arguments and answers it as complete."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str | None, float]] = []

    async def call(self, command: Any, args: Any = None, *, by: str = "") -> OperationOutcome:
        mode = getattr(args, "mode", None)
        self.calls.append((command.name, mode, args.timeout_s))
        return OperationOutcome(
            op_id="1-1",
            seq=1,
            action=command.name,
            mode=mode,
            complete=True,
            acked=["engine"],
            stragglers=[],
            departed=[],
            elapsed_s=0.0,
            finished_at=1.0,
        )


@pytest.fixture
def admin(
    routers: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[TestClient, Recorder]]:
    """The admin app (lifespan run) with an operator token, its barriers recorded."""
    settings = AdminSettings(
        control_endpoint=routers[0],
        operator_tokens=f"ops:{OPS}",  # type: ignore[arg-type]
        audit_log=tmp_path / "audit.jsonl",
        control_timeout_s=2.0,
    )
    recorder = Recorder()
    headers = {"Authorization": f"Bearer {OPS}"}
    with TestClient(create_app(settings), headers=headers) as client:
        router = client.app.state.admin.router  # type: ignore[attr-defined]
        monkeypatch.setattr(router, "call", recorder.call)
        yield client, recorder


def error(answer: Any) -> str:
    """The message of an error answer in the app's one shape."""
    body = answer.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body
    return str(body["error"]["message"])


class TestAnyContentType:
    """Every route with a body reads it as JSON, whatever the Content-Type says."""

    @pytest.mark.parametrize(
        "content_type", [FORM, "text/plain", "multipart/form-data; boundary=x", None]
    )
    def test_pause_with_any_content_type(
        self, admin: tuple[TestClient, Recorder], content_type: str | None
    ) -> None:
        """curl's form type, text, multipart or none: the JSON body is the pause asked for."""
        client, recorder = admin
        headers = {} if content_type is None else {"Content-Type": content_type}
        body = b'{"mode": "in_place", "timeout_s": 5}'
        answer = client.post("/api/pause", content=body, headers=headers)
        assert answer.status_code == 200, answer.text
        assert recorder.calls == [("pause", "in_place", 5.0)]

    @pytest.mark.parametrize(
        ("path", "body", "call"),
        [
            ("/api/continue", b'{"timeout_s": 7}', ("continue", None, 7.0)),
            ("/pause_generation", b'{"mode": "retract", "other": 1}', ("pause", "retract", 5.0)),
            ("/continue_generation", b'{"timeout_s": 2}', ("continue", None, 2.0)),
        ],
    )
    def test_every_route_with_a_body(
        self,
        admin: tuple[TestClient, Recorder],
        path: str,
        body: bytes,
        call: tuple[str, str | None, float],
    ) -> None:
        """Continue and SGLang's names read a form-typed JSON body too."""
        client, recorder = admin
        answer = client.post(path, content=body, headers={"Content-Type": FORM})
        assert answer.status_code == 200, answer.text
        assert recorder.calls == [call]

    @pytest.mark.parametrize("body", [b"", b" \n", b"null"])
    def test_no_body_takes_the_defaults(
        self, admin: tuple[TestClient, Recorder], body: bytes
    ) -> None:
        """No body, a blank one or ``null``: the defaults (abort, 5 s), as before."""
        client, recorder = admin
        answer = client.post("/api/pause", content=body, headers={"Content-Type": FORM})
        assert answer.status_code == 200, answer.text
        assert recorder.calls == [("pause", "abort", 5.0)]

    def test_a_form_is_not_json(self, admin: tuple[TestClient, Recorder]) -> None:
        """A real form body: 400 saying it is not JSON and what to send instead."""
        client, recorder = admin
        answer = client.post("/api/pause", data={"mode": "in_place"})
        assert answer.status_code == 400
        assert error(answer) == (
            f"the body is not valid JSON: invalid character at byte 0; {PAUSE_EXAMPLE}"
        )
        assert recorder.calls == []


class TestErrorWording:
    """Schema errors name the field, what it should be and what it is; no 422 ever."""

    @pytest.mark.parametrize(
        ("body", "message"),
        [
            (
                {"mode": "sideways"},
                "mode: should be 'abort', 'retract' or 'in_place', not the string \"sideways\"",
            ),
            ({"timeout_s": "5"}, 'timeout_s: should be a number, not the string "5"'),
            ({"timeout_s": True}, "timeout_s: should be a number, not true"),
            ({"timeout_s": None}, "timeout_s: should be a number, not null"),
            ({"timeout_s": 0}, "timeout_s: should be greater than 0, not 0"),
            ({"timeout_s": 601}, "timeout_s: should be less than or equal to 600, not 601"),
            ({"surprise": 1}, "surprise: not a field of this request"),
            (
                {"mode": 3, "timeout_s": []},
                "mode: should be 'abort', 'retract' or 'in_place', not 3; "
                "timeout_s: should be a number, not an array",
            ),
        ],
    )
    def test_field_errors(
        self, admin: tuple[TestClient, Recorder], body: dict[str, Any], message: str
    ) -> None:
        """Each schema error: 400 ``bad_request`` with the operator's wording."""
        client, recorder = admin
        answer = client.post("/api/pause", content=json.dumps(body))
        assert answer.status_code == 400 and answer.json()["error"]["code"] == "bad_request"
        assert error(answer) == message
        assert recorder.calls == []

    def test_broken_json_with_the_json_type(self, admin: tuple[TestClient, Recorder]) -> None:
        """The JSON content type and a broken body: where it breaks, not ``1: JSON decode
        error``."""
        client, _ = admin
        headers = {"Content-Type": "application/json"}
        answer = client.post("/api/continue", content=b"{not json", headers=headers)
        assert answer.status_code == 400
        assert error(answer) == (
            "the body is not valid JSON: object keys must be strings at byte 1; "
            'send a JSON object, such as {"timeout_s":5.0}'
        )

    @pytest.mark.parametrize(
        ("method", "path", "allowed"),
        [("GET", "/api/pause", "POST"), ("PUT", "/api/workers", "GET")],
    )
    def test_wrong_method_is_405(
        self, admin: tuple[TestClient, Recorder], method: str, path: str, allowed: str
    ) -> None:
        """A method a path does not take: 405 ``method_not_allowed`` in the one shape,
        naming the method it takes, and ``Allow``."""
        client, _ = admin
        answer = client.request(method, path)
        assert answer.status_code == 405 and answer.headers["allow"] == allowed
        assert answer.json()["error"]["code"] == "method_not_allowed"
        assert error(answer) == f"{method} is not allowed on {path}; it takes {allowed}"

    @pytest.mark.parametrize("path", ["/api/nope", "/api/workers/", "/api/workers/w0/drain/x"])
    def test_unknown_path_is_404(self, admin: tuple[TestClient, Recorder], path: str) -> None:
        """A path the API does not have: 404 ``not_found`` naming it."""
        client, _ = admin
        answer = client.get(path)
        assert answer.status_code == 404 and answer.json()["error"]["code"] == "not_found"
        assert error(answer) == f"no path {path}"
