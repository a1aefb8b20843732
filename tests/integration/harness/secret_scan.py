"""Looking for a stack's secrets where nobody may read them.

:class:`Secrets` holds named secret values (stack key, CURVE secret keys, admin tokens)
and says which of them a text holds: any run of :data:`WINDOW` consecutive characters
of a secret counts, so a log that prints half a key is caught too, and a CURVE secret is
looked for in its z85 spelling and as hex. The collectors return texts, each named by
where it came from: :func:`command_lines` (what ``ps`` shows every user),
:func:`world_readable_files` (files in a tree that group or others may read) and
:func:`http_reads` (the answer of every ``GET`` an HTTP API's own OpenAPI schema lists,
server-sent event streams read for a bounded time).
"""

from __future__ import annotations

import contextlib
import re
import stat
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil
import zmq.utils.z85

__all__ = [
    "WINDOW",
    "Secrets",
    "command_lines",
    "curve_secret",
    "http_reads",
    "world_readable_files",
]

#: Characters of a secret that count as its leak: 16 hex digits are 64 bits, which a
#: random text matches by accident with odds of about 2**-64 per position.
WINDOW = 16
#: How long an event stream is read before its text is taken as it is.
STREAM_READ_S = 1.5
_PARAMETER = re.compile(r"\{[^}]+\}")


@dataclass
class Secrets:
    """Named secret values, each with the spellings under which it could leak."""

    forms: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def add(self, name: str, value: str) -> None:
        """Remember ``value`` (stripped; at least :data:`WINDOW` characters) as ``name``."""
        value = value.strip()
        assert len(value) >= WINDOW, f"{name}: too short to look for ({len(value)} chars)"
        self.forms[name] = (value,)

    def add_curve(self, name: str, secret_file: Path) -> None:
        """Remember the CURVE secret key in ``secret_file``, as z85 and as hex."""
        z85 = curve_secret(secret_file)
        self.forms[name] = (z85, zmq.utils.z85.decode(z85).hex())

    def found_in(self, text: str) -> list[str]:
        """The names of the secrets ``text`` holds a :data:`WINDOW`-character run of."""
        return [
            name
            for name, spellings in self.forms.items()
            if any(
                value[start : start + WINDOW] in text
                for value in spellings
                for start in range(len(value) - WINDOW + 1)
            )
        ]

    def assert_absent(self, texts: Mapping[str, str]) -> None:
        """Fail naming each place (a key of ``texts``) and the secrets found there (never
        the secret's value: the failure message is a log too)."""
        leaks = {where: found for where, text in texts.items() if (found := self.found_in(text))}
        assert not leaks, f"secrets readable where they must not be: {leaks}"


def curve_secret(secret_file: Path) -> str:
    """The z85 secret key of a ``switchboard keys generate`` ``.secret`` file (its
    ``secret <z85>`` line)."""
    for line in secret_file.read_text().splitlines():
        word, _, value = line.partition(" ")
        if word == "secret":
            return value.strip()
    raise AssertionError(f"{secret_file}: no secret line")


def command_lines(processes: Iterable[psutil.Process]) -> dict[str, str]:
    """Each live process's command line (as ``ps`` shows it to every user), keyed by
    ``cmdline of PID``; a process that ended meanwhile is left out."""
    found = {}
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.ZombieProcess):
            found[f"cmdline of {process.pid}"] = " ".join(process.cmdline())
    return found


def world_readable_files(root: Path) -> dict[str, str]:
    """The text of each regular file under ``root`` that group or others may read."""
    found = {}
    for path in sorted(root.rglob("*")):
        with contextlib.suppress(FileNotFoundError):
            mode = path.lstat().st_mode
            if stat.S_ISREG(mode) and mode & (stat.S_IRGRP | stat.S_IROTH):
                found[f"file {path} ({stat.filemode(mode)})"] = path.read_text(errors="replace")
    return found


def _read_stream(client: httpx.Client, path: str) -> tuple[int, str]:
    """A server-sent event stream's status and what it sent in :data:`STREAM_READ_S`."""
    chunks: list[str] = []
    until = time.monotonic() + STREAM_READ_S
    with client.stream("GET", path, timeout=httpx.Timeout(10.0, read=STREAM_READ_S)) as answer:
        with contextlib.suppress(httpx.ReadTimeout):
            for chunk in answer.iter_text():
                chunks.append(chunk)
                if time.monotonic() > until:
                    break
        return answer.status_code, "".join(chunks)


def http_reads(base_url: str, token: str | None, fill: str) -> dict[str, str]:
    """GET ``base_url``'s ``/openapi.json`` and every ``GET`` path it lists (a path
    parameter filled with ``fill``; not a path that is a POST too, a command's alias),
    sending ``token`` as a bearer token if given; each
    answer's text keyed by its URL. Every answer must be 200 for a path without
    parameters (what the reader could not read, it could not leak, so a refusal would
    make the check vacuous)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    read: dict[str, str] = {}
    with httpx.Client(base_url=base_url, headers=headers, timeout=30.0, trust_env=False) as client:
        schema = client.get("/openapi.json")
        assert schema.status_code == 200, schema.text
        read[f"{base_url}/openapi.json"] = schema.text
        for path, methods in sorted(schema.json()["paths"].items()):
            # A GET that is also a POST is a command's SGLang-compatible alias
            # (/flush_cache), an action rather than a read.
            if "get" not in methods or "post" in methods:
                continue
            concrete = _PARAMETER.sub(fill, path)
            produces = methods["get"].get("responses", {}).get("200", {}).get("content", {})
            if "text/event-stream" in produces:
                status, text = _read_stream(client, concrete)
            else:
                answer = client.get(concrete)
                status, text = answer.status_code, answer.text
            if concrete == path:
                assert status == 200, f"GET {base_url}{path}: {status} {text[:200]}"
            read[f"GET {base_url}{concrete} ({status})"] = text
    return read
