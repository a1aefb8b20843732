"""The compose stack, ``deploy/compose.yaml``, brought up with ``podman-compose``.

The image is built as ``make image`` would; the stack runs the one-shot ``secrets``
service, the control host, two replicas of the worker service (one worker host each)
and Prometheus with the compose scrape config and the shipped alert rules. Both replicas
register with the control host; a streaming ``/generate`` and an OpenAI completion
through each replica's published port read the engine's exact text; Prometheus scrapes
every target (the admin app and each replica, found by DNS) as up; no secret is on a
command line, in an environment or in a log; ``stop`` ends every container with status
0 well inside its grace period and ``down --volumes`` leaves nothing of the project.
Grafana cannot run here (no image, no server): its service is checked as configuration.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import yaml  # type: ignore[import-untyped]

from tests.integration.harness.compose import COMPOSE_FILE, ComposeStack, compose_stack
from tests.integration.harness.container import built_image
from tests.integration.harness.http_worker import predictor
from tests.integration.harness.polling import wait_until
from tests.integration.harness.predictor import Predictor
from tests.integration.harness.scrape import sample_sum
from tests.integration.harness.sse import stream_outcomes

#: A cold image build (base image, dependency wheels) may take minutes; cached, seconds.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]

__all__ = ["predictor"]

IMAGE_CACHE = Path.home() / ".cache" / "switchboard" / "image"
REPLICAS = 2
STARTUP_S = 120.0
#: Prometheus's first scrape comes ~6 s after it starts, DNS discovery refreshes every 5 s.
SCRAPED_S = 60.0
#: The worker service's stop_grace_period; a clean stop ends far inside it.
GRACE_S = 30.0
DEPLOY = COMPOSE_FILE.parent
#: Tokens each replica generates in the first test: three 16-token streams, then 9.
GENERATED = 3 * 16 + 9


def viewer_token(stack: ComposeStack) -> str:
    """The viewer token the ``secrets`` service wrote, read inside the control host."""
    return stack.read(stack.containers("control")[0], "/etc/switchboard/secrets/viewer.token")


def workers(stack: ComposeStack, token: str) -> dict[str, dict[str, Any]]:
    """``GET /api/workers`` on the control host's admin app, with a viewer ``token``."""
    with httpx.Client(trust_env=False, timeout=10.0) as client:
        answer = client.get(
            f"{stack.admin_url}/api/workers", headers={"Authorization": f"Bearer {token}"}
        )
    assert answer.status_code == 200, answer.text
    return {view["id"]: view for view in answer.json()["workers"]}


@pytest.fixture(scope="module")
def stack() -> Iterator[ComposeStack]:
    """The compose stack, once every replica's worker serves (bounded)."""
    with compose_stack(built_image(IMAGE_CACHE)) as running:
        replicas = running.containers("worker")
        assert len(replicas) == REPLICAS, replicas
        token = wait_until(
            lambda: viewer_token(running),
            STARTUP_S,
            "the control host's viewer token",
            interval=0.5,
            retry_on=(AssertionError,),
        )

        def serving() -> bool:
            try:
                listed = workers(running, token)
            except (httpx.HTTPError, AssertionError):
                return False
            return len(listed) == REPLICAS and all(
                view["state"] == "serving" for view in listed.values()
            )

        wait_until(
            serving,
            STARTUP_S,
            lambda: f"both replicas serving:\n{running.all_logs()}",
            interval=0.5,
        )
        yield running


class TestComposeStack:
    def test_both_replicas_register_and_serve_exact_text(
        self, stack: ComposeStack, predictor: Predictor
    ) -> None:
        """The control host lists one serving worker per replica, registered from that
        replica's host name. Through each replica's published port, streams and an
        OpenAI completion (the official SDK) read the engine's exact text; the replica's
        /health names one of its own workers and its /metrics counts those tokens."""
        listed = workers(stack, viewer_token(stack))
        hosts = {stack.hostname(name): name for name in stack.containers("worker")}
        assert {view["host"] for view in listed.values()} == set(hosts), listed
        for host, name in hosts.items():
            url = stack.published(name, 8000)
            outcomes = asyncio.run(stream_outcomes(url, predictor, 3, 16, f"compose {host}"))
            assert outcomes == ["exact"] * 3, outcomes
            prompt = f"compose through {host}"
            with openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0) as sdk:
                raw = sdk.completions.with_raw_response.create(
                    model="default", prompt=prompt, max_tokens=9
                )
            assert raw.parse().choices[0].text == predictor.text(prompt, 9)
            with httpx.Client(base_url=url, trust_env=False, timeout=10.0) as http:
                answered = http.get("/health").headers["x-switchboard-worker"]
                assert answered.startswith(f"{host}-w") and answered in listed, answered

                # The replica's own /metrics counts what it generated: these requests.
                def generated(http: httpx.Client = http) -> bool:
                    answer = http.get("/metrics")
                    tokens = sample_sum(answer.text, "switchboard_generation_tokens_total")
                    return tokens >= GENERATED

                wait_until(
                    generated, 30.0, f"{host}'s /metrics counting {GENERATED} tokens", interval=0.5
                )

    def test_prometheus_scrapes_every_target_with_the_shipped_rules(
        self, stack: ComposeStack
    ) -> None:
        """Prometheus's targets are exactly the admin app (job switchboard) and every
        replica at its address (job switchboard-workers, by DNS), all up; its rules are
        the shipped alerts.yml's."""
        expected = {("switchboard", "control:8001")} | {
            ("switchboard-workers", f"{stack.address(name)}:8000")
            for name in stack.containers("worker")
        }

        def targets() -> dict[tuple[str, str], dict[str, Any]]:
            with httpx.Client(trust_env=False, timeout=5.0) as client:
                answer = client.get(f"{stack.prometheus_url}/api/v1/targets")
            answer.raise_for_status()
            return {
                (t["labels"]["job"], t["labels"]["instance"]): t
                for t in answer.json()["data"]["activeTargets"]
            }

        def all_up() -> bool:
            seen = targets()
            return set(seen) == expected and all(t["health"] == "up" for t in seen.values())

        wait_until(
            all_up,
            SCRAPED_S,
            lambda: f"every target up: {targets()}",
            interval=0.5,
            retry_on=(httpx.HTTPError,),
        )
        with httpx.Client(trust_env=False, timeout=5.0) as client:
            rules = client.get(f"{stack.prometheus_url}/api/v1/rules").json()["data"]
        loaded = {rule["name"] for group in rules["groups"] for rule in group["rules"]}
        shipped = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yml").read_text())
        assert loaded == {rule["alert"] for group in shipped["groups"] for rule in group["rules"]}

    def test_no_secret_in_a_command_line_an_environment_or_a_log(self, stack: ComposeStack) -> None:
        """The admin tokens, the stack key, both CURVE secret keys and Grafana's password,
        read from the secret volumes, appear in no process's arguments, no container's
        environment and no container's log."""
        control = stack.containers("control")[0]
        replica = stack.containers("worker")[0]
        where = "/etc/switchboard/secrets"
        found = [
            stack.read(control, f"{where}/operator.token"),
            stack.read(control, f"{where}/viewer.token"),
            stack.read(control, f"{where}/stack.key"),
            stack.read(control, f"{where}/control.secret").split("secret ")[1].strip(),
            stack.read(replica, f"{where}/workers.secret").split("secret ")[1].strip(),
            # Grafana does not run here: its password is read from its volume on the host.
            (stack.volume("grafana-secrets") / "admin.password").read_text().strip(),
        ]
        assert all(len(secret) >= 32 for secret in found), "a secret file is short"
        seen = []
        for name in stack.containers():
            seen.append(stack.logs(name))
            seen.append(str(stack.inspect(name)["Config"]))
            if stack.inspect(name)["State"]["Running"]:  # type: ignore[index]
                seen.append(stack.podman("top", name, "args"))
        leaked = [secret[:6] for secret in found if any(secret in text for text in seen)]
        assert not leaked, f"secrets (first characters) seen: {leaked}"

    def test_stop_is_clean_and_bounded_and_down_leaves_nothing(self, stack: ComposeStack) -> None:
        """``stop`` ends every container with status 0 well inside the grace period, no
        process SIGKILLed; ``down --volumes`` then takes as little and leaves no
        container, volume, network or pod of the project. (Runs last: it ends the
        module's stack.)"""
        started = time.monotonic()
        stopped = stack.compose("stop", "control", "worker", "prometheus")
        took = time.monotonic() - started
        assert stopped.returncode == 0, stopped.stderr
        exits = {
            name: stack.inspect(name)["State"]["ExitCode"]  # type: ignore[index]
            for name in stack.containers()
        }
        assert set(exits.values()) == {0}, f"{exits}\n{stack.all_logs()}"
        assert took < GRACE_S / 2, f"podman-compose stop took {took:.1f} s"
        assert not any("SIGKILL" in stack.logs(name) for name in stack.containers())
        started = time.monotonic()
        down = stack.compose("down", "--volumes")
        took = time.monotonic() - started
        assert down.returncode == 0, down.stderr
        assert took < GRACE_S / 2, f"podman-compose down took {took:.1f} s"
        assert stack.leftovers() == {"containers": [], "volumes": [], "networks": [], "pods": []}


class TestGrafanaService:
    def test_grafana_is_provisioned_with_the_shipped_dashboards(self) -> None:
        """No Grafana can run here, so its service is read: it mounts the shipped
        dashboard provider and the generated dashboards where that provider looks, and a
        data source that is the shipped one but for Prometheus's compose address."""
        compose = yaml.safe_load(COMPOSE_FILE.read_text())
        mounts = {}
        for volume in compose["services"]["grafana"]["volumes"]:
            source, target = volume.split(":")[:2]
            mounts[target] = source
        provider = mounts["/etc/grafana/provisioning/dashboards"]
        assert (DEPLOY / provider).resolve() == DEPLOY / "grafana/provisioning/dashboards"
        shipped = yaml.safe_load((DEPLOY / provider / "switchboard.yaml").read_text())
        path = shipped["providers"][0]["options"]["path"]
        dashboards = (DEPLOY / mounts[path]).resolve()
        assert dashboards == DEPLOY.parent / "dashboards" / "json"
        assert sorted(dashboards.glob("*.json")), "no generated dashboards"
        source = "/etc/grafana/provisioning/datasources/switchboard.yaml"
        ours = yaml.safe_load((DEPLOY / mounts[source]).read_text())["datasources"]
        theirs = yaml.safe_load(
            (DEPLOY / "grafana/provisioning/datasources/prometheus.yaml").read_text()
        )["datasources"]
        assert ours == [{**theirs[0], "url": "http://prometheus:9090"}]
