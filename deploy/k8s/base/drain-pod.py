"""A worker pod's preStop hook: drain this pod's workers through the control's admin API.

Run by the kubelet before it sends SIGTERM (``python3 /etc/switchboard/hooks/drain-pod.py``,
no arguments). It lists the workers (``GET /api/workers``), drains those of this pod
(``POST /api/workers/{id}/drain``) and waits until each reports ``safe_to_delete``
(drained with nothing in flight, or gone), so that every in-flight request finishes
before SIGTERM stops the workers. Only the standard library: any python3 runs it.

Settings, from the pod's environment (the same variables ``switchboard up`` reads):

* ``SWITCHBOARD_CONTROL_ADMIN_URL`` (or ``SWITCHBOARD_ADMIN_URL``): the control's admin app;
* ``SWITCHBOARD_ADMIN_TOKEN``: an operator token of it;
* ``SWITCHBOARD_WORKER_ID_PREFIX``: this pod's worker ids are the prefix and a number;
  unset, the host name's first label and ``-w`` (what ``switchboard up --role workers``
  uses, so a pod's name);
* ``SWITCHBOARD_DRAIN_TIMEOUT_S`` (default 30): how long to wait for ``safe_to_delete``;
  the pod's ``terminationGracePeriodSeconds`` must cover it and the workers' own stop.

Exit status: 0 once every worker of this pod is safe to delete (or none is listed);
1 when the drain did not finish in time (the workers still holding requests named);
2 when the admin API cannot be reached, refuses the token, or a setting is wrong.
Every outcome is one line on stderr (the kubelet keeps a failed hook's output).
"""

from __future__ import annotations

import json
import math
import os
import re
import socket
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: How often the workers' states are read while waiting.
POLL_S = 0.5
#: The longest one admin request may take (less when the deadline is nearer).
REQUEST_TIMEOUT_S = 5.0
DEFAULT_DRAIN_TIMEOUT_S = 30.0


class HookError(Exception):
    """What ends the hook early: the message is its one line, ``status`` its exit status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class HookSettings:
    """What the hook needs, read from the environment by :func:`settings_from`."""

    admin_url: str
    token: str
    prefix: str
    timeout_s: float


def settings_from(env: Mapping[str, str], hostname: str) -> HookSettings:
    """The hook's settings from ``env``; :class:`HookError` (status 2) naming a missing or
    malformed one."""
    url = env.get("SWITCHBOARD_CONTROL_ADMIN_URL") or env.get("SWITCHBOARD_ADMIN_URL")
    if not url or urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        raise HookError(
            "drain-pod: set SWITCHBOARD_CONTROL_ADMIN_URL to the control's admin app "
            f"(http://HOST:PORT), not {url!r}",
            2,
        )
    token = env.get("SWITCHBOARD_ADMIN_TOKEN", "")
    if not token:
        raise HookError("drain-pod: SWITCHBOARD_ADMIN_TOKEN (an operator token) is not set", 2)
    raw_timeout = env.get("SWITCHBOARD_DRAIN_TIMEOUT_S", str(DEFAULT_DRAIN_TIMEOUT_S))
    try:
        timeout_s = float(raw_timeout)
    except ValueError:
        timeout_s = math.nan
    if not math.isfinite(timeout_s) or timeout_s <= 0:
        raise HookError(f"drain-pod: SWITCHBOARD_DRAIN_TIMEOUT_S={raw_timeout!r} is not S > 0", 2)
    prefix = env.get("SWITCHBOARD_WORKER_ID_PREFIX") or f"{hostname.split('.', maxsplit=1)[0]}-w"
    return HookSettings(url.rstrip("/"), token, prefix, timeout_s)


class AdminApi:
    """The two admin calls the hook makes, each bounded by the hook's deadline."""

    def __init__(self, settings: HookSettings, deadline: float) -> None:
        self.settings = settings
        self.deadline = deadline

    def call(self, method: str, path: str) -> Any:
        """The JSON answer of ``method path``; :class:`HookError` (status 2) for no answer,
        a refused token or any other error answer."""
        url = f"{self.settings.admin_url}{path}"
        timeout = max(0.1, min(REQUEST_TIMEOUT_S, self.deadline - time.monotonic()))
        request = urllib.request.Request(  # noqa: S310 (settings_from admits http(s) only)
            url,
            method=method,
            headers={"Authorization": f"Bearer {self.settings.token}"},
            data=b"" if method == "POST" else None,
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:  # noqa: S310
                return json.loads(answer.read())
        except urllib.error.HTTPError as exc:
            if exc.code == 404 and method == "POST":
                return None  # the worker left between the listing and its drain: done
            if exc.code in (401, 403):
                why = "refused the token (an operator token is needed)"
            else:
                why = f"answered {exc.code}: {exc.read()[:300].decode(errors='replace')}"
            raise HookError(f"drain-pod: {method} {url}: the admin API {why}", 2) from None
        except (OSError, ValueError) as exc:
            reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
            raise HookError(
                f"drain-pod: cannot reach the control's admin API at {url}: {reason}", 2
            ) from None

    def workers(self) -> list[dict[str, Any]]:
        listed: list[dict[str, Any]] = self.call("GET", "/api/workers")["workers"]
        return listed

    def drain(self, worker_id: str) -> None:
        self.call("POST", f"/api/workers/{urllib.parse.quote(worker_id, safe='')}/drain")


def own(listed: list[dict[str, Any]], prefix: str) -> dict[str, dict[str, Any]]:
    """The listed workers of this pod: ids of ``prefix`` and a number, still registered."""
    pattern = re.compile(re.escape(prefix) + r"[0-9]+")
    return {
        view["id"]: view
        for view in listed
        if pattern.fullmatch(str(view["id"])) and view.get("state") != "dead"
    }


def describe(views: Mapping[str, Mapping[str, Any]]) -> str:
    """``w0 draining (2 in flight), w1 drained (0 in flight)``."""
    return ", ".join(
        f"{worker} {view.get('state')} ({view.get('inflight', '?')} in flight)"
        for worker, view in sorted(views.items())
    )


def drain_pod(settings: HookSettings, clock: Any = time.monotonic) -> str:
    """Drain this pod's workers and wait for ``safe_to_delete``; the line to print.
    :class:`HookError` with status 1 when ``settings.timeout_s`` passes first."""
    started = clock()
    api = AdminApi(settings, started + settings.timeout_s)
    mine = own(api.workers(), settings.prefix)
    if not mine:
        return f"drain-pod: no registered worker {settings.prefix}N to drain"
    for worker in sorted(mine):
        api.drain(worker)
    while True:
        left = {
            worker: view
            for worker, view in own(api.workers(), settings.prefix).items()
            if worker in mine and not view.get("safe_to_delete")
        }
        if not left:
            return (
                f"drain-pod: {', '.join(sorted(mine))} safe to delete "
                f"after {clock() - started:.1f} s"
            )
        if clock() + POLL_S > api.deadline:
            raise HookError(
                f"drain-pod: the drain did not finish within {settings.timeout_s:g} s: "
                f"{describe(left)}",
                1,
            )
        time.sleep(POLL_S)


def main() -> int:
    """Run the hook (see the module docstring); its exit status."""
    try:
        line = drain_pod(settings_from(os.environ, socket.gethostname()))
    except HookError as exc:
        print(exc, file=sys.stderr, flush=True)
        return exc.status
    print(line, file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
