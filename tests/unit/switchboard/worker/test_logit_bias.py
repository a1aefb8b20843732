"""logit_bias as clients send it: ids of the vocabulary, bounded biases, engines that apply it."""

from __future__ import annotations

import math

import pytest

from router_core.wire.control import LoadSnapshot
from switchboard.worker.generation import PromptError
from switchboard.worker.logit_bias import (
    LOGIT_BIAS_FEATURE,
    MAX_ENTRIES,
    logit_bias_of,
    parse_logit_bias,
)

APPLIES = LoadSnapshot(features=["logprobs", LOGIT_BIAS_FEATURE])


def test_ids_and_biases() -> None:
    """Keys become ids; -100, 100 and everything between are biases."""
    given = {"5": -100, "17": 100, " 3 ": 0.5}
    assert parse_logit_bias(given, 32, "logit_bias") == {5: -100.0, 17: 100.0, 3: 0.5}


@pytest.mark.parametrize(
    ("given", "words"),
    [
        ({"x": 1}, "logit_bias.x: a key must be a token id"),
        ({"-1": 1}, "logit_bias.-1: a key must be a token id"),
        ({"1.5": 1}, "a key must be a token id"),
        ({"٣": 1}, "a key must be a token id"),  # a digit, but not ASCII
        ({"32": 1}, "logit_bias.32: token 32 is not in the vocabulary of 32 tokens"),
        ({"1": 100.5}, "the bias must be from -100 to 100, not 100.5"),
        ({"1": math.inf}, "the bias must be from -100 to 100, not inf"),
        ({"1": math.nan}, "not nan"),
        ({str(i): 1 for i in range(MAX_ENTRIES + 1)}, f"at most {MAX_ENTRIES} tokens"),
    ],
)
def test_a_bad_entry_is_a_400_naming_it(given: dict[str, float], words: str) -> None:
    vocab = MAX_ENTRIES + 8 if len(given) > MAX_ENTRIES else 32
    with pytest.raises(PromptError) as caught:
        parse_logit_bias(given, vocab, "logit_bias")
    assert words in str(caught.value) and caught.value.param == "logit_bias"


def test_only_an_engine_that_applies_it_gets_it() -> None:
    """No bias passes anywhere; a bias for an engine without the feature (or before its
    first load snapshot) is a 400 naming the field and the engine that has it."""
    assert logit_bias_of(None, None, 32, "logit_bias") == {}
    assert logit_bias_of({}, LoadSnapshot(), 32, "logit_bias") == {}
    assert logit_bias_of({"2": 1}, APPLIES, 32, "logit_bias") == {2: 1.0}
    for load in (None, LoadSnapshot(features=["logprobs"])):
        with pytest.raises(PromptError) as caught:
            logit_bias_of({"2": 1}, load, 32, "sampling_params.logit_bias")
        message = str(caught.value)
        assert message.startswith("sampling_params.logit_bias: this stack's engine does not")
        assert "llama.cpp engine does" in message
