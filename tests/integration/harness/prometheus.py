"""A real Prometheus server (Debian's ``prometheus`` package) run by a test, and its HTTP API.

:func:`running_prometheus` runs it in the foreground as TOOLCHAIN.md says: the config
and any files it names (rule files, a token file) in a fresh temporary directory, the
TSDB under it, ``--web.listen-address=127.0.0.1:0``. It reads the real port from the
log line ``msg="Listening on" address=127.0.0.1:PORT``, waits for ``Server is ready``,
and yields a :class:`Prometheus`. On the way out it sends SIGTERM and fails if the
server did not exit 0 within :data:`STOP_S`; the directory is removed either way. It is
a plain context manager, so a fixture of any scope can own it::

    @pytest.fixture(scope="module")
    def prometheus(stack: AdminStack) -> Iterator[Prometheus]:
        with running_prometheus(config, files={"alerts.yml": rules}) as server:
            yield server

A missing ``prometheus`` binary skips the test, and fails it under ``CI=true``.

Targets are first scraped about 6 s after start even with ``scrape_interval: 1s`` (target
updates reach the scrape manager every 5 s), so :meth:`Prometheus.wait_for_query` polls
with a deadline rather than expecting data at once.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.integration.harness.polling import missing, wait_until

__all__ = [
    "QUERY_S",
    "Prometheus",
    "PrometheusAPIError",
    "has_finite_value",
    "prometheus_binary",
    "running_prometheus",
]

#: The server starts in about a second; a loaded CI machine gets more.
STARTUP_S = 30.0
#: A clean shutdown (closing the TSDB head) takes well under a second.
STOP_S = 15.0
#: First sample about 6 s after start; see the module docstring.
QUERY_S = 20.0
LISTENING = re.compile(r'msg="Listening on" address=127\.0\.0\.1:(\d+)')
READY = "Server is ready to receive web requests"

Sample = dict[str, Any]


class PrometheusAPIError(AssertionError):
    """The HTTP API answered an error (a bad query, an unknown endpoint): polling won't help."""


def prometheus_binary() -> str:
    """The ``prometheus`` executable; skips (fails under ``CI=true``) when it is absent."""
    found = shutil.which("prometheus")
    if found is None:
        missing("Debian's prometheus package (apt-get install prometheus)")
    assert found is not None
    return found


def has_finite_value(result: list[Sample]) -> bool:
    """Some series of an instant-vector result has a number (not NaN, e.g. a
    ``histogram_quantile`` over a window without observations)."""
    return any(math.isfinite(float(sample["value"][1])) for sample in result)


@dataclass
class Prometheus:
    """A running server: its base URL, process, log and config directory."""

    url: str
    process: subprocess.Popen[bytes]
    log_path: Path
    directory: Path
    client: httpx.Client

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def assert_running(self) -> None:
        """Fail, with the log's tail, if the server has exited."""
        code = self.process.poll()
        if code is not None:
            raise AssertionError(f"prometheus exited {code}:\n{self.log()[-4000:]}")

    def api(self, path: str, **params: str) -> Any:
        """``GET /api/v1/<path>``'s ``data``; raises :class:`PrometheusAPIError` on an error."""
        self.assert_running()
        response = self.client.get(f"/api/v1/{path}", params=params)
        try:
            body = response.json()
        except json.JSONDecodeError as error:
            raise PrometheusAPIError(f"{path}: {response.status_code} {response.text!r}") from error
        if body.get("status") != "success":
            raise PrometheusAPIError(
                f"{path} {params}: {body.get('errorType')}: {body.get('error')}"
            )
        return body["data"]

    def query(self, promql: str) -> list[Sample]:
        """The instant-vector result of ``promql`` now (``[]`` when no series matches)."""
        data = self.api("query", query=promql)
        if data["resultType"] != "vector":
            raise PrometheusAPIError(f"{promql!r} is a {data['resultType']}, not a vector")
        result: list[Sample] = data["result"]
        return result

    def wait_for_query(
        self,
        promql: str,
        timeout: float = QUERY_S,
        accept: Callable[[list[Sample]], bool] = bool,
    ) -> list[Sample]:
        """Poll ``promql`` until ``accept(result)`` (by default: any series), and return it.

        An API error (a query Prometheus refuses) fails at once; a deadline passed fails
        with the last result.
        """
        last: list[Sample] = []

        def accepted() -> list[Sample] | None:
            nonlocal last
            last = self.query(promql)
            return last if accept(last) else None

        return wait_until(accepted, timeout, lambda: f"{promql!r} (last result {last})", 0.25)

    def rules(self) -> list[dict[str, Any]]:
        """Every loaded rule (``/api/v1/rules``), each with its ``group`` added."""
        groups = self.api("rules")["groups"]
        return [{**rule, "group": group["name"]} for group in groups for rule in group["rules"]]

    def alerts(self) -> list[dict[str, Any]]:
        """Alerts pending or firing now (``/api/v1/alerts``)."""
        alerts: list[dict[str, Any]] = self.api("alerts")["alerts"]
        return alerts


def _start(directory: Path) -> subprocess.Popen[bytes]:
    argv = [
        prometheus_binary(),
        f"--config.file={directory / 'prometheus.yml'}",
        f"--storage.tsdb.path={directory / 'data'}",
        "--web.listen-address=127.0.0.1:0",
        "--web.enable-lifecycle",
    ]
    with open(directory / "prometheus.log", "wb") as log:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=directory,
            start_new_session=True,
        )


def _wait_listening(process: subprocess.Popen[bytes], log_path: Path) -> int:
    """The port from the ``Listening on`` line, once the ``Server is ready`` line is out."""

    def port() -> int | None:
        text = log_path.read_text(errors="replace")
        if process.poll() is not None:
            raise AssertionError(f"prometheus exited {process.returncode} at start:\n{text}")
        found = LISTENING.search(text)
        return int(found.group(1)) if found and READY in text else None

    return wait_until(port, STARTUP_S, "prometheus's 'Server is ready' log line", 0.05)


def _stop(process: subprocess.Popen[bytes]) -> list[str]:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        code = process.wait(timeout=STOP_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return [f"prometheus ignored SIGTERM for {STOP_S:.0f} s"]
    return [] if code == 0 else [f"prometheus exited {code} on SIGTERM"]


@contextlib.contextmanager
def running_prometheus(
    config: Mapping[str, Any], *, files: Mapping[str, str] | None = None
) -> Iterator[Prometheus]:
    """Run Prometheus with ``config`` (the parsed ``prometheus.yml``; relative paths in it
    resolve against its directory, where each of ``files``, name to text, is written)."""
    directory = Path(tempfile.mkdtemp(prefix="prometheus-", dir="/tmp"))
    process: subprocess.Popen[bytes] | None = None
    problems: list[str] = []
    log_path = directory / "prometheus.log"
    try:
        # JSON is YAML, and keeps a dict's types exactly as given.
        (directory / "prometheus.yml").write_text(json.dumps(config, indent=2))
        for name, text in (files or {}).items():
            (directory / name).write_text(text)
            (directory / name).chmod(0o600)
        process = _start(directory)
        port = _wait_listening(process, log_path)
        with httpx.Client(
            base_url=f"http://127.0.0.1:{port}", timeout=10.0, trust_env=False
        ) as client:
            yield Prometheus(f"http://127.0.0.1:{port}", process, log_path, directory, client)
    except BaseException:
        if log_path.exists():
            print(f"prometheus's log:\n{log_path.read_text(errors='replace')[-6000:]}")
        raise
    finally:
        if process is not None:
            problems = _stop(process)
            if problems:
                print(f"prometheus's log:\n{log_path.read_text(errors='replace')[-6000:]}")
        shutil.rmtree(directory, ignore_errors=True)
    assert not problems, "\n".join(problems)
