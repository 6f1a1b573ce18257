"""How events and gate messages travel between processes: ZeroMQ multipart frames.

An event's frame carries the protocol's version header and its payload (:func:`.protocol.encode`);
with a shared secret, also the sender's wall-clock stamp and an HMAC-SHA256 over all three, so a
listening viewer refuses unsigned, forged and replayed frames. Gate messages (the step-mode control
channel) are plain msgpack. Malformed input raises :class:`~.protocol.ProtocolError` or a subclass.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import struct
import time
from typing import Literal

import msgspec

from .protocol import (
    PROTOCOL_VERSION,
    WIRE_HEADER,
    AnyEvent,
    Event,
    IncompatibleVersion,
    ProtocolError,
    decode,
    encode,
    version_text,
)

__all__ = [
    "SIGNATURE_WINDOW_S",
    "Unauthenticated",
    "Stale",
    "encode_frames",
    "decode_frames",
    "GateMessage",
    "encode_control",
    "decode_control",
]


SIGNATURE_WINDOW_S = 30.0
"""How far a signed frame's stamp may lie before the receiving session began, or ahead of its
clock: a frame captured from one session and replayed into another later is refused."""

_STAMP = struct.Struct("<q")


def _mac(secret: bytes, header: bytes, stamp: bytes, payload: bytes) -> bytes:
    return hmac.new(secret, header + stamp + payload, hashlib.sha256).digest()


def encode_frames(event: Event, secret: bytes | None = None) -> list[bytes]:
    """The ZeroMQ multipart message carrying ``event``: header frame and payload frame; with a
    shared secret also the sender's wall-clock time (ns) and the HMAC-SHA256 of header, time and
    payload, so a receiver can refuse a frame signed for an earlier session (see
    :data:`SIGNATURE_WINDOW_S`)."""
    payload = encode(event)
    if secret is None:
        return [WIRE_HEADER, payload]
    stamp = _STAMP.pack(time.time_ns())
    return [WIRE_HEADER, payload, stamp, _mac(secret, WIRE_HEADER, stamp, payload)]


class Unauthenticated(ProtocolError):
    """A message without the right shared-secret signature."""


class Stale(Unauthenticated):
    """A correctly signed message stamped outside the receiving session's window (a replay)."""


def decode_frames(frames: list[bytes], secret: bytes | None = None,
                  session_start_ns: int | None = None) -> tuple[AnyEvent, bytes]:
    """The event in a multipart message, and its payload (kept to be written to a trace as is).

    Checks the part count, the signature when a ``secret`` is required (and, given the session's
    wall-clock start, that the signed stamp lies in its window: :class:`Stale` otherwise), and the
    version header before decoding: any minor version of this major is accepted (see
    :func:`decode` for what a newer one may carry); another major raises
    :class:`IncompatibleVersion` naming both.
    """
    frames = [bytes(f) for f in frames]
    if secret is not None:
        if (len(frames) != 4 or len(frames[2]) != _STAMP.size
                or not hmac.compare_digest(frames[3], _mac(secret, frames[0], frames[2], frames[1]))):
            raise Unauthenticated("message not signed with the shared secret")
        if session_start_ns is not None:
            (stamp,) = _STAMP.unpack(frames[2])
            window = int(SIGNATURE_WINDOW_S * 1e9)
            if not session_start_ns - window <= stamp <= time.time_ns() + window:
                raise Stale("signed for another session (its time lies outside this session's window)")
        frames = frames[:2]
    if len(frames) != 2:
        raise ProtocolError(f"expected 2 frames, got {len(frames)}")
    header, payload = frames
    if header != WIRE_HEADER:
        if not header.startswith(b"collviz/"):
            raise ProtocolError("not a collviz message")
        peer = header[8:40].decode("ascii", "replace")
        if not re.fullmatch(rf"{PROTOCOL_VERSION[0]}\.\d+", peer):
            raise IncompatibleVersion(f"peer speaks {peer}, this collviz speaks {version_text()}")
    return decode(payload), payload


class GateMessage(msgspec.Struct, kw_only=True):
    """Control channel, both ways: a worker says it ``wait``s at gate ``index``; the launcher
    answers ``go`` with the highest released index, or ``abort`` to end the run."""

    kind: Literal["wait", "go", "abort"]
    run: str
    rank: int
    index: int


_control_encoder = msgspec.msgpack.Encoder()
_control_decoder = msgspec.msgpack.Decoder(GateMessage)


def encode_control(message: GateMessage) -> bytes:
    """The msgpack payload of a control message."""
    return _control_encoder.encode(message)


def decode_control(payload: bytes) -> GateMessage:
    """A control message from its payload; :class:`ProtocolError` if it is not one."""
    try:
        return _control_decoder.decode(payload)
    except Exception as exc:
        raise ProtocolError(f"malformed control message: {exc}") from None
