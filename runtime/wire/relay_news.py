"""What a per-host relay (``collviz attach --relay``) tells the viewer, and how it is framed.

A relay reads its node's ranks' Flight Recorders and sends, once per reading, one
:class:`RelayNews`: every rank it reads (or why it could not), and for each recorder only the
entries that are new or changed since it last sent that rank's (an entry's raw JSON, exactly as
the rank's worker server answered it), with the recorder's header (version, ``pg_config``,
``pg_status``) only when it changed. A viewer asks the relays for the stacks of the ranks others
wait on with a :class:`StackRequest`; the relay that reads them answers with ``stacks`` (each
rank's own line of code, as the attach reader finds it).

Both travel as msgpack in ZeroMQ frames signed with the job's shared secret, as a listening
viewer's events are (:func:`.frames.signed_message`), under their own header
(:data:`RELAY_HEADER`, :data:`REQUEST_HEADER`): neither is a collviz event, and a relay pointed
at ``collviz view --listen`` is refused there as not an event.
"""

from __future__ import annotations

import msgspec

from .frames import signed_message, verified_frames
from .protocol import ProtocolError

__all__ = ["RELAY_HEADER", "REQUEST_HEADER", "RecorderNews", "RankNews", "RelayNews", "StackRequest",
           "news_frames", "news_of", "request_frames", "request_of"]

RELAY_HEADER = b"collviz-relay/1"
"""The header of a relay's news (version 1)."""

REQUEST_HEADER = b"collviz-relay-request/1"
"""The header of a viewer's request to the relays (version 1)."""


class RecorderNews(msgspec.Struct, kw_only=True):
    """One recorder of one rank (``recorder``: its index in the reader's recorder handlers): its
    header's JSON when it changed (empty: unchanged), and each entry new or changed since the
    relay last sent this recorder's, as raw JSON."""

    recorder: int
    header: bytes = b""
    entries: list[bytes] = []


class RankNews(msgspec.Struct, kw_only=True):
    """One rank as the relay read it: why not (``error``; ``slow`` when past the deadline), or
    its recorders that changed."""

    rank: int
    error: str = ""
    slow: bool = False
    recorders: list[RecorderNews] = []


class RelayNews(msgspec.Struct, kw_only=True):
    """One reading of one relay: who sends (``relay``: host and process), the host its ranks run
    on, the number of readings it made before, how often it reads (``every_s``), each of its
    ranks; or, answering a viewer's request, rank → the line of its own code its stack is at."""

    relay: str
    host: str
    number: int
    every_s: float
    ranks: list[RankNews] = []
    stacks: dict[int, str] = {}


class StackRequest(msgspec.Struct, kw_only=True):
    """A viewer's request: the stacks of ``ranks`` (each relay answers for the ranks it reads)."""

    ranks: list[int]


_ENCODER = msgspec.msgpack.Encoder()
_NEWS = msgspec.msgpack.Decoder(RelayNews)
_REQUEST = msgspec.msgpack.Decoder(StackRequest)


def news_frames(news: RelayNews, secret: bytes | None) -> list[bytes]:
    """The signed ZeroMQ message carrying ``news``."""
    return signed_message(RELAY_HEADER, _ENCODER.encode(news), secret)


def request_frames(request: StackRequest, secret: bytes | None) -> list[bytes]:
    """The signed ZeroMQ message carrying ``request``."""
    return signed_message(REQUEST_HEADER, _ENCODER.encode(request), secret)


def _body(frames: list[bytes], header: bytes, secret: bytes | None, session_start_ns: int | None) -> bytes:
    found, body = verified_frames(frames, secret, session_start_ns)
    if found != header:
        raise ProtocolError(f"not a relay's message (its header is {found[:40]!r}, not {header.decode()})")
    return body


def news_of(frames: list[bytes], secret: bytes | None, session_start_ns: int | None = None) -> RelayNews:
    """The news a message carries, its signature checked (:func:`.frames.verified_frames`'s
    errors), or :class:`~.protocol.ProtocolError` for anything else."""
    try:
        return _NEWS.decode(_body(frames, RELAY_HEADER, secret, session_start_ns))
    except msgspec.DecodeError as exc:
        raise ProtocolError(f"malformed relay news: {exc}") from None


def request_of(frames: list[bytes], secret: bytes | None, session_start_ns: int | None = None) -> StackRequest:
    """The request a message carries, its signature checked, or :class:`~.protocol.ProtocolError`."""
    try:
        return _REQUEST.decode(_body(frames, REQUEST_HEADER, secret, session_start_ns))
    except msgspec.DecodeError as exc:
        raise ProtocolError(f"malformed stack request: {exc}") from None
