"""The worker pods' preStop hook (``deploy/k8s/base/drain-pod.py``): its settings and which
workers it takes as its pod's. Draining a real stack is
``tests/integration/test_k8s_kube_play.py``'s."""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
from types import ModuleType

import pytest

from tests.integration.harness.k8s_render import K8S

HOOK = K8S / "base" / "drain-pod.py"
ENV = {
    "SWITCHBOARD_CONTROL_ADMIN_URL": "http://switchboard-admin:8001/",
    "SWITCHBOARD_ADMIN_TOKEN": "t",
}


@pytest.fixture(scope="module")
def hook() -> ModuleType:
    """drain-pod.py, imported from its path (a hyphenated file in no package)."""
    spec = importlib.util.spec_from_file_location("drain_pod", HOOK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Its dataclasses look their module up by name while they are made.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


class TestSettings:
    def test_defaults_follow_switchboard_ups(self, hook: ModuleType) -> None:
        """The prefix is the host name's first label and -w, as role workers names its
        workers; the timeout is 30 s; the URL loses its trailing slash."""
        settings = hook.settings_from(ENV, "web-7f9c.example.internal")
        assert settings == hook.HookSettings(
            "http://switchboard-admin:8001", "t", "web-7f9c-w", 30.0
        )

    def test_the_pods_own_variables_win(self, hook: ModuleType) -> None:
        """SWITCHBOARD_WORKER_ID_PREFIX and SWITCHBOARD_DRAIN_TIMEOUT_S, as up reads them;
        SWITCHBOARD_ADMIN_URL when no control admin URL is set."""
        env = {
            "SWITCHBOARD_ADMIN_URL": "https://admin:8001",
            "SWITCHBOARD_ADMIN_TOKEN": "t",
            "SWITCHBOARD_WORKER_ID_PREFIX": "gpu-a-w",
            "SWITCHBOARD_DRAIN_TIMEOUT_S": "12.5",
        }
        assert hook.settings_from(env, "ignored") == hook.HookSettings(
            "https://admin:8001", "t", "gpu-a-w", 12.5
        )

    @pytest.mark.parametrize(
        ("change", "message"),
        [
            ({"SWITCHBOARD_CONTROL_ADMIN_URL": "file:///etc/passwd"}, "not 'file:///etc/passwd'"),
            ({"SWITCHBOARD_ADMIN_TOKEN": ""}, "SWITCHBOARD_ADMIN_TOKEN (an operator token)"),
            ({"SWITCHBOARD_DRAIN_TIMEOUT_S": "nan"}, "SWITCHBOARD_DRAIN_TIMEOUT_S='nan' is not"),
            ({"SWITCHBOARD_DRAIN_TIMEOUT_S": "0"}, "SWITCHBOARD_DRAIN_TIMEOUT_S='0' is not"),
        ],
    )
    def test_a_bad_setting_is_status_2_naming_it(
        self, hook: ModuleType, change: dict[str, str], message: str
    ) -> None:
        """Each refused setting is one line naming it, exit status 2."""
        with pytest.raises(
            hook.HookError, match=message.replace("(", r"\(").replace(")", r"\)")
        ) as caught:
            hook.settings_from({**ENV, **change}, "pod")
        assert caught.value.status == 2


class TestOwnWorkers:
    def test_only_this_pods_registered_workers(self, hook: ModuleType) -> None:
        """Ids of the prefix and a number; not pod-10's for pod-1, not dead ones."""
        listed = [
            {"id": "web-1-w0", "state": "serving"},
            {"id": "web-1-w1", "state": "drained"},
            {"id": "web-1-w2", "state": "dead"},
            {"id": "web-10-w0", "state": "serving"},
            {"id": "web-1-wx", "state": "serving"},
            {"id": "w0", "state": "serving"},
        ]
        assert sorted(hook.own(listed, "web-1-w")) == ["web-1-w0", "web-1-w1"]

    def test_the_progress_line_names_state_and_in_flight(self, hook: ModuleType) -> None:
        views = {
            "p-w1": {"state": "drained", "inflight": 0},
            "p-w0": {"state": "draining", "inflight": 2},
        }
        assert hook.describe(views) == "p-w0 draining (2 in flight), p-w1 drained (0 in flight)"


def test_an_unreachable_admin_api_exits_2_in_one_line() -> None:
    """Run as the kubelet runs it, against a loopback port nobody listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = subprocess.run(
        [sys.executable, str(HOOK)],
        capture_output=True,
        text=True,
        env={
            "SWITCHBOARD_CONTROL_ADMIN_URL": f"http://127.0.0.1:{port}",
            "SWITCHBOARD_ADMIN_TOKEN": "t",
        },
        timeout=30,
        check=False,
    )
    assert done.returncode == 2, done
    assert done.stderr.startswith(
        f"drain-pod: cannot reach the control's admin API at http://127.0.0.1:{port}/api/workers: "
    ), done.stderr
    assert done.stderr.count("\n") == 1 and done.stdout == ""
