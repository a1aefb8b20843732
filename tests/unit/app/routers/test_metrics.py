"""``GET /metrics`` on the admin app: its content type and who may read it, over the two
routers' canned control sockets (the ``routers`` fixture of ``tests/unit/app/conftest.py``)."""

from __future__ import annotations

from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import AdminSettings
from tests.unit.app.metrics.snapshots import parse


class TestMetricsRoute:
    """``GET /metrics`` on the admin app: content type and who may read it."""

    def settings(self, endpoints: tuple[str, str], **tokens: str) -> AdminSettings:
        tokenizer, detokenizer = endpoints
        return AdminSettings(
            control_endpoint=tokenizer,
            detok_control_endpoint=detokenizer,
            metrics_timeout_s=1.0,
            **tokens,  # type: ignore[arg-type]
        )

    def test_open_without_viewer_tokens_on_loopback(self, routers: tuple[str, str]) -> None:
        """Only operator tokens on loopback: Prometheus reads it without a token."""
        app = create_app(self.settings(routers, operator_tokens="ops:opstoken"))
        with TestClient(app) as client:
            answer = client.get("/metrics")
        assert answer.status_code == 200
        assert answer.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
        assert "switchboard_router_up" in parse(answer.content)

    def test_viewer_tokens_make_it_need_one(self, routers: tuple[str, str]) -> None:
        """With viewer tokens configured, no token is a 401 and a viewer's token reads it."""
        settings = self.settings(
            routers, operator_tokens="ops:opstoken", viewer_tokens="grafana:viewtoken"
        )
        with TestClient(create_app(settings)) as client:
            assert client.get("/metrics").status_code == 401
            bearer = {"Authorization": "Bearer viewtoken"}
            assert client.get("/metrics", headers=bearer).status_code == 200
