"""Unit tests of the docs test's pure parts: the extractor, the output matcher, the rewrite
and the static checks (no stack, no shell beyond ``bash -n``)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.docs.markdown_examples import (
    COMMAND_LINE,
    command_lines,
    console_steps,
    extract,
    parse_marker,
)
from tests.docs.output_match import mismatch, normalize, normalize_line
from tests.docs.probes import answers, probe_groups
from tests.docs.rewrite import Rewrite
from tests.docs.static_check import bash_syntax, check_line, make_targets, simple_commands

FENCE = "```"


def doc(*lines: str) -> str:
    return "\n".join(lines) + "\n"


class TestExtract:
    def test_marker_right_before_the_fence_is_the_blocks(self) -> None:
        """The comment line right before a fence is that block's marker, attributes parsed."""
        text = doc(
            '<!-- example: run stack=own setup="mkdir -p /tmp/x" -->', f"{FENCE}sh", "ls", FENCE
        )
        (block,) = extract("a.md", text).blocks
        assert block.marker is not None
        assert (block.marker.kind, dict(block.marker.attributes)) == (
            "run",
            {"stack": "own", "setup": "mkdir -p /tmp/x"},
        )
        assert (block.line, block.language, block.text) == (2, "sh", "ls")

    def test_shell_blocks_and_command_blocks_need_a_marker(self) -> None:
        """sh/console blocks, and any block with a switchboard or curl line, need one."""
        text = doc(
            f"{FENCE}console", "$ ls", FENCE,
            FENCE, "$ switchboard up --workers 0", FENCE,
            f"{FENCE}python", "print('switchboard')", FENCE,
            FENCE, "switchboard up: --workers 0: Input should be ...", FENCE,
        )  # fmt: skip
        needs = [block.needs_marker for block in extract("a.md", text).blocks]
        assert needs == [True, True, False, False]

    def test_a_marker_without_a_block_is_a_problem(self) -> None:
        """A marker followed by prose, or at the end of the file, is reported with its line."""
        text = doc("<!-- example: run -->", "prose", "", "<!-- example: check reason=x -->")
        assert extract("a.md", text).problems == (
            "a.md:1: marker with no fenced block right after it",
            "a.md:4: marker with no fenced block right after it",
        )

    def test_bad_markers_are_problems(self) -> None:
        """An unknown kind or attribute, or a word that is not key=value, is reported."""
        text = doc("<!-- example: runs -->", f"{FENCE}sh", "ls", FENCE)
        (problem,) = extract("a.md", text).problems
        assert "unknown kind 'runs'" in problem
        with pytest.raises(ValueError, match="unknown attribute 'port'"):
            parse_marker("run port=1")
        with pytest.raises(ValueError, match="not key=value"):
            parse_marker("run own")
        with pytest.raises(ValueError, match="reason="):
            parse_marker("check")

    def test_indented_fence_keeps_its_text_unindented(self) -> None:
        """A fence inside a list item: its body loses the fence's indentation."""
        text = doc(
            "1. step", "   <!-- example: run -->", f"   {FENCE}sh", "   ls -l", f"   {FENCE}"
        )
        (block,) = extract("a.md", text).blocks
        assert block.text == "ls -l" and block.marker is not None

    def test_fence_at_the_margin_keeps_its_lines_indentation(self) -> None:
        """A fence that is not indented leaves its lines as they are (a Python file)."""
        text = doc("<!-- example: file path=a.py -->", f"{FENCE}python", "if x:", "    y()", FENCE)
        (block,) = extract("a.md", text).blocks
        assert block.text == "if x:\n    y()"


class TestCommands:
    def test_command_lines_join_continuations_and_drop_comments(self) -> None:
        """Backslash continuations are one command; comment-only and blank lines go."""
        text = "# a comment\ncurl -N x \\\n  -d y   # send\n\nls"
        assert command_lines(text) == ["curl -N x    -d y   # send", "ls"]

    def test_console_steps(self) -> None:
        """Each $ line is a command (continued over backslashes), the rest its output."""
        text = '$ curl x \\\n    -d y\n{"a": 1}\n\n$ echo $?\n0\n'
        steps = console_steps(text)
        assert [(s.command, s.expected) for s in steps] == [
            ("curl x \\\n    -d y", '{"a": 1}'),
            ("echo $?", "0"),
        ]
        with pytest.raises(ValueError, match="before the first"):
            console_steps("output\n$ ls")

    @pytest.mark.parametrize(
        ("line", "is_command"),
        [
            (".venv/bin/switchboard status", True),
            ("SWITCHBOARD_PORT=9100 switchboard up", True),
            ("$ curl -s localhost:8001/api/status", True),
            ("switchboard up: port 8000 is in use", False),
            ("switchboard: serving http://127.0.0.1:8000", False),
        ],
    )
    def test_command_line_pattern(self, line: str, is_command: bool) -> None:
        """A command line is told from a line of switchboard's own output."""
        assert bool(COMMAND_LINE.match(line)) is is_command


class TestOutputMatch:
    def test_volatile_fields_are_placeholders(self) -> None:
        """Numbers, times, durations, op ids and tokens vary; names and versions do not."""
        assert (
            normalize_line(
                "  1  pause  complete   0.003s  10:01:50  engine, w0, w1  up 1h02m  admin 0.1.0"
            )
            == "<n> pause complete <duration> <time> engine, w0, w1 up <duration> admin 0.1.0"
        )
        assert normalize_line("op 1767607290118254671-1 token=q8Zr…") == "op <op-id> token=<token>"

    def test_a_changed_run_matches(self) -> None:
        """Another pid, another width, other timings: still the doc's output."""
        doc_output = "router    pid 4242, up 1h02m\nworkers   2 serving"
        run_output = "router pid 99, up 3.4s\nworkers 2 serving\n"
        assert mismatch(doc_output, run_output) is None

    def test_a_changed_shape_does_not(self) -> None:
        """A renamed word, a new column or a missing row fails, with a diff."""
        doc_output = "ID  STATE\nw0  serving\nw1  serving"
        for run_output in ("ID  STATE\nw0  serving", "ID  STATUS\nw0  serving\nw1  serving"):
            found = mismatch(doc_output, run_output)
            assert found is not None and "--- the doc" in found

    def test_json_compares_keys_in_order_and_ignores_wrapping(self) -> None:
        """A JSON answer matches across line wraps and values; a new or moved key fails."""
        doc_output = '{"op_id":"1-1","seq":1,\n "acked":["engine"],"ok":true}'
        assert mismatch(doc_output, '{"op_id":"9-4","seq":4,"acked":["engine"],"ok":true}') is None
        assert mismatch(doc_output, '{"seq":4,"op_id":"9-4","acked":["engine"],"ok":true}')
        assert mismatch(doc_output, '{"op_id":"9-4","seq":4,"acked":["w0"],"ok":true}')
        assert normalize("[1, 2]") == ['["<n>", "<n>"]']


class TestRewrite:
    rewrite = Rewrite(
        {8000: 41000, 8001: 41001}, Path("/tmp/d/sb"), Path("/tmp/d"), "TOKEN", ["/srv/sb"]
    )

    def test_ports_as_whole_numbers(self) -> None:
        """8000 in a URL or flag is rewritten; 18000 and 8000.5 are not."""
        assert self.rewrite.command("curl localhost:8000/x --port 8001 18000 8000.5") == (
            "curl localhost:41000/x --port 41001 18000 8000.5"
        )

    def test_paths_once(self) -> None:
        """/tmp/sb is the run dir, other /tmp paths and scratch= paths go to the scratch
        directory, once (a rewritten path under /tmp is not rewritten again)."""
        assert self.rewrite.output(
            "/tmp/sb/stack.key ipc:///tmp/sb/x /tmp/prom /srv/sb /var/tmp/a"
        ) == ("/tmp/d/sb/stack.key ipc:///tmp/d/sb/x /tmp/d/prom /tmp/d/srv/sb /var/tmp/a")

    def test_a_run_dir_switchboard_up_made(self) -> None:
        """A doc's /tmp/switchboard-XXXXXXXX is the stack's; /tmp/switchboard-prometheus not."""
        assert self.rewrite.output("/tmp/switchboard-k2x9a1q0/x /tmp/switchboard-prometheus") == (
            "/tmp/d/sb/x /tmp/d/switchboard-prometheus"
        )

    def test_listed_paths_whole(self) -> None:
        """A scratch= name is rewritten where it stands alone or begins a path, not
        inside another name."""
        rewrite = Rewrite({}, Path("/tmp/d/sb"), Path("/tmp/d"), "", ["stack.toml", "/models/m"])
        assert rewrite.output("--config stack.toml my-stack.toml stack.toml.bak") == (
            "--config /tmp/d/stack.toml my-stack.toml stack.toml.bak"
        )
        assert rewrite.output('"/models/m" /models/m/tokenizer.json /models/mm') == (
            '"/tmp/d/models/m" /tmp/d/models/m/tokenizer.json /models/mm'
        )

    def test_token_placeholders_in_commands_only(self) -> None:
        """A command's ``…`` or ``q8Zr…`` is the token; output keeps it for the matcher."""
        assert self.rewrite.command("export T=… U=q8Zr…") == "export T=TOKEN U=TOKEN"
        assert self.rewrite.output("token=q8Zr…") == "token=q8Zr…"


class TestStaticCheck:
    def test_simple_commands(self) -> None:
        """Lines split at operators; assignments, keywords and comments are skipped."""
        assert simple_commands("until A=1 curl -sf x; do sleep 0.2; done  # wait") == [
            ["curl", "-sf", "x"],
            ["sleep", "0.2"],
        ]
        assert simple_commands("a | b && c &") == [["a"], ["b"], ["c"]]

    def test_make_targets(self) -> None:
        """Rule heads are targets; variable assignments (``X := y``) are not."""
        text = "BIN := x\n.PHONY: a b\na b: deps\n\tcmd\nrun: venv\n"
        assert make_targets(text) == {".PHONY", "a", "b", "run"}

    def test_the_real_parser_and_makefile(self) -> None:
        """A misspelt flag, an unknown target, bad RUN_ARGS are each a problem."""
        assert check_line(".venv/bin/switchboard pause --mode in_place") == []
        (flag,) = check_line(".venv/bin/switchboard pause --modee in_place")
        assert "--modee" in flag
        assert check_line("make run RUN_ARGS='--workers 4'") == []
        assert "no such target" in check_line("make runn")[0]
        assert "--wokers" in check_line("make run RUN_ARGS='--wokers 4'")[0]

    def test_paths_and_modules(self) -> None:
        """A repository path that is not there, or a python -m flag not in --help, fails."""
        assert check_line("promtool check config deploy/prometheus/prometheus.yml") == []
        assert "no such file" in check_line("cat deploy/prometheus/nothing.yml")[0]
        assert (
            check_line('docker run -v "$PWD/dashboards/json:/var/lib/x:ro" grafana/grafana') == []
        )
        assert "not in its --help" in check_line("python -m switchboard.otlp_receiver --prot 1")[0]
        assert check_line("pytest -m fault tests/fault") == []
        assert "no such marker" in check_line("pytest -m faults tests/fault")[0]

    def test_bash_syntax(self) -> None:
        """bash -n accepts a script and names the problem of a broken one."""
        assert bash_syntax("ls &\nwait\n") is None
        assert bash_syntax("if true; then\n") is not None


class TestProbes:
    def test_one_list_for_every_server_or_one_each(self) -> None:
        """probe= is one comma list for all server lines, or a '|'-separated list each."""
        assert probe_groups("a,b", 2) == [["a", "b"], ["a", "b"]]
        assert probe_groups("a|b,c", 2) == [["a"], ["b", "c"]]
        with pytest.raises(ValueError, match=r"2 '\|'-separated lists for 3"):
            probe_groups("a|b", 3)

    def test_output_unix_socket_and_tcp(self, tmp_path: Path) -> None:
        """out: reads the servers' output; ipc: and tcp: want a listener; an unknown kind
        is an error, not a probe that never answers."""

        output = tmp_path / "output"
        output.write_text("event: snapshot\n")
        assert answers("out:event: snapshot", output)
        assert not answers("out:event: pause", output)
        path = tmp_path / "engine"
        assert not answers(f"ipc:{path}", output)
        with socket.socket(socket.AF_UNIX) as unix, socket.socket() as tcp:
            unix.bind(str(path))
            unix.listen()
            assert answers(f"ipc:{path}", output)
            tcp.bind(("127.0.0.1", 0))
            port = tcp.getsockname()[1]
            assert not answers(f"tcp:127.0.0.1:{port}", output)
            tcp.listen()
            assert answers(f"tcp:127.0.0.1:{port}", output)
        with pytest.raises(ValueError, match="expected http"):
            answers("udp:1", output)
