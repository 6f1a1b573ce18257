"""How events and gate messages travel between processes: ZeroMQ multipart frames.

An event message carries the protocol's version header and a body: one event's payload
(:func:`.protocol.encode`), or, since protocol 1.5, several events' payloads in order, each after
its length (the header then ends in :data:`BATCH_MARK`), so that a busy sender pays for one
ZeroMQ message, not one per event. With a shared secret a message also carries the sender's
wall-clock stamp and an HMAC-SHA256 over header, stamp and body, so a listening viewer refuses
unsigned, forged and replayed messages. Gate messages (the step-mode control channel) are plain
msgpack. Malformed input raises :class:`~.protocol.ProtocolError` or a subclass.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import struct
import time
from collections.abc import Sequence
from typing import Literal

import msgspec

from .protocol import (
    MAX_FRAME_BYTES,
    PROTOCOL_VERSION,
    WIRE_HEADER,
    AnyEvent,
    Event,
    IncompatibleVersion,
    ProtocolError,
    UnknownEventType,
    decode,
    encode,
    version_text,
)

__all__ = [
    "SIGNATURE_WINDOW_S",
    "BATCH_MARK",
    "Unauthenticated",
    "Stale",
    "encode_frames",
    "batch_frames",
    "open_frames",
    "signed_message",
    "verified_frames",
    "decode_frames",
    "GateMessage",
    "encode_control",
    "decode_control",
]


SIGNATURE_WINDOW_S = 30.0
"""How far a signed frame's stamp may lie before the receiving session began, or ahead of its
clock: a frame captured from one session and replayed into another later is refused."""

BATCH_MARK = b" batch"
"""Ends the version header of a message whose body holds several events (protocol 1.5 on): each
payload after its length, a 4-byte big-endian unsigned integer. A reader before 1.5 refuses such
a message by its version; any 1.x reader reads a message of one event."""

_BATCH_HEADER = WIRE_HEADER + BATCH_MARK
_STAMP = struct.Struct("<q")
_LENGTH = struct.Struct(">I")


def _mac(secret: bytes, header: bytes, stamp: bytes, body: bytes) -> bytes:
    return hmac.new(secret, header + stamp + body, hashlib.sha256).digest()


def signed_message(header: bytes, body: bytes, secret: bytes | None) -> list[bytes]:
    """Header and body frames; with a secret, also the sender's wall-clock time (ns) and the
    HMAC-SHA256 of header, time and body (events use it, and a relay's news: any header)."""
    if secret is None:
        return [header, body]
    stamp = _STAMP.pack(time.time_ns())
    return [header, body, stamp, _mac(secret, header, stamp, body)]


def encode_frames(event: Event, secret: bytes | None = None) -> list[bytes]:
    """The ZeroMQ multipart message carrying ``event``: header frame and payload frame; with a
    shared secret also the sender's wall-clock time (ns) and the HMAC-SHA256 of header, time and
    payload, so a receiver can refuse a frame signed for an earlier session (see
    :data:`SIGNATURE_WINDOW_S`)."""
    return signed_message(WIRE_HEADER, encode(event), secret)


def batch_frames(payloads: Sequence[bytes], secret: bytes | None = None) -> list[bytes]:
    """The ZeroMQ multipart message carrying these encoded events, in order (one or more): a
    single one as :func:`encode_frames` sends it; several in one body (see :data:`BATCH_MARK`),
    signed as one. The caller keeps the body within :data:`~.protocol.MAX_FRAME_BYTES`."""
    if len(payloads) == 1:
        return signed_message(WIRE_HEADER, payloads[0], secret)
    body = b"".join([part for payload in payloads for part in (_LENGTH.pack(len(payload)), payload)])
    return signed_message(_BATCH_HEADER, body, secret)


class Unauthenticated(ProtocolError):
    """A message without the right shared-secret signature."""


class Stale(Unauthenticated):
    """A correctly signed message stamped outside the receiving session's window (a replay)."""


def verified_frames(frames: list[bytes], secret: bytes | None = None,
                    session_start_ns: int | None = None) -> tuple[bytes, bytes]:
    """A message's header and body, once its part count is right and, when a ``secret`` is
    required, its signature too (and, given the session's wall-clock start, its stamp lies in the
    session's window: :class:`Stale` otherwise); :class:`Unauthenticated` or
    :class:`~.protocol.ProtocolError` else. The header is not read: the caller knows its own."""
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
    return frames[0], frames[1]


def open_frames(frames: list[bytes], secret: bytes | None = None,
                session_start_ns: int | None = None) -> list[bytes]:
    """The encoded events a multipart message carries, in order, not yet decoded.

    Checks the part count, the signature when a ``secret`` is required (and, given the session's
    wall-clock start, that the signed stamp lies in its window: :class:`Stale` otherwise), the
    version header — any minor version of this major is accepted (see :func:`decode` for what a
    newer one may carry); another major raises :class:`IncompatibleVersion` naming both — and, in
    a body of several events, that their lengths add up to it.
    """
    header, body = verified_frames(frames, secret, session_start_ns)
    if header == WIRE_HEADER:
        return [body]
    if header == _BATCH_HEADER:
        return _split(body)
    batch = header.endswith(BATCH_MARK)
    version = header[:-len(BATCH_MARK)] if batch else header
    if not version.startswith(b"collviz/"):
        raise ProtocolError("not a collviz message")
    peer = version[8:40].decode("ascii", "replace")
    if not re.fullmatch(rf"{PROTOCOL_VERSION[0]}\.\d+", peer):
        raise IncompatibleVersion(f"peer speaks {peer}, this collviz speaks {version_text()}")
    return _split(body) if batch else [body]


def _split(body: bytes) -> list[bytes]:
    """The payloads of a body of several events, each after its length."""
    if len(body) > MAX_FRAME_BYTES:
        raise ProtocolError(f"message of {len(body)} bytes exceeds the {MAX_FRAME_BYTES}-byte limit")
    payloads = []
    offset, end = 0, len(body)
    while offset < end:
        if end - offset < _LENGTH.size:
            raise ProtocolError("malformed batch: a length cut short")
        (length,) = _LENGTH.unpack_from(body, offset)
        offset += _LENGTH.size
        if length > end - offset:
            raise ProtocolError("malformed batch: an event longer than what is left of it")
        payloads.append(body[offset:offset + length])
        offset += length
    if not payloads:
        raise ProtocolError("malformed batch: no event")
    return payloads


def decode_frames(frames: list[bytes], secret: bytes | None = None,
                  session_start_ns: int | None = None) -> list[tuple[AnyEvent | UnknownEventType, bytes]]:
    """Every event in a multipart message, in order, each with its payload (kept to be written to
    a trace as is). An event of a type this version does not know comes as its
    :class:`UnknownEventType` (a reader skips it, keeping its place in the sender's sequence).
    The message is refused as a whole — :func:`open_frames`'s errors, or :class:`ProtocolError`
    for any event that does not decode — so that nothing of a message that is not right is read.
    """
    events: list[tuple[AnyEvent | UnknownEventType, bytes]] = []
    for payload in open_frames(frames, secret, session_start_ns):
        try:
            events.append((decode(payload), payload))
        except UnknownEventType as unknown:
            events.append((unknown, payload))
    return events


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
