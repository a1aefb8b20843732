"""Generated llama-architecture GGUF models, for tests, benchmarks and the demo.

No model can be downloaded where Switchboard is tested, so it makes its own: a
:class:`ModelSpec` (:data:`TINY` for tests, :data:`BENCH` for benchmarks) with
deterministic f32 weights and the tokenizer of a vocabulary source (:class:`GGUFVocab`
copies one from a GGUF file, :class:`BuiltinVocab` converts Switchboard's built-in
tokenizer), written by :func:`build_model` into a content-keyed cache.

Names are imported on first use (:mod:`router_core.lazy`): the ``switchboard models``
command line is built without loading numpy or gguf, which only the ``llama`` extra
installs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from router_core.lazy import lazy_exports

if TYPE_CHECKING:
    from switchboard.models.builder import build_model, default_model_dir, model_path, write_model
    from switchboard.models.builtin_vocab import BuiltinVocab
    from switchboard.models.spec import BENCH, SPECS, TINY, ModelSpec
    from switchboard.models.vocab import GGUFVocab, VocabError, VocabSource, Vocabulary

__all__ = [
    "BENCH",
    "SPECS",
    "TINY",
    "BuiltinVocab",
    "GGUFVocab",
    "ModelSpec",
    "VocabError",
    "VocabSource",
    "Vocabulary",
    "build_model",
    "default_model_dir",
    "model_path",
    "write_model",
]

_HOMES = {
    "switchboard.models.builder": ("build_model", "default_model_dir", "model_path", "write_model"),
    "switchboard.models.builtin_vocab": ("BuiltinVocab",),
    "switchboard.models.spec": ("BENCH", "SPECS", "TINY", "ModelSpec"),
    "switchboard.models.vocab": ("GGUFVocab", "VocabError", "VocabSource", "Vocabulary"),
}

__getattr__ = lazy_exports(
    globals(), {name: module for module, names in _HOMES.items() for name in names}
)
