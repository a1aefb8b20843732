# examples/pause_and_continue.py RUN_DIR: pause the stack in retract mode, then continue it
import sys
from pathlib import Path

from router_core.control import ControlClient
from router_core.control.command_args import ContinueArgs, PauseArgs
from router_core.control.commands import CONTINUE, PAUSE
from router_core.credentials import read_key
from router_core.endpoints import RouterEndpoints

run_dir = Path(sys.argv[1])  # the stack's --run-dir
key = read_key(run_dir / "stack.key")  # every request carries the stack key
control = RouterEndpoints.in_run_dir(run_dir).control
with ControlClient(control, key=key, actor="my-script") as router:
    outcome = router.request(PAUSE, PauseArgs(mode="retract", timeout_s=5))
    print(outcome.complete, outcome.stragglers)  # an OperationOutcome
    router.request(CONTINUE, ContinueArgs(timeout_s=5))
