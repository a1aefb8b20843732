"""``switchboard worker --chat-template FILE``: the flag reaches the settings (from
``switchboard up`` too), the worker loads the template it names (else the model's own)
or refuses to start in one line, and the app holds it as ``app.state.chat_template``."""

from __future__ import annotations

from pathlib import Path

import pytest

from router_core.worker_link import WorkerLinkSettings
from switchboard.cli import build_parser
from switchboard.cli.support import UsageError
from switchboard.text import Tokenizer, load_tokenizer
from switchboard.text.chat_template import ChatTemplate
from switchboard.worker import cli as worker_cli
from switchboard.worker.app import create_app
from switchboard.worker.metrics import NO_METRICS
from switchboard.worker.settings import WorkerSettings


def worker_settings(run_dir: Path, *flags: str) -> WorkerSettings:
    words = ["worker", "--run-dir", str(run_dir), "--worker-id", "w0", *flags]
    return worker_cli.settings(build_parser("worker").parse_args(words))


class TestFlag:
    """--chat-template is a worker setting, empty by default."""

    def test_sets_the_setting(self, tmp_path: Path) -> None:
        """The path given, or empty without the flag."""
        assert worker_settings(tmp_path, "--chat-template", "/t.jinja").chat_template == (
            "/t.jinja"
        )
        assert worker_settings(tmp_path).chat_template == ""

    def test_switchboard_up_hands_it_to_the_workers(self, tmp_path: Path) -> None:
        """``switchboard up``'s chat_template reaches every worker's flags."""
        from switchboard.supervisor.layout import stack_layout
        from switchboard.supervisor.settings import load_settings

        settings = load_settings({"chat_template": "/t.jinja"})
        workers = [spec for spec in stack_layout(settings, tmp_path, 1) if spec.role == "worker"]
        assert workers
        for spec in workers:
            args = build_parser("worker").parse_args(list(spec.argv[3:]))
            assert worker_cli.settings(args).chat_template == "/t.jinja"


class TestLoading:
    """What the worker loads at start, or why it does not start."""

    def test_the_file_given(self, tmp_path: Path, default_tokenizer: Tokenizer) -> None:
        """The file is the template, named by its path."""
        path = tmp_path / "t.jinja"
        path.write_text("{{ messages[0].content }}!", encoding="utf-8")
        worker = worker_settings(tmp_path, "--chat-template", str(path))
        template = worker_cli.chat_template(worker, default_tokenizer, None)
        assert template is not None and template.origin == str(path)
        assert template.render([{"role": "user", "content": "Hi"}]) == "Hi!"

    def test_the_models_own(self, tmp_path: Path, default_tokenizer: Tokenizer) -> None:
        """Without the flag: the built-in default for the built-in tokenizer, none for a
        tokenizer.json that has no template."""
        template = worker_cli.chat_template(worker_settings(tmp_path), default_tokenizer, None)
        assert template is not None and template.origin == "built-in default"
        model = tmp_path / "model"
        model.mkdir()
        (model / "tokenizer.json").write_text(default_tokenizer.backend.to_str(), "utf-8")
        tokenizer = load_tokenizer(model)
        assert worker_cli.chat_template(worker_settings(tmp_path), tokenizer, str(model)) is None

    @pytest.mark.parametrize(
        ("content", "reason"),
        [
            (None, "not found (expected a Jinja template file)"),
            (b"\xff", "not UTF-8 text"),
            (b"{% if %}", "does not compile: Expected an expression"),
        ],
        ids=["missing", "not-utf8", "bad-syntax"],
    )
    def test_refused_in_one_line(
        self, tmp_path: Path, default_tokenizer: Tokenizer, content: bytes | None, reason: str
    ) -> None:
        """A file that cannot be used stops the worker with a usage error naming it."""
        path = tmp_path / "t.jinja"
        if content is not None:
            path.write_bytes(content)
        worker = worker_settings(tmp_path, "--chat-template", str(path))
        with pytest.raises(UsageError) as caught:
            worker_cli.chat_template(worker, default_tokenizer, None)
        assert str(caught.value).startswith(f"--chat-template {path}: {reason}")
        assert "\n" not in str(caught.value)

    def test_a_broken_model_template(self, tmp_path: Path, default_tokenizer: Tokenizer) -> None:
        """The model's own template that does not compile stops it too, saying how to
        replace it."""
        (tmp_path / "tokenizer.json").write_text(default_tokenizer.backend.to_str(), "utf-8")
        (tmp_path / "tokenizer_config.json").write_text('{"chat_template": "{{"}', "utf-8")
        with pytest.raises(UsageError, match=r"give --chat-template FILE to use another\)$"):
            worker_cli.chat_template(
                worker_settings(tmp_path), load_tokenizer(tmp_path), str(tmp_path)
            )


class TestApp:
    """create_app keeps the template where the chat endpoint reads it."""

    def test_state(self, tmp_path: Path, default_tokenizer: Tokenizer) -> None:
        """app.state.chat_template is the template given, or None."""
        settings = WorkerSettings(
            worker_id="w0", link=WorkerLinkSettings.in_run_dir(str(tmp_path), "w0")
        )
        template = ChatTemplate("{{ messages }}")
        app = create_app(settings, default_tokenizer, NO_METRICS, chat_template=template)
        assert app.state.chat_template is template
        assert create_app(settings, default_tokenizer, NO_METRICS).state.chat_template is None
