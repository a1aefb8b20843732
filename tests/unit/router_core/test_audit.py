"""router_core.audit: one printable line per record, whatever the values hold, and an
append-only JSON-lines file that never fails the caller."""

from __future__ import annotations

import json
import logging
import os
import stat
from pathlib import Path

import pytest

from router_core.audit import MAX_VALUE_CHARS, AuditLog, escape_value, format_fields

LOGGER = "tests.audit"


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == LOGGER]


class TestEscapeValue:
    """Field values: bare when harmless, quoted and escaped otherwise."""

    @pytest.mark.parametrize("value", ["alice", "w0", "op-1.2", "mode:abort", "é", "all"])
    def test_harmless_text_is_bare(self, value: str) -> None:
        """Printable text without whitespace, quotes, ``=`` or backslash is left bare."""
        assert escape_value(value) == value

    @pytest.mark.parametrize(
        ("value", "expected"),
        [
            ("a b", '"a b"'),
            ("", '""'),
            ("k=v", '"k=v"'),
            ('say "hi"', '"say \\"hi\\""'),
            ("it's", '"it\'s"'),
            ("back\\slash", '"back\\\\slash"'),
            ("-", '"-"'),
        ],
    )
    def test_separators_are_quoted(self, value: str, expected: str) -> None:
        """Whitespace, quotes, ``=``, backslash, the empty string and ``-`` are quoted."""
        assert escape_value(value) == expected

    @pytest.mark.parametrize(
        ("value", "expected"),
        [
            ("a\nb", '"a\\nb"'),
            ("a\r\nb", '"a\\r\\nb"'),
            ("a\tb", '"a\\tb"'),
            ("\x1b[2K\x1b[1A", '"\\x1b[2K\\x1b[1A"'),
            ("nul\x00", '"nul\\x00"'),
            ("del\x7f", '"del\\x7f"'),
            ("c1\x9b", '"c1\\x9b"'),
            ("nbsp\xa0", '"nbsp\\xa0"'),
            ("ls\u2028ps\u2029", '"ls\\u2028ps\\u2029"'),
            ("rtl\u202eevil", '"rtl\\u202eevil"'),
            ("zw\u200b", '"zw\\u200b"'),
            ("lone\udc80", '"lone\\udc80"'),
            ("tag\U000e0041", '"tag\\U000e0041"'),
        ],
    )
    def test_control_and_invisible_characters_are_escaped(self, value: str, expected: str) -> None:
        """Controls (C0, ESC, DEL, C1), odd spaces, line separators, format characters and
        lone surrogates are written as escapes, never as themselves."""
        assert escape_value(value) == expected

    @pytest.mark.parametrize(
        ("value", "expected"),
        [(None, "-"), (True, "true"), (False, "false"), (504, "504"), (0.5, "0.5")],
    )
    def test_other_types(self, value: object, expected: str) -> None:
        """None is ``-``, booleans are lowercase, numbers as Python writes them."""
        assert escape_value(value) == expected

    def test_every_code_point_gives_printable_single_line(self) -> None:
        """No character below U+10000 and none of the planes' edges escapes unescaped."""
        for point in [*range(0x10000), 0x10FFFF, 0xE0001, 0x1F600]:
            text = escape_value(f"x{chr(point)}y")
            assert text.isprintable(), hex(point)
            assert "\n" not in text and "\r" not in text, hex(point)

    def test_long_values_are_cut(self) -> None:
        """A string past MAX_VALUE_CHARS is cut there and says how much was left out."""
        text = escape_value("a" * (MAX_VALUE_CHARS + 10))
        assert text == '"' + "a" * MAX_VALUE_CHARS + '...(+10 chars)"'


class TestFormatFields:
    """Keys come from the code, in a safe set; values are escaped."""

    def test_fields_in_order(self) -> None:
        """Fields are joined in the order given."""
        assert format_fields({"who": "a", "status": 200, "detail": "x y"}) == (
            'who=a status=200 detail="x y"'
        )

    @pytest.mark.parametrize("key", ["Who", "a b", "a=b", "", "1st", "time", "x" * 33, "wh\no"])
    def test_unsafe_keys_are_refused(self, key: str) -> None:
        """A key outside ``[a-z][a-z0-9_]{0,31}``, or ``time``, is a ValueError."""
        with pytest.raises(ValueError, match="audit field"):
            format_fields({key: "x"})


class TestForgedLines:
    """A value cannot forge, end or hide an audit line."""

    def test_newline_cannot_start_a_forged_line(self, caplog: pytest.LogCaptureFixture) -> None:
        """A target holding a newline and a fake record stays inside one line."""
        forged = "w0\n2026-01-05 INFO switchboard.audit: audit who=root action=pause result=ok"
        with caplog.at_level(logging.INFO, logger=LOGGER):
            AuditLog(logging.getLogger(LOGGER)).record(who="alice", target=forged, result="ok")
        (line,) = _lines(caplog)
        assert "\n" not in line and line.isprintable()
        assert line.startswith('audit who=alice target="w0\\n2026-01-05 INFO ')
        assert line.endswith(' result=ok"' + " result=ok")

    def test_escape_sequences_cannot_hide_a_line(self, caplog: pytest.LogCaptureFixture) -> None:
        """ESC (erase line, cursor up) reaches the log as text, not as a terminal command."""
        with caplog.at_level(logging.INFO, logger=LOGGER):
            AuditLog(logging.getLogger(LOGGER)).record(who="\x1b[1A\x1b[2Kroot")
        (line,) = _lines(caplog)
        assert "\x1b" not in line
        assert line == 'audit who="\\x1b[1A\\x1b[2Kroot"'


class TestAuditFile:
    """The JSON-lines sink: append-only, private, one object per line, never fatal."""

    def test_records_are_json_lines(self, tmp_path: Path) -> None:
        """Each record is one JSON object: time first, then the fields as given."""
        path = tmp_path / "audit.jsonl"
        with AuditLog(logging.getLogger(LOGGER), path, clock=lambda: 1767607331.9034) as log:
            log.record(who="alice", action="pause", status=200, detail="a\nb\x1b", ok=True)
            log.record(who=None, action="drain", target="é", status=401)
        raw = path.read_bytes()
        assert raw.isascii() and raw.count(b"\n") == 2
        first, second = (json.loads(line) for line in raw.splitlines())
        assert list(first) == ["time", "who", "action", "status", "detail", "ok"]
        assert first["time"] == "2026-01-05T10:02:11.903+00:00"
        assert first["detail"] == "a\nb\x1b" and first["ok"] is True
        assert second == {
            "time": first["time"],
            "who": None,
            "action": "drain",
            "target": "é",
            "status": 401,
        }

    def test_file_is_created_private_and_appended(self, tmp_path: Path) -> None:
        """A new file gets mode 0600 whatever the umask; a reopened one is appended to."""
        path = tmp_path / "audit.jsonl"
        previous = os.umask(0)
        try:
            with AuditLog(logging.getLogger(LOGGER), path) as log:
                log.open()
                log.record(n=1)
        finally:
            os.umask(previous)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        with AuditLog(logging.getLogger(LOGGER), path) as log:
            log.record(n=2)
        assert [json.loads(line)["n"] for line in path.read_text().splitlines()] == [1, 2]

    def test_each_record_is_on_disk_when_record_returns(self, tmp_path: Path) -> None:
        """No buffering: a reader sees the line before the log is closed."""
        path = tmp_path / "audit.jsonl"
        with AuditLog(logging.getLogger(LOGGER), path) as log:
            log.record(action="pause")
            assert json.loads(path.read_text())["action"] == "pause"

    def test_open_raises_for_an_unusable_path(self, tmp_path: Path) -> None:
        """open() raises OSError, so a process can refuse to start."""
        log = AuditLog(logging.getLogger(LOGGER), tmp_path / "missing" / "audit.jsonl")
        with pytest.raises(OSError):
            log.open()

    def test_write_failures_are_logged_once_and_counted(
        self, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A file that cannot be written costs nothing but a count and one error line;
        the logger still gets every record."""
        log = AuditLog(logging.getLogger(LOGGER), tmp_path / "missing" / "audit.jsonl")
        with caplog.at_level(logging.INFO, logger=LOGGER):
            for number in range(3):
                log.record(n=number)
        assert log.write_failures == 3
        errors = [r for r in caplog.records if r.name == LOGGER and r.levelno == logging.ERROR]
        assert len(errors) == 1 and "cannot write the audit file" in errors[0].getMessage()
        assert [line for line in _lines(caplog) if line.startswith("audit ")] == [
            "audit n=0",
            "audit n=1",
            "audit n=2",
        ]

    def test_full_disk_is_counted(self, caplog: pytest.LogCaptureFixture) -> None:
        """A write error (here /dev/full's ENOSPC) is counted, never raised; closing says
        how many records the file missed."""
        log = AuditLog(logging.getLogger(LOGGER), Path("/dev/full"))
        with caplog.at_level(logging.INFO, logger=LOGGER):
            log.record(n=1)
            log.record(n=2)
            log.close()
        assert log.write_failures == 2
        assert "2 audit records could not be written to /dev/full" in caplog.text

    def test_recovery_reports_the_count(
        self, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A file that becomes writable again takes the next record, and the log says
        how many were missed meanwhile."""
        directory = tmp_path / "later"
        log = AuditLog(logging.getLogger(LOGGER), directory / "audit.jsonl")
        with caplog.at_level(logging.INFO, logger=LOGGER):
            log.record(n=1)
            directory.mkdir()
            log.record(n=2)
            log.close()
        lines = (directory / "audit.jsonl").read_text().splitlines()
        assert [json.loads(line)["n"] for line in lines] == [2]
        assert "is written again; 1 records so far could not be" in caplog.text

    def test_records_after_close_go_to_the_logger_only(
        self, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        """After close() the file gets nothing more, and that is not a failure."""
        path = tmp_path / "audit.jsonl"
        log = AuditLog(logging.getLogger(LOGGER), path)
        log.record(n=1)
        log.close()
        with caplog.at_level(logging.INFO, logger=LOGGER):
            log.record(n=2)
        assert len(path.read_text().splitlines()) == 1 and log.write_failures == 0
        assert _lines(caplog) == ["audit n=2"]
