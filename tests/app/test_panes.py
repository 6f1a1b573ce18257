"""Each pane is handed only the fields it draws (``app/model/panes.py``), never the whole view
state, and the fields say what the pane needs of the moment shown."""

from __future__ import annotations

import inspect

import pytest

import collviz.app.widgets as widgets
from collviz.app.model import EventLog, view_at
from collviz.app.model.panes import CostFields, MemoryFields, TransferFields
from collviz.runtime.wire.protocol import IMPORT_RUN_PREFIX, LAUNCHER_RANK, NOT_RECORDED_OPTION, Collective, RunStart, Transfer

from support.synthetic import all_gather_events


def test_no_pane_is_handed_the_whole_view_state():
    shown = {name: inspect.signature(getattr(widgets, name).show).parameters for name in widgets.__all__
             if hasattr(getattr(widgets, name), "show")}
    assert len(shown) >= 12  # every pane that draws the run, the header to the event log
    handed = {name: [str(p.annotation) for p in parameters.values() if p.name != "self"]
              for name, parameters in shown.items()}
    assert not [name for name, annotations in handed.items() if any("ViewState" in a for a in annotations)], handed


def test_the_cost_pane_gets_each_rank_s_call_in_the_step_it_shows():
    """Rank 0 is inside the step's all-gather, ranks 1–3 have not begun it: the pane says who."""
    events = all_gather_events(4)
    begin = next(i for i, e in enumerate(events) if isinstance(e, Collective) and e.rank == 0 and e.edge == "begin")
    fields = CostFields.of(view_at(EventLog(events), begin + 1))
    assert [rank for rank, _ in fields.latest_calls] == [0, 1, 2, 3]
    assert fields.latest_calls[0][1] == events[begin] and [call for _, call in fields.latest_calls[1:]] == [None] * 3
    assert fields.costs == () and fields.untimed == ""


def test_the_transfers_pane_gets_the_step_s_transfers_and_the_call_they_belong_to():
    """Each of the 4 ranks receives the 3 others' shards in the all-gather: 12 transfers."""
    events = all_gather_events(4)
    log = EventLog(events)
    assert TransferFields.of(view_at(log, 0)).call is None
    last = max(i for i, e in enumerate(events) if isinstance(e, Transfer))
    fields = TransferFields.of(view_at(log, last + 1))
    assert fields.count == len(fields.transfers) == 4 * 3 and fields.not_recorded == ""
    assert fields.call is not None and fields.call.op == "all_gather" and fields.call.edge == "end"


def _start(run: str, options: dict[str, str | int | float | bool]) -> RunStart:
    return RunStart(run=run, rank=LAUNCHER_RANK, seq=0, t_ns=0, scenario="s", world_size=4, backend="gloo",
                    device_kind="cpu", backend_reason="", mode="live", options=options)


@pytest.mark.parametrize("run, options, said", [
    ("r1", {}, "no memory samples yet"),
    ("r1", {"script": "train.py"}, "no memory samples yet: collviz.watch(model, optimizer) adds them at each step's end"),
    (f"{IMPORT_RUN_PREFIX}fr", {NOT_RECORDED_OPTION: "Flight Recorder dumps"},
     "memory not recorded: the imported artifact holds none"),
    ("attached", {NOT_RECORDED_OPTION: "a running job"}, "memory not recorded: the attached job's Flight Recorder holds none"),
])
def test_the_memory_pane_says_why_a_run_has_no_samples(run, options, said):
    fields = MemoryFields.of(view_at(EventLog([_start(run, options)]), 1))
    assert fields.no_samples == said
    assert len(fields.tracks) == 4 and not any(track.length for track in fields.tracks) and fields.devices == ("",) * 4
