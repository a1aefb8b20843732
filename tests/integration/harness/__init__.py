"""The integration harness: polling, processes, reports, sockets and the stack.

Every process, socket and file a test uses is owned by a fixture built from these
classes, and torn down (and checked) even when the test fails.
"""

from tests.integration.harness.polling import (
    REPO_ROOT,
    child_env,
    ipc_path,
    missing,
    running_in_ci,
    socket_files,
    wait_until,
)
from tests.integration.harness.processes import ManagedProcess, ProcessManager
from tests.integration.harness.reports import ReportCollector
from tests.integration.harness.sockets import SocketFactory
from tests.integration.harness.stack import (
    FAST_ROUTER_ARGS,
    DetokRouterHandle,
    RouterHandle,
    Stack,
    StandInHandle,
    router_socket_files,
)

__all__ = [
    "FAST_ROUTER_ARGS",
    "REPO_ROOT",
    "DetokRouterHandle",
    "ManagedProcess",
    "ProcessManager",
    "ReportCollector",
    "RouterHandle",
    "SocketFactory",
    "Stack",
    "StandInHandle",
    "child_env",
    "ipc_path",
    "missing",
    "router_socket_files",
    "running_in_ci",
    "socket_files",
    "wait_until",
]
