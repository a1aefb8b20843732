"""The command catalogue: every entry has its route, its CLI command and its console action
where it says so, and nothing is served or offered outside it."""

from __future__ import annotations

import argparse
import importlib
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import httpx
import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from app import models, routers
from app.audit import audit, audit_log
from app.catalogue import COMMANDS, Command, by_cli_name, command
from app.command_bodies import body_model
from app.command_table import DOC, command_table, refreshed
from app.main import create_app
from app.settings import STATIC_DIR, AdminSettings
from app.views import commands_of
from router_core.control.command_model import ConsoleScope
from router_core.wire.control import PAUSE_MODES
from switchboard.admin_cli import CLI_COMMANDS, COMMAND_NAMES, add_parsers
from switchboard.admin_cli.commands import RENDERINGS, execute

REPO = Path(__file__).resolve().parents[3]
#: Routes that are no command: the console's page and the unauthenticated probes.
OPEN_ROUTES = {("GET", "/"), ("GET", "/healthz"), ("GET", "/readyz"), ("GET", "/metrics")}
OPERATOR, VIEWER = "op-token-1", "view-token-1"


def served() -> dict[tuple[str, str], APIRoute]:
    """Every (method, path) the admin app's routers serve."""
    found: dict[tuple[str, str], APIRoute] = {}
    for name in routers.__all__:
        for route in getattr(routers, name).router.routes:
            assert isinstance(route, APIRoute)
            for method in route.methods:
                found[(method, route.path)] = route
    return found


def catalogued() -> set[tuple[str, str]]:
    return {(entry.method, path) for entry in COMMANDS for path in entry.paths}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """The admin app, its router absent (reads answer 503), an operator and a viewer token."""
    nowhere = tmp_path_factory.mktemp("catalogue") / "router-control"
    settings = AdminSettings(
        control_endpoint=f"ipc://{nowhere}",
        control_timeout_s=0.2,
        operator_tokens=f"ops:{OPERATOR}",  # type: ignore[arg-type]
        viewer_tokens=f"viewer:{VIEWER}",  # type: ignore[arg-type]
    )
    with TestClient(create_app(settings)) as running:
        yield running


def sample_path(path: str) -> str:
    return path.replace("{worker_id}", "w0")


class TestEntries:
    """The catalogue is coherent by itself."""

    def test_names_and_paths_are_unique(self) -> None:
        """No two entries share a name, a CLI name or a (method, path)."""
        names = [entry.name for entry in COMMANDS]
        routes = [(entry.method, path) for entry in COMMANDS for path in entry.paths]
        cli = [entry.cli.name for entry in COMMANDS if entry.cli is not None]
        assert len(set(names)) == len(names)
        assert len(set(routes)) == len(routes)
        assert len(set(cli)) == len(cli)

    def test_mutations_are_audited_and_need_an_operator(self) -> None:
        """Every POST is audited and operator-only; every GET is a viewer's read."""
        for entry in COMMANDS:
            assert entry.audited == (entry.method == "POST"), entry.name
            assert entry.role == ("operator" if entry.audited else "viewer"), entry.name

    def test_path_arguments_are_the_paths_parameters(self) -> None:
        """Each ``{name}`` of a path is one path argument, and no path argument is absent."""
        for entry in COMMANDS:
            in_path = set(re.findall(r"\{(\w+)\}", entry.path))
            arguments = {arg.name for arg in entry.arguments if arg.place == "path"}
            assert in_path == arguments, entry.name

    def test_pause_modes_and_defaults_are_the_models(self) -> None:
        """The API's PauseMode, the pause's choices and its bodies' defaults are the
        struct's, for the admin path and SGLang's alias alike."""
        assert get_args(models.PauseMode) == PAUSE_MODES
        mode, timeout = command("pause").arguments
        assert mode.choices == PAUSE_MODES
        for lenient in (False, True):
            body = body_model(command("pause"), lenient=lenient)()
            assert body.model_dump() == {"mode": mode.default, "timeout_s": timeout.default}
            resume = body_model(command("continue"), lenient=lenient)()
            assert resume.model_dump() == {"timeout_s": timeout.default}

    def test_console_actions_fit_their_scope(self) -> None:
        """A worker action names the worker states it applies in; no other action does."""
        states = set(get_args(models.WorkerState))
        for entry in COMMANDS:
            if entry.console is None:
                continue
            assert entry.console.scope in get_args(ConsoleScope)
            if entry.console.scope == "worker":
                assert "worker_id" in {argument.name for argument in entry.arguments}
                assert entry.console.states and set(entry.console.states) <= states
            else:
                assert entry.console.states == ()

    def test_path_for_quotes_one_segment(self) -> None:
        """A worker id with a slash or a space stays one path segment."""
        assert command("drain").path_for(worker_id="a/b c") == "/api/workers/a%2Fb%20c/drain"

    def test_unknown_name(self) -> None:
        """A name the catalogue does not have is a KeyError."""
        with pytest.raises(KeyError):
            command("reboot")


class TestRoutes:
    """The admin routes are the catalogue's, each behind its entry's role."""

    def test_every_entry_is_served(self) -> None:
        """Each entry's method is served at its path and at each alias."""
        assert catalogued() <= set(served())

    def test_nothing_is_served_outside_the_catalogue(self) -> None:
        """Every route but the page and the probes is a catalogue entry's."""
        assert set(served()) - OPEN_ROUTES == catalogued()

    def test_the_app_serves_every_router(self, client: TestClient) -> None:
        """The app's schema lists exactly the routers' documented routes."""
        documented = {
            (method.upper(), path)
            for path, operations in client.get("/openapi.json").json()["paths"].items()
            for method in operations
        }
        in_schema = {key for key, route in served().items() if route.include_in_schema}
        assert documented == in_schema

    @pytest.mark.parametrize("entry", COMMANDS, ids=[entry.name for entry in COMMANDS])
    def test_route_checks_the_entrys_role(self, client: TestClient, entry: Command) -> None:
        """No token is 401 everywhere; a viewer's token is 403 exactly where an operator's
        is needed."""
        for path in entry.paths:
            url = sample_path(path)
            assert client.request(entry.method, url).status_code == 401
            as_viewer = client.request(entry.method, url, headers=bearer(VIEWER))
            if entry.role == "operator":
                assert as_viewer.status_code == 403, (path, as_viewer.text)
            else:
                assert as_viewer.status_code not in (401, 403), (path, as_viewer.text)

    def test_commands_lists_the_catalogue(self, client: TestClient) -> None:
        """``GET /api/commands`` answers every entry, as :func:`commands_of` describes it."""
        answer = client.get("/api/commands", headers=bearer(VIEWER))
        assert answer.status_code == 200
        assert answer.json() == commands_of(COMMANDS).model_dump()
        listed = {item["name"]: item for item in answer.json()["commands"]}
        assert listed["freeze_gc"]["cli"] == "freeze-gc"
        assert listed["drain"]["console"]["states"] == ["starting", "serving", "paused"]

    def test_audit_names_the_command(self, caplog: pytest.LogCaptureFixture) -> None:
        """An audit line's action is the entry's name; a read cannot be audited."""
        fields: dict[str, Any] = {
            "who": "alice",
            "target": "all",
            "status": 200,
            "reason": None,
            "detail": "frozen=x",
            "client": None,
        }
        with caplog.at_level(logging.INFO, logger="switchboard.audit"):
            audit(audit_log(None), command("freeze_gc"), **fields)
        assert "action=freeze_gc target=all result=ok" in caplog.text
        with pytest.raises(ValueError):
            audit(audit_log(None), command("status"), **fields)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


class TestCli:
    """The CLI's subcommands are the catalogue's entries that have a CLI name."""

    def parser(self) -> tuple[argparse.ArgumentParser, Any]:
        parser = argparse.ArgumentParser(prog="switchboard")
        sub = parser.add_subparsers(dest="command", required=True)
        add_parsers(sub)
        return parser, sub

    def test_every_cli_entry_is_a_subcommand_and_nothing_else(self) -> None:
        """add_parsers adds one subcommand per CLI entry, each with a handler, no more."""
        _, sub = self.parser()
        assert list(sub.choices) == list(by_cli_name()) == list(CLI_COMMANDS)
        assert set(CLI_COMMANDS) == COMMAND_NAMES
        assert {entry.cli.render for entry in CLI_COMMANDS.values() if entry.cli} <= set(RENDERINGS)

    def test_arguments_become_options(self) -> None:
        """Body arguments are options, path arguments positionals, each with its default."""
        parser, _ = self.parser()
        pause = parser.parse_args(["pause", "--mode", "retract", "--timeout", "2"])
        assert (pause.mode, pause.timeout) == ("retract", 2.0)
        assert parser.parse_args(["pause"]).mode == "abort"
        assert parser.parse_args(["drain", "w7"]).worker_id == "w7"
        assert parser.parse_args(["freeze-gc"]).timeout is None

    @pytest.mark.parametrize("command", ["pause", "continue", "status", "drain"])
    def test_timeout_is_spelt_with_seconds_and_the_old_way(self, command: str) -> None:
        """``--timeout-s`` and its old spelling ``--timeout`` set the same value."""
        parser, _ = self.parser()
        words = [command, "w1"] if command == "drain" else [command]
        new = parser.parse_args([*words, "--timeout-s", "2.5"])
        old = parser.parse_args([*words, "--timeout", "2.5"])
        assert new.timeout == old.timeout == 2.5

    def test_freeze_gc(self, capsys: pytest.CaptureFixture[str]) -> None:
        """``switchboard freeze-gc`` posts to the entry's path and prints who froze."""
        seen: list[httpx.Request] = []

        def answer(request: httpx.Request) -> httpx.Response:
            seen.append(request)
            body = {"frozen": ["tokenizer_router"], "forwarded_to": ["engine"]}
            return httpx.Response(200, json=body)

        parser, _ = self.parser()
        args = parser.parse_args(["freeze-gc", "--url", "http://admin.test", "--token", "t"])
        assert execute(args, transport=httpx.MockTransport(answer)) == 0
        assert [(r.method, r.url.path) for r in seen] == [("POST", "/api/freeze_gc")]
        assert capsys.readouterr().out.splitlines() == [
            "frozen        tokenizer_router",
            "forwarded to  engine",
        ]


class TestConsole:
    """The console offers each console action of the catalogue where its scope says."""

    def test_each_scope_is_laid_out(self) -> None:
        """actions.js lays out every scope; index.html has a control for each generation
        command and each body argument it takes."""
        script = (STATIC_DIR / "actions.js").read_text()
        page = (STATIC_DIR / "index.html").read_text()
        for scope in get_args(ConsoleScope):
            assert f'scoped("{scope}")' in script, scope
        for entry in COMMANDS:
            if entry.console is None or entry.console.scope != "generation":
                continue
            assert f'data-command="{entry.name}"' in page, entry.name
            for argument in entry.body_arguments():
                assert f'data-argument="{argument.name}"' in page, argument.name

    def test_modules_stay_small(self) -> None:
        """Each console module is under 350 lines."""
        sizes = {path.name: len(path.read_text().splitlines()) for path in STATIC_DIR.glob("*.js")}
        assert sizes and max(sizes.values()) < 350, sizes


class TestDocs:
    """docs/operations.md lists every route and every CLI command of the catalogue."""

    def test_the_command_table_is_the_objects(self) -> None:
        """The guide's generated table is exactly what the command objects give now
        (``python -m app.command_table`` rewrites it)."""
        text = DOC.read_text()
        assert refreshed(text) == text, "run: python -m app.command_table"
        assert command_table().count("\n") == len(COMMANDS) + 1

    def test_operations_md(self) -> None:
        """Each entry's method and path (a worker's id written ``{id}``), and each CLI
        name, appear in the guide."""
        text = (REPO / "docs" / "operations.md").read_text()
        for entry in COMMANDS:
            for path in entry.paths:
                written = path.replace("{worker_id}", "{id}")
                assert f"`{entry.method} {written}" in text, (entry.method, path)
            if entry.cli is not None:
                assert f"`switchboard {entry.cli.name}" in text, entry.cli.name


@pytest.mark.parametrize(
    "module", ["app.catalogue", "app.routers.binding", "switchboard.admin_cli.answers"]
)
def test_all_names_exist(module: str) -> None:
    """Every name in the module's __all__ exists."""
    imported = importlib.import_module(module)
    assert [name for name in imported.__all__ if not hasattr(imported, name)] == []
