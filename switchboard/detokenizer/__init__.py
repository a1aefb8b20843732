"""The detokenizer process: token batches in, text batches out to the owning workers.

:mod:`~switchboard.detokenizer.rows` is the pure per-request logic (no sockets);
:mod:`~switchboard.detokenizer.process` the process loop; ``switchboard detokenizer``
(:mod:`~switchboard.detokenizer.cli`) runs it.
"""

from switchboard.detokenizer.process import Detokenizer
from switchboard.detokenizer.row_columns import str_row
from switchboard.detokenizer.rows import RowDetokenizer
from switchboard.detokenizer.settings import DetokenizerSettings, OutputsTo

__all__ = ["Detokenizer", "DetokenizerSettings", "OutputsTo", "RowDetokenizer", "str_row"]
