"""The C engine (``examples/c_engine``): built with ``cc`` against libzmq, then run as a
user would run it, behind ``switchboard up --engine-command``, and alone against
test-owned sockets, where every message it sends is decoded by the Python wire decoder.

It echoes each prompt's ids once, so a prompt's text must come back exactly; stop
strings and stop ids must cut it where the built-in engine's stop rules
(``switchboard.engine.stopping.finish_reason``) cut the same ids.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import psutil
import pytest
import zmq

from router_core.wire import Kind, combine_rows, decode_message, frame_message
from router_core.wire.control import Acknowledgement, ContinueRequest, LoadSnapshot, PauseRequest
from router_core.wire.engine_commands import CommandReply, EngineCommand
from router_core.wire.outputs import BatchEmbeddingOutput, BatchTokenIDOutput
from router_core.wire.requests import EmbeddingRequest, GenerateRequest, SamplingParams
from switchboard.engine.stopping import finish_reason
from switchboard.text import load_tokenizer
from switchboard.text.vocab_file import read_vocab_file
from tests.integration.harness.polling import REPO_ROOT, missing, wait_until
from tests.integration.harness.sse import StreamThread, generate_stream
from tests.integration.harness.supervisor import Stacks, Supervisor
from tests.support.zmq_context import bounded_context

pytestmark = pytest.mark.integration

SOURCE = REPO_ROOT / "examples" / "c_engine"
PROMPTS = (
    "Hello there, wörld 😀",
    "The quick brown fox jumps over the lazy dog.",
    "日本語のテキスト",
    "naïve café — ✓ Ωmega",
)
#: Long enough (about 450 tokens, 5 ms a step) to be paused while it streams.
LONG = " ".join(f"word{i}" for i in range(150))


@pytest.fixture(scope="module")
def c_engine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The engine, compiled as its README says (warnings are errors)."""
    cc = shutil.which("cc")
    if cc is None:
        missing("a C compiler (cc)")
    assert cc is not None
    probe = subprocess.run(
        [cc, "-E", "-x", "c", "-", "-o", os.devnull],
        input="#include <zmq.h>\n",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if probe.returncode != 0:
        missing("libzmq's C headers (zmq.h: apt-get install libzmq3-dev, or make system-deps)")
    binary = tmp_path_factory.mktemp("c-engine") / "echo_engine"
    flags = ["-O2", "-Wall", "-Wextra", "-Werror"]
    build = subprocess.run(
        [cc, *flags, "-o", str(binary), "echo_engine.c", "mpack_lite.c", "-lzmq"],
        cwd=SOURCE,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert build.returncode == 0, build.stderr
    return binary


@pytest.fixture(scope="module")
def vocab(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The built-in tokenizer's vocabulary file, as ``switchboard vocab`` writes it."""
    path = tmp_path_factory.mktemp("vocab") / "vocab.msgpack"
    subprocess.run(
        [sys.executable, "-m", "switchboard.cli", "vocab", "--out", str(path)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return path


@pytest.fixture(scope="module")
def stack(
    c_engine: Path, cache_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Supervisor]:
    """One ``switchboard up --engine-command`` for the module; its stop is checked: exit 0,
    the engine stopped by SIGTERM with status 0, nothing left in the run directory."""
    stacks = Stacks(cache_dir, tmp_path_factory.mktemp("c-engine-up"))
    args = ("--engine-command", str(c_engine), "--workers", "1", "--detokenizers", "1")
    try:
        supervisor = stacks.start(*args)
        yield supervisor
        run_dir = supervisor.run_dir
        assert supervisor.terminate() == 0, supervisor.stderr()[-4000:]
        log = supervisor.stderr()
        assert "stopped engine (pid" in log and "stopped engine (pid" not in _warnings(log), log
        assert "echo_engine: stopped after" in log, log[-4000:]
        assert not run_dir.exists()
    finally:
        problems = stacks.close()
        assert not problems, "\n".join(problems)


def _warnings(log: str) -> str:
    return "\n".join(line for line in log.splitlines() if "WARNING" in line)


def _streams(url: str, bodies: list[dict[str, Any]]) -> list[Any]:
    async def run() -> list[Any]:
        async with httpx.AsyncClient(base_url=url, timeout=30, trust_env=False) as client:
            return list(await asyncio.gather(*(generate_stream(client, b) for b in bodies)))

    seen = asyncio.run(run())
    assert all(each.status == 200 and each.done for each in seen), seen
    return seen


def _expected(ids: list[int], params: dict[str, Any], eog: list[int]) -> tuple[int, Any]:
    """How many ids the echo sends and why it ends: the built-in engine's stop rules over
    the prompt's ids, else the prompt's end (``{"type": "stop", "matched": None}``)."""
    codec = load_tokenizer(None)
    for count in range(1, len(ids) + 1):
        reason = finish_reason(
            ids[:count],
            max_new_tokens=max(1, params.get("max_new_tokens", 128)),
            min_new_tokens=params.get("min_new_tokens", 0),
            stop_token_ids=frozenset(params.get("stop_token_ids", ())),
            end_token_ids=frozenset(eog),
            ignore_eos=params.get("ignore_eos", False),
            stop=tuple(text for text in params.get("stop", ()) if text),
            decode=codec.decode,
        )
        if reason is not None:
            return count, reason
    return len(ids), {"type": "stop", "matched": None}


def _run_ctl(run_dir: Path, *words: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "switchboard.cli", "ctl", "--run-dir", str(run_dir), *words],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def _ctl(run_dir: Path, *words: str) -> dict[str, Any]:
    done = _run_ctl(run_dir, *words)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = msgspec.json.decode(done.stdout)
    return result


def _ctl_error(run_dir: Path, *words: str) -> str:
    """The error line of a ``switchboard ctl`` command that must fail (exit status 1)."""
    done = _run_ctl(run_dir, *words)
    assert done.returncode == 1, (done.stdout, done.stderr)
    return done.stderr.strip()


class TestBehindTheStack:
    def test_streams_echo_each_prompt_exactly(self, stack: Supervisor) -> None:
        """Streamed at once, each prompt (multi-byte text included) comes back as its own
        text, ending at the prompt's end; a smaller max_new_tokens ends it by length."""
        codec = load_tokenizer(None)
        bodies = [{"text": text, "sampling_params": {"max_new_tokens": 64}} for text in PROMPTS]
        seen = _streams(stack.url, bodies)
        assert [each.text for each in seen] == list(PROMPTS)
        for each, text in zip(seen, PROMPTS, strict=True):
            meta = each.events[-1]["meta_info"]
            assert meta["finish_reason"] == {"type": "stop", "matched": None}
            assert meta["completion_tokens"] == meta["prompt_tokens"] == len(codec.encode(text))
            # One event a token, unless a loaded machine delivered two steps of a request
            # together (their rows then make one event): never more events than tokens,
            # each event further along than the one before.
            counts = [event["meta_info"]["completion_tokens"] for event in each.events]
            assert counts == sorted(set(counts)), counts
            assert counts[-1] == meta["completion_tokens"], counts

        (short,) = _streams(stack.url, [{"text": LONG, "sampling_params": {"max_new_tokens": 7}}])
        assert short.text == codec.decode(codec.encode(LONG)[:7])
        assert short.events[-1]["meta_info"]["finish_reason"] == {"type": "length", "length": 7}

    def test_stop_strings_and_ids_cut_as_the_built_in_engine(self, stack: Supervisor) -> None:
        """Stop strings, stop ids and EOS (an id of the vocabulary file's eog_token_ids),
        with ignore_eos and min_new_tokens, end each echo where stopping.py says; the text
        is cut at the stop string and leaves the stop token out."""
        codec = load_tokenizer(None)
        vocab = read_vocab_file(stack.run_dir / "vocab.msgpack")
        eog = vocab.eog_token_ids
        byte_ids = {token[0]: i for i, token in enumerate(vocab.tokens) if len(token) == 1}
        spread = [byte_ids[b] for b in "ab😀😀cd".encode()]  # one id a byte
        words = codec.encode("one two three four five six seven")
        text_ids = codec.encode("Hello, wörld! 日本語 🎉 and more")
        cases: list[tuple[list[int], dict[str, Any]]] = [
            (words, {"stop": [" four"]}),
            (words, {"stop": ["ee f", "zzz"]}),
            (text_ids, {"stop": ["本"]}),  # completed inside a multi-byte character's tokens
            (spread, {"stop": ["😀😀"]}),  # 2 characters over 8 ids: the tail counts bytes
            (words, {"stop_token_ids": [words[3]]}),
            (words, {"stop_token_ids": [words[1]], "min_new_tokens": 4}),
            ([*words[:3], eog[0], *words[3:]], {}),
            ([*words[:3], eog[0], *words[3:]], {"ignore_eos": True}),
            ([*words[:1], eog[0], *words[1:]], {"min_new_tokens": 4}),
        ]
        bodies = [
            {"input_ids": ids, "sampling_params": {"max_new_tokens": 64, **params}}
            for ids, params in cases
        ]
        for (ids, params), each in zip(cases, _streams(stack.url, bodies), strict=True):
            count, reason = _expected(ids, {"max_new_tokens": 64, **params}, eog)
            meta = each.events[-1]["meta_info"]
            assert (meta["finish_reason"], meta["completion_tokens"]) == (reason, count), params
            full = codec.decode(ids[:count])
            if isinstance(reason["matched"], str):
                assert each.text == full[: full.index(reason["matched"])], params
            elif isinstance(reason["matched"], int):
                assert each.text == codec.decode(ids[: count - 1]), params
            else:
                assert each.text == full, params

    @pytest.mark.parametrize("mode", ["abort", "retract", "in_place"])
    def test_pause_and_continue_mid_stream(self, stack: Supervisor, mode: str) -> None:
        """A pause of each mode and the continue after it are acknowledged by the engine
        (``switchboard ctl``); abort ends the stream in flight with an abort, retract and
        in_place hold it and it then ends with the whole prompt."""
        body = {"text": LONG, "sampling_params": {"max_new_tokens": 1000}}
        stream = StreamThread(stack.url, body).start()
        wait_until(stream.started, 30, "the long stream's first event")
        paused = _ctl(stack.run_dir, "pause", f"mode={mode}")
        assert paused["complete"] and "engine" in paused["acked"], paused
        if mode != "abort":
            held = len(stream.seen.events)
            threading.Event().wait(0.3)
            assert len(stream.seen.events) <= held + 1  # at most a row already on its way
        resumed = _ctl(stack.run_dir, "continue")
        assert resumed["complete"] and "engine" in resumed["acked"], resumed
        seen = stream.finish(60)
        finish = seen.events[-1]["meta_info"]["finish_reason"]
        if mode == "abort":
            assert finish == {"type": "abort", "message": "paused"}
            assert LONG.startswith(seen.text) and seen.text != LONG
        else:
            assert (finish, seen.text) == ({"type": "stop", "matched": None}, LONG)

    def test_flush_cache_idle_and_while_a_request_runs(self, stack: Supervisor) -> None:
        """``switchboard ctl flush_cache`` through the engine's COMMAND_REPLY: ok with 0
        tokens dropped while idle; CONFLICT naming the request while one streams unpaused;
        ok again while it is paused in place, after which it ends with the whole prompt."""
        assert _ctl(stack.run_dir, "flush_cache") == {"flushed": True, "dropped_tokens": 0}
        body = {"text": LONG, "rid": "flush-c-1", "sampling_params": {"max_new_tokens": 1000}}
        stream = StreamThread(stack.url, body).start()
        wait_until(stream.started, 30, "the long stream's first event")
        error = _ctl_error(stack.run_dir, "flush_cache")
        assert error.startswith("switchboard ctl: CONFLICT: ") and "flush-c-1" in error, error
        assert "pause generation" in error, error
        paused = _ctl(stack.run_dir, "pause", "mode=in_place")
        assert paused["complete"] and "engine" in paused["acked"], paused
        assert _ctl(stack.run_dir, "flush_cache") == {"flushed": True, "dropped_tokens": 0}
        assert _ctl(stack.run_dir, "continue")["complete"]
        seen = stream.finish(60)
        finish = seen.events[-1]["meta_info"]["finish_reason"]
        assert (finish, seen.text) == ({"type": "stop", "matched": None}, LONG)

    def test_embedding(self, stack: Supervisor) -> None:
        """/encode gets the engine's 8 floats, the same for the same ids."""
        first = httpx.post(f"{stack.url}/encode", json={"text": PROMPTS[0]}, timeout=30)
        again = httpx.post(f"{stack.url}/encode", json={"text": PROMPTS[0]}, timeout=30)
        other = httpx.post(f"{stack.url}/encode", json={"text": PROMPTS[1]}, timeout=30)
        vectors = [response.raise_for_status().json()["embedding"] for response in (first, again)]
        assert len(vectors[0]) == 8 and all(-1 <= value < 1 for value in vectors[0])
        assert vectors[0] == vectors[1] != other.json()["embedding"]
        assert first.json()["meta_info"]["finish_reason"] == {"type": "stop", "matched": None}


class Wire:
    """Test-owned router ends for an engine started alone: a PUSH to its inbound, PULLs
    bound at its events and outputs."""

    def __init__(self, context: zmq.Context[zmq.Socket[bytes]], run_dir: Path) -> None:
        self.endpoints = [f"ipc://{run_dir}/{name}" for name in ("engine", "events", "outputs")]
        self.events = context.socket(zmq.PULL)
        self.events.bind(self.endpoints[1])
        self.outputs = context.socket(zmq.PULL)
        self.outputs.bind(self.endpoints[2])
        self.push = context.socket(zmq.PUSH)
        self.push.connect(self.endpoints[0])

    def argv(self, binary: Path, vocab: Path) -> list[str]:
        inbound, events, outputs = self.endpoints
        flags = ["--inbound", inbound, f"--events={events}", "--outputs", outputs]
        return [str(binary), *flags, "--vocab", str(vocab)]

    def take(self, sock: zmq.Socket[bytes], kind: Kind, timeout: float = 10.0) -> Any:
        """The next message of ``kind`` on ``sock`` (decoded strictly), skipping LOADs."""

        def arrived() -> Any:
            while sock.poll(50):
                header, payloads = decode_message(sock.recv_multipart())
                if header.kind == kind:
                    return header, payloads
            return None

        return wait_until(arrived, timeout, f"a {kind.name}")

    def close(self) -> None:
        for sock in (self.events, self.outputs, self.push):
            sock.close(linger=0)


class TestAlone:
    def test_wire_messages_ordering_bad_input_and_sigterm(
        self, c_engine: Path, vocab: Path, tmp_path: Path
    ) -> None:
        """Every message decodes with the Python decoder: LOAD with the key, token rows
        (only the new ids, SGLang's decode_ids), an embedding row, ACKs of every operation
        (an older one acknowledged, not applied); garbage is counted, not fatal; SIGTERM
        exits 0 and removes the socket file."""
        run_dir = Path(os.path.realpath(tmp_path))
        env = {**os.environ, "SWITCHBOARD_STACK_KEY": "k" * 64}
        with bounded_context() as context:
            wire = Wire(context, run_dir)
            engine = subprocess.Popen(
                wire.argv(c_engine, vocab), env=env, stderr=subprocess.PIPE, text=True
            )
            try:
                _, (load,) = wire.take(wire.events, Kind.LOAD)
                assert isinstance(load, LoadSnapshot) and load.secret == "k" * 64
                assert (load.max_running, load.engine_started_ns > 0) == (256, True)

                owner = f"ipc://{run_dir}/worker-w0"
                request = GenerateRequest(
                    rid="r1",
                    input_ids=[10, 11, 12, 13, 14, 15, 16],
                    sampling_params=SamplingParams(max_new_tokens=3),
                )
                framed = frame_message(Kind.GENERATE, request, rids=["r1"], reply_to=[owner])
                # Bad headers (one claiming 2**32 - 1 elements), a frame too many, a batch
                # kind with no rows, a prompt claiming 2**32 - 1 ids, a stop string that is
                # not UTF-8: each one counted and skipped at once, and the request after
                # them answered.
                lying = b"\x82\xa3rid\xa2r1\xa9input_ids\xdd\xff\xff\xff\xff"
                params = b"\xafsampling_params\x81\xa4stop\x91\xa1\xff"
                not_utf8 = b"\x83\xa3rid\xa2r1\xa9input_ids\x91\x01" + params
                for garbage in (
                    [b"\xc1", b"x"],
                    [b"\xdd\xff\xff\xff\xff\x01", b"x"],
                    [*framed, b"extra"],
                    [b"\x91\x28"],
                    [framed[0], lying],
                    [framed[0], not_utf8],
                ):
                    wire.push.send_multipart(garbage)
                wire.push.send_multipart(framed)
                rows = [wire.take(wire.outputs, Kind.TOKEN_BATCH, 2.0)[1][0] for _ in range(3)]
                batch = combine_rows(BatchTokenIDOutput, rows)
                assert batch.output_ids == [[10], [11], [12]]
                assert batch.completion_tokens == [1, 2, 3]
                assert batch.decode_ids == [
                    [12, 13, 14, 15, 16, 10, *ids] for ids in ([], [11], [11, 12])
                ]
                assert batch.read_offsets == [5, 5, 5] and batch.http_worker_ipcs == [owner] * 3
                assert batch.finished_reasons == [None, None, {"type": "length", "length": 3}]

                embed = EmbeddingRequest(rid="e1", input_ids=[1, 2])
                wire.push.send_multipart(
                    frame_message(Kind.EMBED, embed, rids=["e1"], reply_to=[owner])
                )
                (row,) = wire.take(wire.outputs, Kind.EMBEDDING_BATCH)[1]
                assert isinstance(row, BatchEmbeddingOutput) and len(row.embeddings[0]) == 8

                operations = [
                    (Kind.PAUSE, PauseRequest(op_id="20-5", mode="in_place")),
                    (Kind.CONTINUE, ContinueRequest(op_id="20-4")),  # older: acked only
                    (Kind.CONTINUE, ContinueRequest(op_id="21-1")),
                ]
                for kind, operation in operations:
                    wire.push.send_multipart(frame_message(kind, operation))
                acks = [wire.take(wire.events, Kind.ACK)[1][0] for _ in operations]
                assert all(isinstance(ack, Acknowledgement) for ack in acks)
                assert [(a.op_id, a.participant, a.secret) for a in acks] == [
                    (op.op_id, "engine", "k" * 64) for _, op in operations
                ]

                engine.send_signal(signal.SIGTERM)
                _, errors = engine.communicate(timeout=10)
            finally:
                if engine.poll() is None:
                    engine.kill()
                    engine.wait()
                wire.close()
        assert engine.returncode == 0, errors
        assert not (run_dir / "engine").exists()
        last = errors.strip().splitlines()[-1]
        for counted in ("bad_header}=2", "frame_count}=1", "header_shape}=1", "bad_payload}=2"):
            assert f"rejected{{{counted}" in last, errors
        assert "duplicates{operation}=1" in last, errors

    def test_engine_commands_each_answered_once(
        self, c_engine: Path, vocab: Path, tmp_path: Path
    ) -> None:
        """Every ENGINE_COMMAND gets one COMMAND_REPLY with its op_id and the key:
        flush_cache ok while idle, conflict naming the running request, bad_arguments for
        an argument it does not take; an unknown name unknown_command; one without an
        op_id (nothing to answer) is counted as a bad payload."""
        run_dir = Path(os.path.realpath(tmp_path))
        env = {**os.environ, "SWITCHBOARD_STACK_KEY": "k" * 64}
        commands = [
            EngineCommand(op_id="e7-1", command="flush_cache", args={"timeout_s": 5.0}),
            EngineCommand(op_id="e7-2", command="reload_weights", args={"path": "/m"}),
            EngineCommand(op_id="e7-3", command="flush_cache", args={"colour": "red"}),
        ]
        with bounded_context() as context:
            wire = Wire(context, run_dir)
            engine = subprocess.Popen(
                wire.argv(c_engine, vocab), env=env, stderr=subprocess.PIPE, text=True
            )
            try:
                wire.take(wire.events, Kind.LOAD)
                header = frame_message(Kind.ENGINE_COMMAND, commands[0])[0]
                wire.push.send_multipart([header, b"\x81\xa7command\xa1x"])  # no op_id
                for command in commands:
                    wire.push.send_multipart(frame_message(Kind.ENGINE_COMMAND, command))
                replies = [wire.take(wire.events, Kind.COMMAND_REPLY)[1][0] for _ in commands]

                owner = f"ipc://{run_dir}/worker-w0"
                request = GenerateRequest(
                    rid="long-1",
                    input_ids=list(range(10, 2010)),  # 2000 ids, 5 ms a step
                    sampling_params=SamplingParams(max_new_tokens=2000),
                )
                framed = frame_message(Kind.GENERATE, request, rids=["long-1"], reply_to=[owner])
                wire.push.send_multipart(framed)
                wire.take(wire.outputs, Kind.TOKEN_BATCH)
                busy = EngineCommand(op_id="e7-4", command="flush_cache")
                wire.push.send_multipart(frame_message(Kind.ENGINE_COMMAND, busy))
                replies.append(wire.take(wire.events, Kind.COMMAND_REPLY)[1][0])
                later: list[Kind] = []  # a second reply to any of them would be here by now
                deadline = time.monotonic() + 0.3
                while time.monotonic() < deadline:
                    if wire.events.poll(50):
                        later.append(decode_message(wire.events.recv_multipart())[0].kind)
                assert Kind.COMMAND_REPLY not in later, later

                engine.send_signal(signal.SIGTERM)
                _, errors = engine.communicate(timeout=10)
            finally:
                if engine.poll() is None:
                    engine.kill()
                    engine.wait()
                wire.close()
        assert all(isinstance(reply, CommandReply) for reply in replies)
        assert [(r.op_id, r.ok, r.code, r.secret) for r in replies] == [
            ("e7-1", True, None, "k" * 64),
            ("e7-2", False, "unknown_command", "k" * 64),
            ("e7-3", False, "bad_arguments", "k" * 64),
            ("e7-4", False, "conflict", "k" * 64),
        ]
        assert replies[0].result == {"flushed": True, "dropped_tokens": 0}
        assert "'reload_weights'" in replies[1].message
        assert replies[3].message.startswith("1 requests are running (long-1)")
        last = errors.strip().splitlines()[-1]
        assert "received{engine_command}=5" in last and "sent{command_reply}=4" in last, errors
        assert "rejected{bad_payload}=1" in last, errors

    @pytest.mark.parametrize(
        ("arguments", "expected"),
        [
            ((), "missing endpoint"),
            (("--inbound", "ipc:///tmp/x", "--events", "ipc:///tmp/y"), "missing endpoint"),
            (
                (
                    "--inbound",
                    "ipc:///tmp/x",
                    "--events",
                    "ipc:///y",
                    "--outputs",
                    "tcp://10.1.2.3:5",
                ),
                "endpoint tcp://10.1.2.3:5: not ipc://, inproc:// or a loopback tcp://",
            ),
            (("--vocab", "/no/such/file"), "vocabulary /no/such/file: cannot read it"),
            (("--vocab", "/etc/hostname"), "vocabulary /etc/hostname: not a MessagePack map"),
        ],
    )
    def test_bad_start_is_one_line_and_status_2(
        self, c_engine: Path, tmp_path: Path, arguments: tuple[str, ...], expected: str
    ) -> None:
        endpoints = ()
        if arguments[:1] == ("--vocab",):
            endpoints = ("--inbound", f"ipc://{tmp_path}/e", "--events", "ipc:///tmp/x")
            endpoints += ("--outputs", "ipc:///tmp/y")
        env = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_")}
        done = subprocess.run(
            [str(c_engine), *endpoints, *arguments],
            env=env,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        assert done.returncode == 2 and expected in done.stderr, done
        assert len(done.stderr.splitlines()) == 1 and done.stdout == ""

    def test_gone_supervisor(self, c_engine: Path, vocab: Path, tmp_path: Path) -> None:
        """With SWITCHBOARD_PARENT_PID naming a process that is not its parent (nor its
        grandparent, through a shell that did not exec it) it exits at once, status 1; a
        shell between it and the supervisor is accepted."""
        inbound = tmp_path / "in"
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_")},
            "SWITCHBOARD_ENGINE_INBOUND": f"ipc://{inbound}",
            "SWITCHBOARD_ENGINE_EVENTS": f"ipc://{tmp_path}/events",
            "SWITCHBOARD_ENGINE_OUTPUTS": f"ipc://{tmp_path}/outputs",
            "SWITCHBOARD_STACK_KEY": "k" * 64,
            "SWITCHBOARD_VOCAB_FILE": str(vocab),
        }
        gone = subprocess.run(
            [str(c_engine)],
            env={**env, "SWITCHBOARD_PARENT_PID": "1"},
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        assert (gone.returncode, gone.stderr) == (1, "echo_engine: parent 1 is gone\n")

        # The shell runs the engine and then `true`, so it cannot exec it: this test's
        # process is the engine's grandparent.
        wrapped = subprocess.Popen(
            ["sh", "-c", f"{c_engine}; true"],
            env={**env, "SWITCHBOARD_PARENT_PID": str(os.getpid())},
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            wait_until(inbound.exists, 10, "the engine to bind")
            engine = psutil.Process(wrapped.pid).children()
            assert wrapped.poll() is None and len(engine) == 1
            engine[0].send_signal(signal.SIGTERM)
            _, errors = wrapped.communicate(timeout=10)
        finally:
            if wrapped.poll() is None:
                wrapped.kill()
                wrapped.wait()
        assert wrapped.returncode == 0 and "stopped after" in errors, errors
        assert not inbound.exists()
