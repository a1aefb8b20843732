"""docs/security.md's table of limits says what the code does: each default is the code's."""

from __future__ import annotations

import re

from app.events import DEFAULT_MAX_SUBSCRIBERS
from app.settings import AdminSettings
from app.tokens import MIN_REMOTE_TOKEN_CHARS
from router_core.identifiers import (
    MAX_ADDRESS_LENGTH,
    MAX_HOST_LENGTH,
    MAX_VERSION_LENGTH,
    WORKER_ID_RULE,
)
from router_core.limits import MAX_FRAME_BYTES
from router_core.tokenizer_router.registration import MAX_WORKERS
from router_core.transport import MAX_FRAMES
from switchboard.engine.scheduler import SchedulerConfig
from switchboard.worker.body_base import MAX_RID_CHARS
from switchboard.worker.caps import RequestCaps
from switchboard.worker.settings import WorkerSettings
from tests.integration.harness.polling import REPO_ROOT

SECURITY_DOC = REPO_ROOT / "docs" / "security.md"
MiB = 1024 * 1024


def _admin(name: str) -> object:
    return AdminSettings.model_fields[name].default


def limits_table() -> dict[str, str]:
    """Section 10's table: the limit's name -> its default, as the doc writes them."""
    section = SECURITY_DOC.read_text().split("## 10. ", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, str] = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0] not in ("limit", "---"):
            rows[cells[0]] = cells[1]
    return rows


def expected_defaults() -> dict[str, str]:
    """Each limit's default, written from the code the way the doc writes it."""
    caps = RequestCaps()
    return {
        "frame size on every bound socket": f"{MAX_FRAME_BYTES // MiB} MiB",
        "frames per message": str(MAX_FRAMES),
        "worker id": f"`{WORKER_ID_RULE}`",
        "return address / host / version": (
            f"{MAX_ADDRESS_LENGTH} / {MAX_HOST_LENGTH} / {MAX_VERSION_LENGTH} printable characters"
        ),
        "HTTP request head": f"{WorkerSettings.max_header_bytes:,} bytes",
        "HTTP head arrival": f"{WorkerSettings.header_timeout_s:g} s from its first byte",
        "HTTP body arrival": f"{WorkerSettings.body_timeout_s:g} s from the end of the head",
        "idle connection": (
            f"workers {WorkerSettings.keep_alive_s:g} s, admin {_admin('keep_alive_s'):g} s"
        ),
        "connections per process": (
            f"workers {WorkerSettings.max_connections}, admin {_admin('max_connections')}"
        ),
        "worker body": f"{WorkerSettings.max_body_bytes // MiB} MiB",
        "admin body": f"{int(str(_admin('max_body_bytes'))) // MiB} MiB",
        "generations per request (prompts times n)": str(caps.max_prompts),
        "`n`": str(caps.max_n),
        "stop strings": f"{caps.max_stop_strings}, each at most {caps.max_stop_chars} characters",
        "stop token ids": str(caps.max_stop_token_ids),
        "tokens per request (summed over its generations)": f"{caps.max_request_tokens:,}",
        "request id": f"{MAX_RID_CHARS} characters",
        "admin token length beyond loopback": f"{MIN_REMOTE_TOKEN_CHARS} characters",
        "admin event streams": str(DEFAULT_MAX_SUBSCRIBERS),
        "workers in the registry": str(MAX_WORKERS),
        "engine waiting queue": f"{SchedulerConfig.max_waiting_requests:,}",
    }


class TestSecurityDoc:
    def test_every_default_is_the_codes(self) -> None:
        """Each limit the code sets is in the table with the code's default."""
        table = limits_table()
        wrong = {
            name: (table.get(name), default)
            for name, default in expected_defaults().items()
            if table.get(name) != default
        }
        assert wrong == {}, "docs/security.md section 10 (doc, code): " + repr(wrong)

    def test_the_worker_id_rule_is_the_protocols(self) -> None:
        """The rule section 3 states is the one registration enforces."""
        assert f"`^{WORKER_ID_RULE}$`" in SECURITY_DOC.read_text()
        assert re.fullmatch(WORKER_ID_RULE, "w0") and not re.fullmatch(WORKER_ID_RULE, "w\n0")
