"""The text layer: tokenizers, incremental detokenization and stop conditions.

Pure logic with no processes or sockets; ``router_core`` does not import it.
"""

from switchboard.text.incremental import IncrementalDetokenizer, TextDelta
from switchboard.text.stop import StopChecker, StopScan
from switchboard.text.tokenizer import Tokenizer, TokenizerLoadError, load_tokenizer

__all__ = [
    "IncrementalDetokenizer",
    "StopChecker",
    "StopScan",
    "TextDelta",
    "Tokenizer",
    "TokenizerLoadError",
    "load_tokenizer",
]
