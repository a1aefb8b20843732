"""The container image, built and run with podman: ``deploy/container/Dockerfile``.

``make test`` builds the image as ``make image`` would (the base image and the dependency
wheels cached between runs), runs it with its ports on loopback, checks that it runs as a
non-root user with the C fast path and a HEALTHCHECK that passes, sends streaming requests
through it, and stops it with SIGTERM (``podman stop``) while requests are in flight:
each finishes exactly, and the container exits 0 well inside its grace period.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.harness.container import Container, Image, built_image, running_container
from tests.integration.harness.http_worker import predictor
from tests.integration.harness.polling import wait_until
from tests.integration.harness.predictor import Predictor
from tests.integration.harness.sse import StreamThread, stream_outcomes, unclear_ending

pytestmark = pytest.mark.integration

__all__ = ["predictor"]

#: The grace period podman stop gives before SIGKILL, as Kubernetes' default is 30 s.
GRACE_S = 30
STARTUP_S = 90.0
IMAGE_CACHE = Path.home() / ".cache" / "switchboard" / "image"


@pytest.fixture(scope="module")
def image() -> Image:
    return built_image(IMAGE_CACHE)


@pytest.fixture
def container(image: Image) -> Iterator[Container]:
    with running_container(image, ["--workers", "2", "--step-time-s", "0.005"]) as running:
        wait_until(
            lambda: image.podman("healthcheck", "run", running.name).returncode == 0,
            STARTUP_S,
            lambda: f"the container's HEALTHCHECK to pass:\n{running.logs()[-3000:]}",
            interval=0.5,
        )
        yield running


class TestImage:
    def test_runs_unprivileged_with_the_fast_path_and_a_healthcheck(
        self, container: Container
    ) -> None:
        """Its user is not root, the C fast path imports, and the image has a HEALTHCHECK
        (kept by the docker format), which passed for the fixture."""
        who = container.image.podman("exec", container.name, "id", "-u")
        assert who.returncode == 0 and who.stdout.strip() == "10001", who
        fast = container.image.podman(
            "exec", container.name, "python3", "-c", "import router_core._fastpath"
        )
        assert fast.returncode == 0, fast.stderr
        config = container.inspect()["Config"]
        assert isinstance(config, dict) and config.get("Healthcheck"), config

    def test_streams_are_exact_and_sigterm_finishes_what_is_in_flight(
        self, container: Container, predictor: Predictor
    ) -> None:
        """Streams through the container read the engine's exact text. podman stop
        (SIGTERM, SIGKILL after the grace period) during long streams: each finishes
        exactly, and the container exits 0 in well under the grace period."""
        assert (
            asyncio.run(stream_outcomes(container.base_url, predictor, 8, 16, "container"))
            == ["exact"] * 8
        )

        async def across_the_stop() -> tuple[list[Any], float]:
            running = asyncio.create_task(
                stream_outcomes(container.base_url, predictor, 4, 400, "container-stop")
            )
            await asyncio.sleep(0.5)
            started = time.monotonic()
            stopped = await asyncio.to_thread(
                container.image.podman,
                "stop",
                "--time",
                str(GRACE_S),
                container.name,
                timeout=GRACE_S + 30,
            )
            took = time.monotonic() - started
            assert stopped.returncode == 0, stopped.stderr
            return await asyncio.wait_for(running, 30), took

        outcomes, took = asyncio.run(across_the_stop())
        assert outcomes == ["exact"] * 4, outcomes
        state = container.inspect()["State"]
        assert isinstance(state, dict) and state["ExitCode"] == 0, container.logs()[-3000:]
        assert took < GRACE_S / 2, f"podman stop took {took:.1f} s"
        assert "SIGKILL" not in container.logs()


class TestStopWithinGrace:
    def test_streams_longer_than_the_grace_end_clearly_in_time(
        self, image: Image, predictor: Predictor
    ) -> None:
        """Streams of 12 s, podman stop -t 10 on a stack whose stop_grace_s is 8: the
        container exits 0 before podman's SIGKILL, each stream exact or aborted on a
        prefix of its text."""
        flags = ["--workers", "2", "--stop-grace-s", "8", "--graceful-timeout-s", "3"]
        with running_container(image, [*flags, "--step-time-s", "0.02"]) as container:
            wait_until(
                lambda: image.podman("healthcheck", "run", container.name).returncode == 0,
                STARTUP_S,
                lambda: f"the container's HEALTHCHECK to pass:\n{container.logs()[-3000:]}",
                interval=0.5,
            )
            prompts = [f"container grace {i}" for i in range(6)]
            body = {"sampling_params": {"max_new_tokens": 600}}
            threads = [
                StreamThread(container.base_url, {**body, "text": p}).start() for p in prompts
            ]
            wait_until(lambda: all(t.started() for t in threads), 30.0, "streams under way")
            started = time.monotonic()
            stopped = image.podman("stop", "--time", "10", container.name, timeout=40)
            took = time.monotonic() - started
            assert stopped.returncode == 0, stopped.stderr
            problems = [
                problem
                for thread, prompt in zip(threads, prompts, strict=True)
                if (
                    problem := unclear_ending(
                        thread.finish(30.0), prompt, predictor.text(prompt, 600)
                    )
                )
            ]
            assert not problems, problems
            state = container.inspect()["State"]
            assert isinstance(state, dict) and state["ExitCode"] == 0, container.logs()[-3000:]
            assert took < 10, f"podman stop took {took:.1f} s"
            assert "SIGKILL" not in container.logs(), container.logs()[-3000:]
