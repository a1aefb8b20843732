"""The Kubernetes manifests run: ``deploy/k8s/overlays/example`` rendered with fresh
secrets, its control and worker Deployments played by ``podman kube play`` with the built
image (``localhost/switchboard:latest``, ``imagePullPolicy: Never``), on a podman network
of the test's own (what podman cannot play is adapted, and only that:
:mod:`tests.integration.harness.kube_play`).

Streams through each worker pod read the engine's exact text. The worker pods' preStop
hook (``drain-pod.py``, from the rendered ConfigMap, run in the pod with ``podman exec``
since podman runs no hooks): it drains only its own pod's workers while long streams are
in flight, each finishes exactly, it exits 0 well before the drain timeout, and the pod
then stops within its grace period. It exits 2 saying so when the admin API cannot be
reached, and 1 naming the workers still busy when the drain does not finish in time.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.harness.container import Image, built_image
from tests.integration.harness.http_worker import predictor
from tests.integration.harness.k8s_render import Rendered, rendered
from tests.integration.harness.kube_play import Played, playable, played
from tests.integration.harness.polling import wait_until
from tests.integration.harness.predictor import Predictor
from tests.integration.harness.sse import stream_outcomes

pytestmark = pytest.mark.integration

__all__ = ["predictor"]

IMAGE_CACHE = Path.home() / ".cache" / "switchboard" / "image"
TAG = "localhost/switchboard:latest"
STARTUP_S = 90.0
HOOK = ("python3", "/etc/switchboard/hooks/drain-pod.py")
PODS = ("switchboard-workers-pod-0", "switchboard-workers-pod-1")


@dataclass
class Cluster:
    """The played pods: the control's address, each worker pod's, an operator token."""

    run: Played
    rendered: Rendered
    control: str
    workers: dict[str, str]
    token: str

    def admin(self) -> httpx.Client:
        return httpx.Client(
            base_url=f"http://{self.control}:8001",
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=10.0,
            trust_env=False,
        )

    def states(self) -> dict[str, tuple[str, bool]]:
        with self.admin() as client:
            answer = client.get("/api/workers")
        assert answer.status_code == 200, answer.text
        return {
            view["id"]: (view["state"], view["safe_to_delete"]) for view in answer.json()["workers"]
        }

    def hook(self, pod: str, *env: str, timeout: float = 90.0) -> subprocess.CompletedProcess[str]:
        """The preStop hook run in ``pod``'s container, with ``env`` (``NAME=VALUE``) added."""
        flags = [flag for pair in env for flag in ("--env", pair)]
        done: subprocess.CompletedProcess[str] = self.run.podman(
            "exec", *flags, f"{pod}-workers", *HOOK, timeout=timeout
        )
        return done

    def worker_ids(self, pod: str) -> list[str]:
        return [f"{pod}-w0", f"{pod}-w1"]


def served(url: str) -> bool:
    try:
        with httpx.Client(trust_env=False, timeout=2.0) as client:
            return client.get(url).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture(scope="module")
def image() -> Image:
    """The image as ``make image`` tags it (the harness builds it as :test)."""
    built = built_image(IMAGE_CACHE)
    tagged = built.podman("tag", built.tag, TAG)
    assert tagged.returncode == 0, tagged.stderr
    return Image(TAG, built.env)


@pytest.fixture(scope="module")
def cluster(image: Image, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The control pod, then the two worker pods once the control is ready; each pod's
    workers serving."""
    objects = rendered(tmp_path_factory.mktemp("k8s"))
    for deployment in ("switchboard-control", "switchboard-workers"):
        container = objects.pod_spec(deployment)["containers"][0]
        assert (container["image"], container["imagePullPolicy"]) == (TAG, "Never")
    with played(image, tmp_path_factory.mktemp("kube-play")) as run:
        control, mounted = playable(objects, "switchboard-control", None)
        for name, data in mounted.items():
            run.create_secret(name, data)
        run.play([control], "control")
        address = run.address("switchboard-control-pod-0")
        wait_until(
            lambda: served(f"http://{address}:8001/readyz"),
            STARTUP_S,
            lambda: (
                f"the control pod ready:\n{run.logs('switchboard-control-pod-0-control')[-3000:]}"
            ),
            interval=0.5,
        )
        workers, mounted = playable(objects, "switchboard-workers", address)
        for name, data in mounted.items():
            run.create_secret(name, data)
        run.play([*objects.of_kind("ConfigMap"), workers], "workers")
        pods = {pod: run.address(pod) for pod in PODS}
        token = objects.secret_data(
            objects.named("Secret", "switchboard-admin-tokens")["metadata"]["name"]
        )["prestop-token"]
        cluster = Cluster(run, objects, address, pods, token)
        wait_until(
            lambda: all(served(f"http://{address}:8000/health") for address in pods.values()),
            STARTUP_S,
            lambda: (
                "both worker pods serving:\n"
                + "\n".join(run.logs(f"{pod}-workers")[-2000:] for pod in PODS)
            ),
            interval=0.5,
        )
        wanted = {worker for pod in PODS for worker in cluster.worker_ids(pod)}
        wait_until(
            lambda: (
                {w for w, (state, _) in cluster.states().items() if state == "serving"} == wanted
            ),
            30.0,
            lambda: f"every worker serving: {cluster.states()}",
        )
        yield cluster


def streams(cluster: Cluster, pod: str, predictor: Predictor, count: int, length: int) -> Any:
    url = f"http://{cluster.workers[pod]}:8000"
    return stream_outcomes(url, predictor, count, length, f"k8s-{pod}-{length}")


class TestKubePlay:
    def test_each_worker_pod_serves_exact_streams(
        self, cluster: Cluster, predictor: Predictor
    ) -> None:
        """Streams through either worker pod's port read the engine's exact text; the
        control lists each pod's workers under the pod's name (its host)."""
        for pod in PODS:
            assert asyncio.run(streams(cluster, pod, predictor, 6, 12)) == ["exact"] * 6
        with cluster.admin() as client:
            listed = {view["id"]: view for view in client.get("/api/workers").json()["workers"]}
        for pod in PODS:
            assert {listed[worker]["host"] for worker in cluster.worker_ids(pod)} == {pod}

    def test_the_hook_fails_clearly_when_it_cannot_drain(
        self, cluster: Cluster, predictor: Predictor
    ) -> None:
        """No admin API: exit 2 and one line naming the URL; a wrong token: exit 2 saying
        so. A drain that outlasts
        SWITCHBOARD_DRAIN_TIMEOUT_S: exit 1 just after it, naming the busy workers; after
        an undrain the streams it waited for still end exactly."""
        unreachable = cluster.hook(PODS[0], "SWITCHBOARD_CONTROL_ADMIN_URL=http://127.0.0.1:9")
        assert unreachable.returncode == 2, unreachable
        assert unreachable.stderr.startswith(
            "drain-pod: cannot reach the control's admin API at http://127.0.0.1:9/api/workers"
        ), unreachable.stderr
        refused = cluster.hook(PODS[0], "SWITCHBOARD_ADMIN_TOKEN=not-a-token")
        assert refused.returncode == 2, refused
        assert "the admin API refused the token" in refused.stderr, refused.stderr

        async def across_a_short_drain() -> tuple[
            list[Any], subprocess.CompletedProcess[str], float
        ]:
            running = asyncio.create_task(streams(cluster, PODS[0], predictor, 4, 800))
            await asyncio.sleep(1.0)
            started = time.monotonic()
            done = await asyncio.to_thread(cluster.hook, PODS[0], "SWITCHBOARD_DRAIN_TIMEOUT_S=1")
            took = time.monotonic() - started
            with cluster.admin() as client:
                for worker in cluster.worker_ids(PODS[0]):
                    assert client.post(f"/api/workers/{worker}/undrain").status_code == 200
            return await asyncio.wait_for(running, 60), done, took

        outcomes, done, took = asyncio.run(across_a_short_drain())
        assert done.returncode == 1, done
        assert "the drain did not finish within 1 s: " in done.stderr, done.stderr
        assert "in flight)" in done.stderr and f"{PODS[0]}-w" in done.stderr, done.stderr
        assert took < 8.0, f"the hook took {took:.1f} s for a 1 s drain timeout"
        assert outcomes == ["exact"] * 4, outcomes

    def test_the_hook_drains_its_pod_and_the_pod_stops_in_its_grace_period(
        self, cluster: Cluster, predictor: Predictor
    ) -> None:
        """During long streams the hook drains only its pod's workers and exits 0 once both
        are safe to delete, well before the drain timeout; every stream ends exactly; the
        other pod keeps serving; then SIGTERM stops the pod (exit 0) in its grace period."""
        pod, other = PODS[1], PODS[0]
        spec = cluster.rendered.pod_spec("switchboard-workers")
        grace = int(spec["terminationGracePeriodSeconds"])
        env = {item["name"]: item.get("value") for item in spec["containers"][0]["env"]}
        drain_timeout = float(env["SWITCHBOARD_DRAIN_TIMEOUT_S"])

        async def across_the_hook() -> tuple[list[Any], subprocess.CompletedProcess[str], float]:
            running = asyncio.create_task(streams(cluster, pod, predictor, 4, 400))
            await asyncio.sleep(0.5)
            started = time.monotonic()
            done = await asyncio.to_thread(cluster.hook, pod)
            return await asyncio.wait_for(running, 60), done, time.monotonic() - started

        outcomes, done, took = asyncio.run(across_the_hook())
        assert done.returncode == 0, done
        assert outcomes == ["exact"] * 4, outcomes
        assert "safe to delete" in done.stderr, done.stderr
        assert took < drain_timeout / 2, f"the hook took {took:.1f} s"
        states = cluster.states()
        assert all(states[worker] == ("drained", True) for worker in cluster.worker_ids(pod))
        assert all(states[worker][0] == "serving" for worker in cluster.worker_ids(other))
        assert asyncio.run(streams(cluster, other, predictor, 4, 12)) == ["exact"] * 4

        started = time.monotonic()
        stopped = cluster.run.podman("pod", "stop", "--time", str(grace), pod, timeout=grace + 30)
        took = time.monotonic() - started
        assert stopped.returncode == 0, stopped.stderr
        assert took < grace, f"the pod took {took:.1f} s of its {grace} s grace period"
        state = cluster.run.podman("inspect", f"{pod}-workers", "--format", "{{.State.ExitCode}}")
        assert state.stdout.strip() == "0", cluster.run.logs(f"{pod}-workers")[-3000:]
