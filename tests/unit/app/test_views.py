"""The admin app's views: router replies as the API's models."""

from __future__ import annotations

from app.views import workers_of
from tests.unit.app.router_replies import status, view, worker


class TestViews:
    """Router replies as API models."""

    def test_worker_fields(self) -> None:
        """Router names become the API's: worker_id -> id, address -> endpoint, ..."""
        item = worker("w0", departure_reason="dead_worker")
        assert (item.id, item.endpoint, item.last_heartbeat_s_ago) == (
            "w0",
            "ipc:///tmp/sb/worker-w0",
            0.1,
        )
        assert item.departure_reason == "dead_worker"
        assert worker("w1").departure_reason is None

    def test_live_worker_hides_its_departed_entry(self) -> None:
        """A restarted worker (same id) is listed once, live; of two departures, the latest."""
        listed = workers_of(
            [
                view("w0", pid=2),
                view("w0", "dead", pid=1, departed_s_ago=3.0),
                view("w1", "dead", pid=5, departed_s_ago=9.0),
                view("w1", "dead", pid=6, departed_s_ago=1.0),
            ]
        )
        assert [(item.id, item.state, item.pid) for item in listed] == [
            ("w0", "serving", 2),
            ("w1", "dead", 6),
        ]

    def test_status_carries_the_load(self) -> None:
        """Status: engine liveness and load, versions, router facts."""
        reply = status(load={"running": 3, "max_running": 8, "age_s": 0.2})
        assert reply.engine.live and reply.engine.load is not None
        assert reply.engine.load.running == 3 and reply.engine.load.token_usage == 0.0
        assert reply.router.pid == 7 and reply.versions.router == "1"
