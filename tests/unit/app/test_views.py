"""The admin app's views: router replies as the API's models."""

from __future__ import annotations

from app.views import worker_order, workers_of
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


class TestWorkerOrder:
    """Workers are listed by id, whatever order the router holds them in."""

    def test_listed_by_id_whatever_the_router_order(self) -> None:
        """Every order the router may give (a restarted worker registers again, so it moves
        to its end) lists the same: by id, numbers as numbers, departed ones in place."""
        views = [
            view("w10"),
            view("w2", "dead", departed_s_ago=1.0),
            view("w1"),
            view("w0"),
            view("w2", pid=7),
            view("gpu-b3"),
            view("gpu-a12"),
        ]
        expected = ["gpu-a12", "gpu-b3", "w0", "w1", "w2", "w10"]
        for shift in range(len(views)):
            turned = views[shift:] + views[:shift]
            for order in (turned, turned[::-1]):
                listed = workers_of(order)
                assert [item.id for item in listed] == expected
                assert next(item for item in listed if item.id == "w2").pid == 7

    def test_ids_that_compare_equal_as_numbers_still_have_one_order(self) -> None:
        """``w01`` and ``w1`` (and ``w1x`` after ``w1``) keep one order both ways round."""
        ids = ["w1x", "w01", "w1", "w"]
        for order in (ids, ids[::-1]):
            listed = [item.id for item in workers_of([view(each) for each in order])]
            assert listed == ["w", "w01", "w1", "w1x"]

    def test_worker_order_key(self) -> None:
        """The key compares runs of digits as numbers, then the id itself."""
        assert worker_order("w10") == (("w", 10, ""), "w10")
        assert sorted(["a2b10", "a2b9", "a10b1"], key=worker_order) == ["a2b9", "a2b10", "a10b1"]

    def test_status_counts_in_life_order(self) -> None:
        """Status counts workers by state in the order of a worker's life, unknown last."""
        counts = {"dead": 1, "zombie": 2, "serving": 3, "draining": 1, "starting": 2}
        reply = status(workers=counts)
        assert list(reply.workers) == ["starting", "serving", "draining", "dead", "zombie"]
        assert reply.workers == counts
