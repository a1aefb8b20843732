"""What the rendered workloads promise, read from the example overlay's output.

The worker pods' grace period covers the preStop drain and the workers' own stop; the
hook the preStop runs is the shipped ``drain-pod.py``, byte for byte; probes sit on
``/health`` (workers) and the admin app's ``/healthz``/``/readyz`` (control); only worker
pods may reach the gateway's two ports; the Secrets hold what the roles need, and the
worker pods' hook token is one of the control's operator tokens.
"""

from __future__ import annotations

from typing import Any

import pytest

from switchboard.supervisor.stop_budget import least_grace_s
from tests.integration.harness.k8s_render import K8S, Rendered, rendered

#: Margin the grace period keeps beyond the drain and the stop (a few seconds of
#: process exit and the kubelet's own signalling).
GRACE_MARGIN_S = 5.0
WORKERS = "switchboard-workers"
CONTROL = "switchboard-control"


@pytest.fixture(scope="module")
def overlay(tmp_path_factory: pytest.TempPathFactory) -> Rendered:
    return rendered(tmp_path_factory.mktemp("k8s"))


def container(overlay: Rendered, deployment: str) -> dict[str, Any]:
    found: dict[str, Any] = overlay.pod_spec(deployment)["containers"][0]
    return found


def env(overlay: Rendered, deployment: str) -> dict[str, str]:
    """The container's plain ``value`` variables."""
    return {
        item["name"]: item["value"]
        for item in container(overlay, deployment)["env"]
        if "value" in item
    }


class TestDrainOnStop:
    def test_the_grace_period_covers_the_drain_and_the_stop(self, overlay: Rendered) -> None:
        """terminationGracePeriodSeconds >= the hook's drain timeout + the supervisor's
        whole stop (stop_grace_s, which holds the workers' graceful timeout) + a margin,
        each read from the pod's environment."""
        settings = env(overlay, WORKERS)
        assert float(settings["SWITCHBOARD_STOP_GRACE_S"]) >= least_grace_s(
            float(settings["SWITCHBOARD_GRACEFUL_TIMEOUT_S"])
        )
        needed = float(settings["SWITCHBOARD_DRAIN_TIMEOUT_S"]) + float(
            settings["SWITCHBOARD_STOP_GRACE_S"]
        )
        grace = overlay.pod_spec(WORKERS)["terminationGracePeriodSeconds"]
        assert grace >= needed + GRACE_MARGIN_S, (grace, needed)

    def test_the_prestop_hook_runs_the_shipped_script(self, overlay: Rendered) -> None:
        """The preStop command runs drain-pod.py from the hooks volume, which mounts the
        ConfigMap holding the repository's file unchanged."""
        worker = container(overlay, WORKERS)
        command = worker["lifecycle"]["preStop"]["exec"]["command"]
        assert command == ["python3", "/etc/switchboard/hooks/drain-pod.py"]
        mount = next(
            m for m in worker["volumeMounts"] if m["mountPath"] == "/etc/switchboard/hooks"
        )
        volume = next(v for v in overlay.pod_spec(WORKERS)["volumes"] if v["name"] == mount["name"])
        config = next(
            item
            for item in overlay.of_kind("ConfigMap")
            if item["metadata"]["name"] == volume["configMap"]["name"]
        )
        shipped = (K8S / "base" / "drain-pod.py").read_text(encoding="utf-8")
        assert config["data"] == {"drain-pod.py": shipped}

    def test_the_hook_reaches_the_admin_app_it_drains_through(self, overlay: Rendered) -> None:
        """The worker pods name the admin Service at its port, and the control lets that
        name through its Host check."""
        url = env(overlay, WORKERS)["SWITCHBOARD_CONTROL_ADMIN_URL"]
        admin = overlay.named("Service", "switchboard-admin")
        assert url == f"http://switchboard-admin:{admin['spec']['ports'][0]['port']}"
        assert "switchboard-admin" in env(overlay, CONTROL)["SWITCHBOARD_ALLOWED_HOSTS"].split(",")


class TestProbes:
    def test_worker_probes_are_on_health(self, overlay: Rendered) -> None:
        """Startup, liveness and readiness all ask the workers' /health on their port."""
        worker = container(overlay, WORKERS)
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            assert worker[probe]["httpGet"] == {"path": "/health", "port": "http"}, probe
        assert {port["name"]: port["containerPort"] for port in worker["ports"]} == {"http": 8000}

    def test_control_probes_are_the_admin_apps(self, overlay: Rendered) -> None:
        """The control has no workers' /health: liveness /healthz, readiness /readyz."""
        control = container(overlay, CONTROL)
        assert control["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "admin"}
        assert control["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "admin"}


class TestNetwork:
    def test_only_worker_pods_reach_the_gateway_ports(self, overlay: Rendered) -> None:
        """The policy selects the control pod; every rule admitting 7100 or 7101 admits
        worker pods alone; those are the gateway's ports (its Service, its listen)."""
        policy = overlay.named("NetworkPolicy", CONTROL)
        template = overlay.named("Deployment", CONTROL)["spec"]["template"]["metadata"]["labels"]
        workers = overlay.named("Deployment", WORKERS)["spec"]["template"]["metadata"]["labels"]
        assert policy["spec"]["podSelector"]["matchLabels"] == template
        gateway_ports = {7100, 7101}
        for rule in policy["spec"]["ingress"]:
            ports = {port["port"] for port in rule["ports"]}
            if ports & gateway_ports:
                assert rule["from"] == [{"podSelector": {"matchLabels": workers}}], rule
        admitted = {port["port"] for rule in policy["spec"]["ingress"] for port in rule["ports"]}
        assert gateway_ports <= admitted
        service = overlay.named("Service", "switchboard-gateway")
        assert {port["port"] for port in service["spec"]["ports"]} == gateway_ports
        assert env(overlay, CONTROL)["SWITCHBOARD_GATEWAY_LISTEN"].endswith(":7100")
        assert env(overlay, WORKERS)["SWITCHBOARD_CONTROL"] == "switchboard-gateway:7100"


class TestMonitoring:
    def test_the_admin_app_is_scraped_as_the_rules_job(self, overlay: Rendered) -> None:
        """The ServiceMonitor's jobLabel gives the admin Service job "switchboard", the job
        every shipped rule matches, and the workers' Service "switchboard-workers"; its
        token is the viewer token's Secret."""
        monitor = overlay.named("ServiceMonitor", "switchboard")["spec"]
        job = monitor["jobLabel"]
        admin = overlay.named("Service", "switchboard-admin")
        workers = overlay.named("Service", WORKERS)
        assert admin["metadata"]["labels"][job] == "switchboard"
        assert workers["metadata"]["labels"][job] == "switchboard-workers"
        rules = overlay.named("PrometheusRule", "switchboard-alerts")["spec"]["groups"]
        assert 'up{job="switchboard"}' in str(rules)
        by_port = {endpoint["port"]: endpoint for endpoint in monitor["endpoints"]}
        assert set(by_port) == {
            admin["spec"]["ports"][0]["name"],
            workers["spec"]["ports"][0]["name"],
        }
        credentials = by_port["admin"]["authorization"]["credentials"]
        assert overlay.secret_data(credentials["name"])[credentials["key"]]
        assert "authorization" not in by_port["http"]


class TestSecrets:
    def data(self, overlay: Rendered, name: str) -> dict[str, str]:
        return overlay.secret_data(overlay.named("Secret", name)["metadata"]["name"])

    def test_the_key_secrets_hold_what_each_role_reads(self, overlay: Rendered) -> None:
        """The files each role's settings name are in its Secret; the gateway authorises
        the worker pods' public key; both roles share one stack key."""
        control = self.data(overlay, "switchboard-control-keys")
        workers = self.data(overlay, "switchboard-worker-keys")
        for deployment, data in ((CONTROL, control), (WORKERS, workers)):
            named = [
                value.rsplit("/", 1)[1]
                for name, value in env(overlay, deployment).items()
                if value.startswith("/run/switchboard/keys/")
            ]
            assert sorted(named) == sorted(data), deployment
        worker_public = workers["workers.secret"].splitlines()[0].split()[1]
        assert control["authorised_keys"].split()[0] == worker_public
        assert control["stack.key"] == workers["stack.key"]
        control_public = control["control.secret"].splitlines()[0].split()[1]
        assert workers["control.public"].split()[0] == control_public

    def test_the_hook_token_is_an_operator_token(self, overlay: Rendered) -> None:
        """The worker pods' SWITCHBOARD_ADMIN_TOKEN is the control's operator `prestop`;
        Prometheus's token is its viewer `prometheus`."""
        tokens = self.data(overlay, "switchboard-admin-tokens")
        operators = dict(pair.split(":", 1) for pair in tokens["operator-tokens"].split(","))
        assert operators["prestop"] == tokens["prestop-token"]
        viewers = dict(pair.split(":", 1) for pair in tokens["viewer-tokens"].split(","))
        prometheus = overlay.secret_data("switchboard-prometheus-token")["token"]
        assert viewers["prometheus"] == prometheus
