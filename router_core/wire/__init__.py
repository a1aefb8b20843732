"""The Switchboard wire protocol: kinds, header, payload structs, codec and split.

Everything here is pure (no sockets); ``docs/protocol.md`` is the prose contract.
"""

from router_core.wire.codec import (
    PAYLOAD_TYPES,
    Frames,
    WireError,
    check_header,
    decode_header,
    decode_message,
    decode_payload,
    encode_header,
    encode_payload,
    frame_batch,
    frame_message,
)
from router_core.wire.header import Header, payload_frame_count
from router_core.wire.kinds import BATCH_KINDS, DATA_KINDS, Kind
from router_core.wire.split import (
    BatchShapeError,
    batch_columns,
    check_batch_shape,
    combine_rows,
    group_by_destination,
    split_rows,
)

__all__ = [
    "BATCH_KINDS",
    "DATA_KINDS",
    "PAYLOAD_TYPES",
    "BatchShapeError",
    "Frames",
    "Header",
    "Kind",
    "WireError",
    "batch_columns",
    "check_batch_shape",
    "check_header",
    "combine_rows",
    "decode_header",
    "decode_message",
    "decode_payload",
    "encode_header",
    "encode_payload",
    "frame_batch",
    "frame_message",
    "group_by_destination",
    "payload_frame_count",
    "split_rows",
]
