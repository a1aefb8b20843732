"""The audit trail: a bounded ring of the latest audit records, newest first, fed by
:func:`app.audit.audit`, and ``GET /api/audit`` reading it for viewers and operators."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.audit import audit, audit_log
from app.audit_trail import AuditEntry, AuditTrail, trail_of
from app.catalogue import command
from app.main import create_app
from app.settings import AdminSettings
from router_core.audit import MAX_VALUE_CHARS

OPERATOR, VIEWER = "op-token-secret-1", "view-token-secret-1"


def record(n: int) -> dict[str, object]:
    return {"who": "ops", "action": "drain", "target": f"w{n}", "result": "ok", "status": 200}


class TestAuditTrail:
    def test_latest_is_newest_first_and_numbered(self) -> None:
        """Records come back newest first, each with its number from 1 and its time."""
        ticks = itertools.count(100)
        trail = AuditTrail(clock=lambda: float(next(ticks)))
        for n in range(3):
            trail.add(record(n))
        latest = trail.latest(10)
        assert [(e.seq, e.target, e.time) for e in latest] == [
            (3, "w2", 102.0),
            (2, "w1", 101.0),
            (1, "w0", 100.0),
        ]
        assert [e.seq for e in trail.latest(2)] == [3, 2]
        assert trail.latest(0) == []

    def test_the_ring_forgets_the_oldest(self) -> None:
        """Past its capacity the trail keeps the latest records; the total goes on."""
        trail = AuditTrail(capacity=2)
        for n in range(5):
            trail.add(record(n))
        page = trail.page(10)
        assert [e.target for e in page.records] == ["w4", "w3"]
        assert (page.capacity, page.total) == (2, 5)

    def test_a_capacity_below_one_is_refused(self) -> None:
        """A trail that keeps nothing is a mistake."""
        with pytest.raises(ValueError):
            AuditTrail(capacity=0)

    def test_the_listener_hears_each_record(self) -> None:
        """follow() gets every record added afterwards; None stops it."""
        trail, heard = AuditTrail(), list[AuditEntry]()
        trail.follow(heard.append)
        trail.add(record(1))
        trail.follow(None)
        trail.add(record(2))
        assert [e.target for e in heard] == ["w1"]

    def test_long_strings_are_cut_and_missing_fields_are_null(self) -> None:
        """A detail longer than the log keeps is cut; absent fields are None."""
        entry = AuditTrail().add({"action": "pause", "detail": "x" * (MAX_VALUE_CHARS + 50)})
        assert entry.detail is not None and len(entry.detail) == MAX_VALUE_CHARS + 3
        assert (entry.who, entry.status, entry.reason, entry.client) == (None, None, None, None)

    def test_audit_feeds_the_trail_of_its_log(self) -> None:
        """Every record audit() writes lands in its log's trail, and only there."""
        log, other = audit_log(None), audit_log(None)
        audit(
            log,
            command("freeze_gc"),
            who="ops",
            target="all",
            status=403,
            reason="forbidden",
            detail="no",
            client="127.0.0.1:5",
        )
        (entry,) = trail_of(log).latest(5)
        assert (entry.who, entry.action, entry.result, entry.status) == (
            "ops",
            "freeze_gc",
            "refused",
            403,
        )
        assert trail_of(log) is trail_of(log)
        assert trail_of(other).latest(5) == []


@pytest.fixture
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """The admin app with no router (mutations answer 503), an operator and a viewer."""
    nowhere = tmp_path_factory.mktemp("trail") / "router-control"
    settings = AdminSettings(
        control_endpoint=f"ipc://{nowhere}",
        control_timeout_s=0.2,
        operator_tokens=f"ops:{OPERATOR}",  # type: ignore[arg-type]
        viewer_tokens=f"viewer:{VIEWER}",  # type: ignore[arg-type]
    )
    with TestClient(create_app(settings)) as running:
        yield running


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


class TestAuditRoute:
    def test_every_attempt_is_listed_newest_first_by_token_name(self, client: TestClient) -> None:
        """A viewer's refused pause and an operator's failed drain are both listed, newest
        first, naming each token by its name and never by its value."""
        assert client.post("/api/pause", headers=bearer(VIEWER)).status_code == 403
        assert client.post("/api/workers/w1/drain", headers=bearer(OPERATOR)).status_code == 503
        answer = client.get("/api/audit", headers=bearer(VIEWER))
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert OPERATOR not in answer.text and VIEWER not in answer.text
        drain, pause = body["records"][:2]
        assert (drain["who"], drain["action"], drain["target"], drain["result"]) == (
            "ops",
            "drain",
            "w1",
            "error",
        )
        assert (drain["status"], drain["reason"]) == (503, "router_unavailable")
        assert (pause["who"], pause["action"], pause["result"], pause["status"]) == (
            "viewer",
            "pause",
            "refused",
            403,
        )
        assert drain["seq"] == pause["seq"] + 1 and body["total"] >= 2

    def test_limit_is_bounded_and_a_token_is_needed(self, client: TestClient) -> None:
        """``limit`` cuts the list; 0 or past the maximum is a 400; no token is a 401."""
        for _ in range(3):
            client.post("/api/freeze_gc", headers=bearer(VIEWER))
        assert len(client.get("/api/audit?limit=2", headers=bearer(VIEWER)).json()["records"]) == 2
        for bad in ("0", "201", "x"):
            answer = client.get(f"/api/audit?limit={bad}", headers=bearer(VIEWER))
            assert answer.status_code == 400, (bad, answer.text)
        assert client.get("/api/audit").status_code == 401
