"""The operator commands' typed answers: they mirror the admin API's response models."""

from __future__ import annotations

import json

import msgspec
import pytest

from app import models
from switchboard.admin_cli import answers


class TestAnswers:
    """The CLI's typed answers mirror the API's response models."""

    @pytest.mark.parametrize("name", [n for n in answers.__all__ if n != "decode"])
    def test_fields_are_the_models(self, name: str) -> None:
        """Each struct's fields are fields of the same-named model in app.models."""
        struct = getattr(answers, name)
        model = getattr(models, name)
        assert set(struct.__struct_fields__) <= set(model.model_fields), name

    def test_a_real_status_decodes(self) -> None:
        """A Status as the app builds it decodes into the CLI's Status."""
        status = models.Status(
            paused=True,
            pause_mode="retract",
            pause_state_since=1.0,
            recent_operations=[],
            engine=models.EngineInfo(live=False, load=None),
            workers={"serving": 2},
            versions=models.Versions(admin="1", router="1"),
            router=models.RouterInfo(pid=3, uptime_s=4.0),
        )
        decoded = answers.decode(answers.Status, json.loads(status.model_dump_json()))
        assert (decoded.paused, decoded.pause_mode, decoded.workers) == (
            True,
            "retract",
            {"serving": 2},
        )
        assert decoded.router == answers.RouterInfo(pid=3, uptime_s=4.0)
        assert msgspec.to_builtins(decoded.engine) == {"live": False, "load": None}
