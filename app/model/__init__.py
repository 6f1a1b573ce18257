"""The pure view model: an append-only event log and the view state at any cursor.

Live, step-through and replay all feed an :class:`EventLog`; the screen shows
``view_at(log, cursor)``. Nothing here imports Textual, so it is tested without a terminal.
"""

from .bench import BenchSeries, BenchView, bench_at
from .cost import CallCost, RankCost, costs_at
from .log import EXIT_INTERRUPTED, EventLog, MemorySeries, PhaseIndex, RankIndex, Series
from .navigation import (
    SPEEDS,
    faster,
    exchange_steps,
    first_collective,
    next_exchange,
    next_boundary,
    previous_boundary,
    seek_call,
    seek_step,
    call_range,
    slower,
    step_pieces,
    ViewAhead,
    paused_collector,
)
from .pieces import first_pieces
from .sources import load_trace, pump_session
from .view import TAIL_LENGTH, Labels, MemoryTrack, RankView, RunState, ViewState, step_at, view_at

__all__ = [
    "Labels",
    "BenchSeries",
    "BenchView",
    "bench_at",
    "CallCost",
    "RankCost",
    "costs_at",
    "EventLog",
    "EXIT_INTERRUPTED",
    "Series",
    "MemorySeries",
    "RankIndex",
    "PhaseIndex",
    "MemoryTrack",
    "RankView",
    "RunState",
    "ViewState",
    "TAIL_LENGTH",
    "view_at",
    "step_at",
    "next_boundary",
    "exchange_steps",
    "first_collective",
    "next_exchange",
    "first_pieces",
    "step_pieces",
    "previous_boundary",
    "seek_step",
    "seek_call",
    "call_range",
    "load_trace",
    "pump_session",
    "SPEEDS",
    "faster",
    "slower",
    "ViewAhead",
    "paused_collector",
]
