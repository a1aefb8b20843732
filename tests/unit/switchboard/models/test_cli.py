"""``switchboard models``: where each action writes, what it prints, and its refusals."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from switchboard.cli import main
from tests.unit.switchboard.models.test_vocab import write_vocab_file


@pytest.fixture
def workdir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A current directory and a Switchboard cache of this test's own."""
    monkeypatch.setenv("SWITCHBOARD_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def output_lines(capsys: pytest.CaptureFixture[str], *words: str) -> list[str]:
    assert main(["models", *words]) == 0
    return capsys.readouterr().out.splitlines()


def refusal(capsys: pytest.CaptureFixture[str], *words: str) -> str:
    """The one stderr line of a refused command line (by the parser or by run), exit 2."""
    status: object
    try:
        status = main(["models", *words])
    except SystemExit as exc:
        status = exc.code
    assert status == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    return lines[0]


class TestActions:
    """demo writes a file in the current directory by default, build the cache."""

    def test_demo(self, workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """demo writes ./switchboard-demo.gguf and prints it and the command serving it."""
        path = workdir / "switchboard-demo.gguf"
        lines = output_lines(capsys, "demo")
        assert path.is_file()
        assert lines[0].startswith(f"model: {path} (tiny, ")
        assert lines[1] == f"serve it: switchboard up --engine llama-cpp --model {path}"

    def test_demo_into_the_cache(self, workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """demo --cache writes into the model cache, and build (tiny, built-in) finds it."""
        lines = output_lines(capsys, "demo", "--cache")
        cached = next((workdir / "cache" / "models").glob("tiny-builtin-*.gguf"))
        assert lines[0].startswith(f"model: {cached} ")
        assert output_lines(capsys, "build")[0] == lines[0]
        assert not (workdir / "switchboard-demo.gguf").exists()

    def test_build_on_a_vocabulary(self, workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """build --vocab --out writes the model on that file's vocabulary where asked."""
        vocab = write_vocab_file(workdir / "ggml-vocab-made-up.gguf")
        lines = output_lines(capsys, "build", "--vocab", str(vocab), "--out", "made.gguf")
        assert lines[0].startswith(f"model: {workdir / 'made.gguf'} (tiny, ")
        other_dir = workdir / "elsewhere"
        lines = output_lines(capsys, "build", "--vocab", str(vocab), "--cache-dir", str(other_dir))
        assert lines[0].startswith(f"model: {other_dir}/tiny-made-up-")


class TestRefusals:
    """Bad flags are one line naming the problem, exit 2."""

    @pytest.mark.parametrize(
        ("words", "message"),
        [
            (("demo", "--size", "bench"), "--size is for build"),
            (("demo", "--vocab", "v.gguf"), "--vocab is for build"),
            (("build", "--out", "m.gguf", "--cache"), "--out and --cache: give one"),
            (("build", "--vocab", "absent.gguf"), "--vocab absent.gguf: no such file"),
            (("build", "--vocab", "notes.txt"), "--vocab notes.txt: not a GGUF file"),
            (
                ("demo", "--out", "no/such/dir/m.gguf"),
                "--out no/such/dir/m.gguf: no such directory",
            ),
            (("demo", "--out", "."), "--out .: is a directory"),
            (("build", "--size", "huge"), "invalid choice: 'huge'"),
            (("frob",), "invalid choice: 'frob'"),
        ],
    )
    def test_refused(
        self,
        workdir: Path,
        capsys: pytest.CaptureFixture[str],
        words: tuple[str, ...],
        message: str,
    ) -> None:
        """Each bad command line is refused in one line that says why."""
        (workdir / "notes.txt").write_text("just notes\n" * 8)
        line = refusal(capsys, *words)
        assert line.startswith("switchboard models: ") and message in line, line
        assert not list(workdir.glob("*.gguf"))

    def test_without_the_llama_extra(
        self, workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Without gguf installed, running (not parsing) is one line naming the extra."""
        for module in [name for name in sys.modules if name.startswith("switchboard.models.")]:
            if module != "switchboard.models.cli" and module != "switchboard.models.spec":
                monkeypatch.delitem(sys.modules, module)
        monkeypatch.setitem(sys.modules, "gguf", None)
        assert refusal(capsys, "demo") == (
            "switchboard models: needs the llama extra, gguf is missing (make llama)"
        )
