"""The text layer: tokenizers, incremental detokenization and stop conditions.

Pure logic with no processes or sockets; ``router_core`` does not import it.
"""

from switchboard.text.codec import TextCodec
from switchboard.text.gguf_tokenizer import GgufTokenizer
from switchboard.text.incremental import IncrementalDetokenizer, TextDelta
from switchboard.text.stop import StopChecker, StopScan
from switchboard.text.tokenizer import Tokenizer, TokenizerLoadError, load_tokenizer

__all__ = [
    "GgufTokenizer",
    "IncrementalDetokenizer",
    "StopChecker",
    "StopScan",
    "TextCodec",
    "TextDelta",
    "Tokenizer",
    "TokenizerLoadError",
    "load_tokenizer",
]
