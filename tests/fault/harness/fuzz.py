"""Garbage for a bound socket, each message with the reason its receiver must count it under.

Pure: no sockets. A :class:`Target` is one socket a stack process binds, with valid
messages of the kinds it receives (``templates``) and hand-made bad ones whose reason is
known (``extras``: a wrong kind, an undecodable payload, ...). :func:`attack` draws
messages for it, in three kinds, every one of which the receiver must refuse:

* random: 1 to 4 frames of 0 to 200 random bytes;
* mutated: a template with its header truncated, bit-flipped or spliced with random
  bytes, or with a payload frame dropped or doubled;
* the target's extras, in turn;
* for a data socket, :data:`OVERSIZED` messages of more frames than a message may have.

Each message's reason is what the stack's own validation says (:func:`data_reason`:
the frame limit, then the header decoder, then the socket's frame-count rule;
:func:`control_reason` for a control socket's envelope and request); a draw the
receiver would accept as a real message is drawn again. So the receiver's ``rejected``
counters must grow by exactly what :func:`attack` yields, reason by reason.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import msgspec

from router_core.control.protocol import decode_request
from router_core.transport import MAX_FRAMES
from router_core.wire import Header, WireError, decode_header, payload_frame_count

__all__ = ["Frames", "Target", "attack", "control_reason", "data_reason"]

Frames = list[bytes]
#: Of every ``_CYCLE`` messages, ``_RANDOMS`` are random, as many mutated, the rest extras.
_CYCLE = 20
_RANDOMS = 9
#: Messages of ``MAX_FRAMES + 1`` frames per data socket (each is 4098 frames to read).
OVERSIZED = 2


@dataclass(frozen=True)
class Target:
    """One bound socket under attack."""

    #: e.g. ``router.requests``, ``worker-w0``.
    name: str
    endpoint: str
    #: The ``process`` label its rejects are counted under in ``/metrics``.
    process: str
    control: bool = False
    templates: tuple[Frames, ...] = ()
    #: Messages with the reason each is refused for once past the header and frame
    #: checks (an extra those checks refuse counts under their reason).
    extras: tuple[tuple[Frames, str], ...] = ()
    frame_count: Callable[[Header], int] = payload_frame_count


def data_reason(frames: Frames, frame_count: Callable[[Header], int]) -> str | None:
    """Why a data socket refuses ``frames`` before its handler runs, or None."""
    if len(frames) > MAX_FRAMES:
        return "too_many_frames"
    try:
        header = decode_header(frames[0])
    except WireError as exc:
        return exc.reason
    if len(frames) - 1 != frame_count(header):
        return "frame_count"
    return None


def control_reason(frames: Frames) -> str | None:
    """Why a control server refuses what a DEALER sent as ``frames``, or None.

    The server sees ``[identity, *frames]`` and takes one request frame, alone or after
    an empty delimiter (``router_core/control/server.py``).
    """
    if len(frames) > 2 or (len(frames) == 2 and frames[0] != b""):
        return "control_envelope"
    try:
        decode_request(frames[-1])
    except msgspec.DecodeError:
        return "control_request"
    return None


def _reason(target: Target, frames: Frames) -> str | None:
    return control_reason(frames) if target.control else data_reason(frames, target.frame_count)


#: Draws allowed for one refused message (a refused one comes within a few).
_DRAWS = 1000


def _refused(target: Target, draw: Callable[[], Frames]) -> tuple[Frames, str]:
    for _ in range(_DRAWS):
        frames = draw()
        reason = _reason(target, frames)
        if reason is not None:
            return frames, reason
    raise AssertionError(f"{target.name}: {_DRAWS} draws and none refused")


def _random(rng: random.Random) -> Frames:
    return [rng.randbytes(rng.randint(0, 200)) for _ in range(rng.randint(1, 4))]


def _mutated(rng: random.Random, template: Frames) -> Frames:
    header, payload = template[0], template[1:]
    choice = rng.randrange(4)
    if choice == 0:
        header = header[: rng.randrange(len(header))]
    elif choice == 1:
        flipped = bytearray(header)
        for _ in range(rng.randint(1, 3)):
            flipped[rng.randrange(len(flipped))] ^= rng.randint(1, 255)
        header = bytes(flipped)
    elif choice == 2:
        cut = rng.randrange(len(header) + 1)
        header = header[:cut] + rng.randbytes(rng.randint(1, 8)) + header[cut:]
    elif payload:
        payload = payload[:-1] if rng.random() < 0.5 else [*payload, payload[-1]]
    else:
        payload = [rng.randbytes(rng.randint(0, 40))]
    return [header, *payload]


def attack(target: Target, rng: random.Random) -> Iterator[tuple[Frames, str]]:
    """Messages the target must refuse, each with its reason, without end: first
    :data:`OVERSIZED` oversized ones (data sockets), then in every :data:`_CYCLE`
    messages :data:`_RANDOMS` random, as many mutated, the rest extras (random ones
    stand in for what a target has no template or extra for)."""
    if not target.control:
        for _ in range(OVERSIZED):
            yield [b"\x91\x2b", *([b"x"] * MAX_FRAMES)], "too_many_frames"
    extra = 0
    for made in itertools.count():
        slot = made % _CYCLE
        if slot >= 2 * _RANDOMS and target.extras:
            frames, reason = target.extras[extra % len(target.extras)]
            extra += 1
            yield frames, _reason(target, frames) or reason
        elif slot >= _RANDOMS and target.templates:
            template = target.templates[made % len(target.templates)]
            yield _refused(target, lambda: _mutated(rng, template))  # noqa: B023 (called at once)
        else:
            yield _refused(target, lambda: _random(rng))
