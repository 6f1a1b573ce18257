"""Every event collviz workers and launchers emit, as typed structs, with encode and decode.

This module is the authority on the wire and trace format (DESIGN.md §4). Events are msgspec
structs tagged by class name; they travel as msgpack. Every event carries the run id, the rank
that emitted it (``LAUNCHER_RANK`` for the launching process), a per-emitter gap-free ``seq`` and
a monotonic ``t_ns``.

Versioning: ``PROTOCOL_VERSION`` is (major, minor). A minor bump only adds: fields with defaults,
which older readers ignore, and event types, which older readers skip (:class:`UnknownEventType`
says which, so they can count them); or it renames a field, whose old name newer readers still
decode into the new one (1.6: ``Transfer.step`` became ``hop``). A major bump changes meaning, and
readers refuse it by name.
Malformed input of any kind raises :class:`ProtocolError` (or one of its subclasses) and nothing else.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal, Union, get_args

import msgspec

__all__ = [
    "PROTOCOL_VERSION",
    "LAUNCHER_RANK",
    "NOTE_MARK",
    "UNTIMED_OPTION",
    "NOT_RECORDED_OPTION",
    "UNKNOWN_RANKS_OPTION",
    "STACKS_SCENARIO",
    "SIZES_NOT_READ",
    "IMPORT_RUN_PREFIX",
    "WIRE_HEADER",
    "ProtocolError",
    "IncompatibleVersion",
    "UnknownEventType",
    "Mismatch",
    "Event",
    "RunStart",
    "RankStart",
    "Phase",
    "Gate",
    "Go",
    "Collective",
    "CallRanks",
    "ProvenanceRun",
    "BufferSummary",
    "Buffer",
    "Transfer",
    "Freed",
    "Span",
    "CudaMemory",
    "NvmlMemory",
    "Memory",
    "Check",
    "RankEnd",
    "ProcessExit",
    "Stall",
    "Dropped",
    "RunEnd",
    "AnyEvent",
    "encode",
    "decode",
    "decode_known",
    "decode_bounded",
    "thin_event_type",
    "EVENT_TYPES",
    "MAX_LOADED_VALUES",
    "version_text",
]

PROTOCOL_VERSION: tuple[int, int] = (1, 7)
"""(major, minor) of the event protocol and the trace format. 1.1 added the Mismatch event,
checksummed trace records (a header field) and time-stamped signatures; 1.2 the Freed event,
Buffer.labels (names of a worked example's elements) and Collective.algo/hops/sent_bytes; 1.3
the Span event (a pipeline stage's forward or backward of one microbatch); 1.4 Collective.clock
(how a call's duration was measured: on the host or by CUDA events on the GPU); 1.5 messages
carrying several events (:data:`.frames.BATCH_MARK`); 1.6 ``Transfer.hop``, named ``step`` before
(a step is a viewer step; a reader before 1.6 reads a 1.6 transfer as of no hop); 1.7 the CallRanks
event (one call's ranks as columns, a live event: a trace holds its ranks' own events instead; a
reader before 1.7 skips it, by name)."""

NOTE_MARK = "Teacher's note: "
"""Introduces a teacher's note at the end of a Phase's narration (``--notes``, lessons)."""

UNTIMED_OPTION = "untimed"
"""A RunStart option saying why the run's collectives carry no duration (an imported artifact that
records none); without it, untimed calls are those collviz's observer saw issued asynchronously,
and their time is their phase's."""

STACKS_SCENARIO = "attach-pid"
"""The RunStart scenario of a job read from its ranks' stacks (``collviz attach --pid``): a call's
``group`` is its own words (``all_reduce at job.py:14 in main``: a stack holds no group) and its
``group_seq`` counts the times ranks were seen entering it, no call number: the viewer words such
a call by its group alone."""

SIZES_NOT_READ = "not read"
"""A Collective's ``dtype`` where its sizes were not read (a stack holds none): its bytes, 0, are
not shown."""

NOT_RECORDED_OPTION = "not_recorded"
"""A RunStart option saying why the run holds no values, provenance or transfers (an imported
artifact, a user's script observed without copies): the viewer says so where they would be shown,
rather than showing none."""

UNKNOWN_RANKS_OPTION = "unknown_ranks"
"""A RunStart option naming the ranks of the world an imported run does not describe (a Flight
Recorder set with some dumps missing), as a JSON object of rank → why (``{"0": "no dump of this
rank"}``): the viewer says them unknown, never "not started"."""

IMPORT_RUN_PREFIX = "import-"
"""How the ``run`` id of an imported run (a user's artifacts opened as events) begins: it has no
mode of its own, and reports say it was imported instead."""

LAUNCHER_RANK = -1
"""The ``rank`` field of events emitted by the launching process rather than a worker."""

WIRE_HEADER = b"collviz/%d.%d" % PROTOCOL_VERSION
"""First frame of every ZeroMQ message of one event; the second frame is the msgpack payload
(a message of several events ends this header in :data:`.frames.BATCH_MARK`)."""

MAX_FRAME_BYTES = 16 * 1024 * 1024
"""Payloads larger than this are refused as malformed (a worker never sends one this big)."""


class ProtocolError(ValueError):
    """Malformed, foreign or incompatible input: the one error decoding ever raises."""


class IncompatibleVersion(ProtocolError):
    """A message from a peer speaking another major protocol version."""


class UnknownEventType(ProtocolError):
    """A well-formed event of a type this collviz does not know: a newer minor version added it.

    ``type_name`` is its tag; ``rank`` and ``seq`` place it in its emitter's sequence, so a
    collector can skip it without counting a gap.
    """

    def __init__(self, type_name: str, run: str, rank: int, seq: int) -> None:
        super().__init__(f"event type {type_name!r} is newer than this collviz ({version_text()})")
        self.type_name = type_name
        self.run = run
        self.rank = rank
        self.seq = seq


def version_text(version: tuple[int, int] = PROTOCOL_VERSION) -> str:
    """``(1, 0)`` → ``"1.0"``."""
    return f"{version[0]}.{version[1]}"


class Event(msgspec.Struct, tag=True, kw_only=True, omit_defaults=True, gc=False):
    """Fields every event carries. Events are not tracked by the cyclic garbage collector
    (``gc=False``, inherited): an event holds only typed data (numbers, text, lists and structs of
    them), never a reference back to what holds it, so it can be in no cycle; the viewer's frames
    decode hundreds of them, which would otherwise each be scanned by the collections they set off."""

    run: str
    rank: int
    seq: int
    t_ns: int


class RunStart(Event):
    """The launcher's first event: what runs, where and how."""

    scenario: str
    world_size: int
    backend: str
    device_kind: Literal["cpu", "cuda"]
    backend_reason: str
    mode: Literal["live", "step"]
    options: dict[str, Union[str, int, float, bool]] = {}
    description: str = ""
    example: str = ""
    torch_version: str = ""
    nccl_version: str = ""
    host: str = ""
    pid: int = 0
    phase_count: int = 0


class RankStart(Event):
    """A worker is up and its process group is initialised."""

    device: str
    backend: str
    host: str
    pid: int


class Phase(Event):
    """A named step of the scenario begins or ends; ``index`` counts from 0 for every rank.

    ``key`` is the scenario's narration key of the phase (``setup``, ``collective``, …): where a
    teacher's notes and a lesson's notes attach.
    """

    index: int
    name: str
    edge: Literal["begin", "end"]
    narration: str = ""
    key: str = ""


class Gate(Event):
    """A worker waits at (``edge="wait"``) or is released from (``"pass"``) the gate before a phase."""

    index: int
    edge: Literal["wait", "pass"]


class Go(Event):
    """The launcher released every rank waiting at gates up to and including ``index``."""

    index: int


class Collective(Event):
    """One real torch.distributed collective call, as seen from one rank.

    ``group_seq`` numbers the collectives issued on ``group`` by this rank (1, 2, …), which is how
    calls are matched across ranks. One numbering from #1 everywhere: collviz's own scenarios
    numbered from 0 until 2026-11-28 (same protocol, same meaning: an order), so a trace recorded
    before shows its calls from #0, read unchanged. ``count`` is the element count of this rank's input.
    ``algo_bytes`` is S of the nccl-tests bandwidth formulas (see ``runtime.metrics``). A call
    run hop by hop (``collviz bench --algo``) names its ``algo``, its ``hops`` and the bytes this
    rank sent (``sent_bytes``); the backend's own call leaves them empty. ``clock`` says how
    ``duration_ns`` was measured: ``host`` (issue to completion, seen by the calling thread),
    ``gpu`` (CUDA events around the call on the GPU: its own time, however the host overlapped
    it), or empty where no duration was observed.
    """

    phase: int
    edge: Literal["begin", "end"]
    op: str
    group: str
    group_ranks: list[int]
    group_seq: int
    dtype: str
    count: int
    bytes_in: int
    bytes_out: int
    algo_bytes: int
    iteration: int = 0
    root: Union[int, None] = None
    reduce_op: Union[str, None] = None
    duration_ns: Union[int, None] = None
    algo: str = ""
    hops: int = 0
    sent_bytes: int = 0
    clock: Literal["host", "gpu", ""] = ""


class CallRanks(Event):
    """One collective call on one group as many of its ranks issued or completed it since the
    event before of the same call: what each rank's ``Phase`` and ``Collective`` (begin and end)
    would say, once for all of them, the ranks' states and times as columns (protocol 1.7). A live
    job read through relays emits one per call and reading where it emitted four events per rank
    and call (40,960 a reading at 1,024 ranks): the call's fields are its ranks' own, which agree
    (ranks that disagree on a call's sizes get an event each), and differ only in state and time.

    Made by the session's feed (``rank`` is :data:`LAUNCHER_RANK`, ``seq`` 0: it is a live event,
    held in memory, never numbered among the launcher's events, sent or written as itself — a trace
    holds its :func:`~.call_ranks.per_rank_events`). ``phase`` is the call's step (``name``,
    ``narration``: the step's, as a ``Phase`` begin carries them); ``issued``: the ranks that issued
    the call, each at ``issued_ns[i]``, its Phase begin number ``issued_seq[i]`` of that rank's own
    sequence (its Collective begin the next); ``ended``: the ranks that completed it, each at
    ``ended_ns[i]`` after ``durations_ns[i]`` (None: not measured), its Collective end number
    ``ended_seq[i]`` (its Phase end the next). A rank may be in both lists (it issued and completed
    the call between two readings). :mod:`.call_ranks` reads it per rank.
    """

    phase: int
    name: str
    op: str
    group: str
    group_ranks: list[int]
    group_seq: int
    dtype: str
    count: int
    bytes_in: int
    bytes_out: int
    algo_bytes: int
    narration: str = ""
    root: Union[int, None] = None
    reduce_op: Union[str, None] = None
    issued: list[int] = []
    issued_ns: list[int] = []
    ended: list[int] = []
    ended_ns: list[int] = []
    durations_ns: list[Union[int, None]] = []
    issued_seq: list[int] = []
    ended_seq: list[int] = []


class ProvenanceRun(msgspec.Struct, array_like=True):
    """Elements ``[start, start + length)`` of a buffer hold data from exactly ``ranks``."""

    start: int
    length: int
    ranks: list[int]


class BufferSummary(msgspec.Struct, kw_only=True):
    """What a buffer too large to ship holds: statistics, a checksum and a coarse picture."""

    min: float
    max: float
    mean: float
    crc32: str
    picture: list[float]


class Buffer(Event):
    """The contents of one named tensor on one rank at one moment of a phase.

    ``values`` (row-major, flattened) are present for small tensors, ``summary`` for large ones.
    ``provenance`` lists, run by run, the ranks whose data each element holds, observed from what
    really arrived; an empty ``ranks`` list means the element holds no rank's data (a placeholder).
    ``None`` means provenance was not observed. ``labels``, when present, name the elements in order
    (a worked example's parameters A, B, C, D).
    """

    phase: int
    name: str
    role: str
    moment: Literal["before", "after", "result"]
    shape: list[int]
    dtype: str
    values: Union[list[Union[int, float]], None] = None
    summary: Union[BufferSummary, None] = None
    provenance: Union[list[ProvenanceRun], None] = None
    labels: Union[list[str], None] = None


class Transfer(Event):
    """Data that moved from ``src`` to ``dst`` (emitted by the receiving rank).

    ``kind="logical"`` is what a collective moved as seen from its inputs and outputs (the
    backend's own ring or tree inside the call is not observable); ``"p2p"`` is a real send/recv.
    ``hop``: the hop (one send/recv round) of a hop-by-hop algorithm the p2p transfer belongs to,
    from 1 (0: none).
    """

    phase: int
    src: int
    dst: int
    bytes: int
    buffer: str
    start: int
    length: int
    kind: Literal["logical", "p2p"]
    hop: int = 0
    legacy_step: int = msgspec.field(default=0, name="step")
    """``hop`` as traces and peers before 1.6 name it: decoding moves it into ``hop`` and leaves 0
    here, so no event in memory and none written carries it."""

    def __post_init__(self) -> None:
        """Adapt a transfer of protocol 1.5 or older (msgspec calls this after decoding too)."""
        if self.legacy_step:
            self.hop, self.legacy_step = self.legacy_step, 0


class Freed(Event):
    """This rank released the buffer it showed as ``name`` (its last Buffer event of that name),
    ``bytes`` of it, in phase ``phase``: from here on the view draws it as freed."""

    phase: int
    name: str
    bytes: int = 0


class Span(Event):
    """This rank computed ``kind`` (a pipeline stage's ``forward`` or ``backward``) of microbatch
    ``microbatch`` (from 0) in phase ``phase``: from ``t_ns - duration_ns`` to ``t_ns`` (the event is
    emitted as the work ends). The time between a rank's spans is idle: waiting for data, sending."""

    phase: int
    kind: Literal["forward", "backward"]
    microbatch: int
    duration_ns: int


class CudaMemory(msgspec.Struct, kw_only=True):
    """The CUDA caching allocator's figures for one device."""

    allocated: int
    reserved: int
    max_allocated: int


class NvmlMemory(msgspec.Struct, kw_only=True):
    """Device-wide figures from NVML (they include NCCL's buffers, which the allocator cannot see)."""

    used: int
    total: int
    utilization_pct: Union[int, None] = None


class Memory(Event):
    """Live tensor bytes on one rank at a labelled moment.

    ``source="tracker"``: exact live storage bytes from collviz's storage tracker (CPU, or any
    device). ``cuda``/``nvml`` are present only where those figures exist.
    """

    phase: int
    label: str
    live_bytes: int
    peak_bytes: int
    by_category: dict[str, int] = {}
    source: str = "tracker"
    cuda: Union[CudaMemory, None] = None
    nvml: Union[NvmlMemory, None] = None


class Check(Event):
    """A result the run verified on itself (e.g. "parameters identical on all ranks")."""

    phase: int
    name: str
    ok: bool
    detail: str = ""


class RankEnd(Event):
    """A worker's last event: it finished (``ok``) or raised (``error`` holds the text)."""

    status: Literal["ok", "error"]
    error: str = ""
    phase: Union[int, None] = None
    dropped: int = 0


class ProcessExit(Event):
    """The launcher reaped worker ``target``: its exit code, or the signal that killed it."""

    target: int
    exit_code: Union[int, None] = None
    signal: Union[str, None] = None


class Stall(Event):
    """The launcher saw a collective some ranks entered and others did not (a hang or desync).

    ``waiting``: the ranks inside collective ``group_seq`` of ``group``; ``elsewhere``: one
    sentence per missing rank ("rank 2 is in all_gather #1", "rank 2 never arrived …").
    """

    group: str
    group_seq: int
    op: str
    waiting: list[int]
    elsewhere: list[str]
    waited_s: float
    text: str


class Mismatch(Event):
    """Ranks called different collectives at the same place: ``group_seq`` of ``group`` (whose
    members are ``group_ranks``). ``calls`` maps each rank seen there to what it called (op,
    dtype, element count, root, reduce op); ``odd_ranks`` are those outside the largest party;
    ``text`` says it in one line. Emitted by the launcher as soon as two calls disagree."""

    group: str
    group_ranks: list[int]
    group_seq: int
    calls: dict[int, str]
    odd_ranks: list[int]
    text: str


class Dropped(Event):
    """The collector refused frames: ``reason`` → how many (hostile, foreign or malformed input)."""

    counts: dict[str, int]


class RunEnd(Event):
    """The launcher's last event."""

    status: Literal["ok", "failed", "interrupted"]
    detail: str = ""
    events: int = 0
    dropped: int = 0


AnyEvent = Union[
    RunStart,
    RankStart,
    Phase,
    Gate,
    Go,
    Collective,
    CallRanks,
    Buffer,
    Transfer,
    Freed,
    Span,
    Memory,
    Check,
    RankEnd,
    ProcessExit,
    Stall,
    Mismatch,
    Dropped,
    RunEnd,
]
"""Every concrete event type; what :func:`decode` returns."""

EVENT_TYPES: tuple[type[Event], ...] = get_args(AnyEvent)
"""The concrete event types, in :data:`AnyEvent`'s order (bulk readers number types by position here)."""

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(AnyEvent)


class _Envelope(msgspec.Struct):
    """What every event of any version has: its tag and the fields that place it."""

    type: str
    run: str
    rank: int
    seq: int


_envelope_decoder = msgspec.msgpack.Decoder(_Envelope)
_KNOWN_TYPES = frozenset(event_type.__name__ for event_type in EVENT_TYPES)


def encode(event: Event) -> bytes:
    """The msgpack payload of ``event``."""
    return _encoder.encode(event)


MAX_LOADED_VALUES = 65_536
"""The most values a reader loads for one Buffer (collviz ships at most 1,024 and summarises
larger tensors); longer lists, possible only in a foreign or damaged trace, are not decoded."""


def _field_entry(field: msgspec.structs.FieldInfo) -> tuple[str, Any] | tuple[str, Any, Any]:
    """``field`` as a :func:`msgspec.defstruct` entry: its name, its type and its default, if any,
    under the name it has in payloads (``Transfer.legacy_step`` is ``step`` there)."""
    if field.encode_name != field.name:
        return (field.name, field.type, msgspec.field(default=field.default, name=field.encode_name))
    if field.default is not msgspec.NODEFAULT:
        return (field.name, field.type, field.default)
    if field.default_factory is not msgspec.NODEFAULT:
        return (field.name, field.type, msgspec.field(default_factory=field.default_factory))
    return (field.name, field.type)


def thin_event_type(event_type: type[Event], fields: Iterable[str]) -> type[msgspec.Struct]:
    """A struct that decodes ``event_type``'s payloads into its ``rank``, ``seq`` and ``fields``
    only, each validated as the event's own field is; the other fields are skipped, not built.

    For readers that index millions of events and decode the few they show in full later (a
    64-rank Buffer costs 20 µs in full, its name and phase a tenth of that). It carries the
    event's tag, so it sits in a union with other event types; it never joins reference cycles
    (scalars and strings), so the cyclic collector does not track it.
    """
    wanted = {"rank", "seq", *fields}
    own = msgspec.structs.fields(event_type)
    missing = wanted - {field.name for field in own}
    if missing:
        raise ValueError(f"{event_type.__name__} has no field {', '.join(sorted(missing))}")
    name = event_type.__name__
    return msgspec.defstruct(name, [_field_entry(field) for field in own if field.name in wanted],
                             tag=name, kw_only=True, gc=False)


_BufferShell = msgspec.defstruct(
    "Buffer",
    [(f.name, msgspec.Raw, msgspec.Raw()) if f.name == "values" else _field_entry(f)
     for f in msgspec.structs.fields(Buffer)],
    tag="Buffer", kw_only=True,
)
"""Buffer's own fields, its values left encoded (an array, nil, or empty when absent): see
:func:`decode_bounded`."""

_shell_decoder: msgspec.msgpack.Decoder[Any] = msgspec.msgpack.Decoder(_BufferShell)
"""Decodes a :data:`_BufferShell`, a struct made at run time whose fields no type checker sees."""
_values_decoder = msgspec.msgpack.Decoder(list[Union[int, float]])


def _array_length(raw: bytes) -> int:
    """The element count a msgpack array announces in its header (0 for anything else)."""
    first = raw[0] if raw else 0
    if 0x90 <= first <= 0x9F:
        return first & 0x0F
    if first == 0xDC and len(raw) >= 3:
        return int.from_bytes(raw[1:3], "big")
    if first == 0xDD and len(raw) >= 5:
        return int.from_bytes(raw[1:5], "big")
    return 0


def decode_bounded(payload: bytes) -> tuple[AnyEvent, int]:
    """Like :func:`decode`, but a Buffer's values are loaded only up to :data:`MAX_LOADED_VALUES`:
    (the event, how many values were left out — its ``values`` are then None)."""
    try:
        shell = _shell_decoder.decode(payload)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return decode(payload), 0
    raw = bytes(shell.values)
    count = _array_length(raw)
    values = None
    if raw not in (b"", b"\xc0") and count <= MAX_LOADED_VALUES:
        try:
            values = _values_decoder.decode(shell.values)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise ProtocolError(f"malformed event: {exc}") from None
    fields = {f: getattr(shell, f) for f in shell.__struct_fields__ if f != "values"}
    return Buffer(**fields, values=values), count if values is None else 0


decode_known = _decoder.decode
"""Decode a payload known to be within the frame limit, raising msgspec's own errors: the fast
path of bulk readers, which fall back to :func:`decode` to classify what it refuses."""


def decode(payload: bytes) -> AnyEvent:
    """One event from its msgpack payload; :class:`ProtocolError` if it is not one."""
    if len(payload) > MAX_FRAME_BYTES:
        raise ProtocolError(f"event of {len(payload)} bytes exceeds the {MAX_FRAME_BYTES}-byte limit")
    try:
        return _decoder.decode(payload)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        _raise_if_unknown_type(payload)
        raise ProtocolError(f"malformed event: {exc}") from None
    except Exception as exc:  # msgspec can surface odd inputs as other errors; keep one type
        raise ProtocolError(f"malformed event: {exc!r}") from None


def _raise_if_unknown_type(payload: bytes) -> None:
    """Raise :class:`UnknownEventType` if ``payload`` is a well-enveloped event of an unknown type."""
    try:
        envelope = _envelope_decoder.decode(payload)
    except Exception:  # not even an envelope: plainly malformed, which the caller reports
        return
    if envelope.type not in _KNOWN_TYPES:
        raise UnknownEventType(envelope.type, envelope.run, envelope.rank, envelope.seq)
