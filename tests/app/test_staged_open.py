"""An indexed trace shown before it is read whole: its first frame from the first step's parts,
the rest read afterwards, every record checked before it is shown, and a trace that fails a check
read again by the careful reader, said in the header."""

from __future__ import annotations

from pathlib import Path

import pytest

from collviz.app.app import make_app
from collviz.app.model import trace_index, view_at
from collviz.app.model.navigation import first_collective
from collviz.app.model.sources import load_trace, open_trace_file
from collviz.runtime.wire.protocol import Memory, Phase, encode
from collviz.runtime.wire.scan import NotIntact
from collviz.runtime.wire.stored import StoredEvents

from support.app import SIZE, until
from support.synthetic import SHARD, all_gather_events, write_trace

WORLD = 4


@pytest.fixture
def small_parts(monkeypatch):
    """Parts of 4 events, so that a small trace has parts after its first step."""
    monkeypatch.setattr(trace_index, "INDEX_PART", 4)


def _step_end(events: list, phase: int) -> int:
    """The cursor just after the last rank ended ``phase``."""
    return max(at for at, event in enumerate(events) if isinstance(event, Phase) and event.index == phase
               and event.edge == "end") + 1


def _damage(path: Path, events: list, at: int) -> None:
    """Flip a bit in the last byte of event ``at``'s record (its payload: same size, its CRC-32 no longer holds)."""
    header = path.stat().st_size - sum(len(encode(event)) + 8 for event in events)
    end = header + sum(len(encode(event)) + 8 for event in events[: at + 1])
    data = bytearray(path.read_bytes())
    data[end - 1] ^= 0x01
    path.write_bytes(bytes(data))


def test_a_trace_opens_at_its_first_exchange_from_the_parts_before_it_and_files_the_rest_after(tmp_path, small_parts):
    events = all_gather_events(world=WORLD)
    path = write_trace(tmp_path / "t.cvz", events)
    log, rest, warning = open_trace_file(path, lambda *_: None)
    assert rest is not None and warning == ""
    ends = _step_end(events, 1)  # the all-gather's step: where the viewer opens
    assert log.filed == -(-ends // 4) * 4 < len(events) == len(log)  # whole parts of 4, the last run ends after
    assert first_collective(log) == ends
    view = view_at(log, ends)
    # every rank holds every shard: rank r's values r*10 .. r*10 + SHARD - 1, as the runtime gathered them
    gathered = [float(r * 10 + i) for r in range(WORLD) for i in range(SHARD)]
    outputs = [[buffer for buffer in rank.buffers if buffer.name == "output"] for rank in view.ranks]
    assert [[list(buffer.values) for buffer in found] for found in outputs] == [[gathered]] * WORLD
    for part in rest.parts():
        trace_index.file_part(log, part)
    assert rest.finish() == "" and log.filed == len(log)


def test_a_record_damaged_past_the_first_step_is_found_before_it_is_shown(tmp_path, small_parts):
    events = all_gather_events(world=WORLD)
    damaged = max(at for at, event in enumerate(events) if isinstance(event, Memory))  # rank 3's sample in phase 2
    assert damaged >= _step_end(events, 1) + 4  # in a part after those of the first frame
    path = write_trace(tmp_path / "t.cvz", events)
    _damage(path, events, damaged)
    log, rest, _ = open_trace_file(path, lambda *_: None)
    assert rest is not None and log.filed == -(-_step_end(events, 1) // 4) * 4  # the first frame, as if intact
    with pytest.raises(NotIntact, match="does not match its checksum"):
        for part in rest.parts():
            trace_index.file_part(log, part)
    assert log.filed <= damaged // 4 * 4  # never filed: nothing of its part is shown
    assert all(damaged not in rank.memory.index for rank in log.ranks.values())
    careful, warning = load_trace(path, lambda *_: None)  # what the viewer then shows
    assert isinstance(careful.events, list) and len(careful) == len(events) - 1
    assert "skipped 1 damaged stretch" in warning


def test_an_index_that_disagrees_with_its_trace_is_not_used(tmp_path, small_parts):
    events = all_gather_events(world=WORLD)
    path = write_trace(tmp_path / "t.cvz", events)
    index = (tmp_path / "t.cvz.index").read_bytes()
    last = max(at for at, event in enumerate(events) if isinstance(event, Memory))
    assert events[last].live_bytes == 0
    other = [*events[:last], Memory(**{**{f: getattr(events[last], f) for f in events[last].__struct_fields__},
                                       "live_bytes": 1}), *events[last + 1 :]]
    write_trace(path, other)  # the same size, every record intact, one value differs
    assert len(encode(other[last])) == len(encode(events[last]))
    (tmp_path / "t.cvz.index").write_bytes(index)  # the first trace's index beside it
    log, warning = load_trace(path, lambda *_: None)
    assert isinstance(log.events, list)  # read by the careful reader, not from the index
    assert log.ranks[3].memory.live[-1] == 1 and warning == ""


async def test_the_viewer_says_in_its_header_that_a_damaged_trace_is_read_again_and_shows_the_careful_read(
        tmp_path, small_parts):
    events = all_gather_events(world=WORLD)
    damaged = max(at for at, event in enumerate(events) if isinstance(event, Memory))  # past the first frame's parts
    path = write_trace(tmp_path / "t.cvz", events)
    _damage(path, events, damaged)
    app = make_app(trace=path)
    async with app.run_test(size=SIZE) as pilot:
        # the careful reader's log: a list, and not the empty one the viewer starts with (a loaded machine
        # checked the predicate before the trace's first frame arrived: soak run at 0727851)
        await until(pilot, lambda: isinstance(app.event_log.events, list) and len(app.event_log) > 0)
        assert app.trace_problem == (f"{path} is not as its index says (a record does not match its checksum "
                                   f"(events {damaged // 4 * 4:,}–{damaged // 4 * 4 + 3:,})): read again whole")
        assert len(app.event_log) == len(events) - 1 and app.checked  # the careful reader read it whole
        assert app.trace_problem in app.labels().playback  # on one line of the header


async def test_the_viewer_shows_a_trace_read_after_its_first_frame_and_seeks_in_it(tmp_path, small_parts):
    events = all_gather_events(world=WORLD)
    path = write_trace(tmp_path / "t.cvz", events)
    app = make_app(trace=path)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.checked)
        assert isinstance(app.event_log.events, StoredEvents) and app.event_log.filed == len(events)
        assert app.cursor == _step_end(events, 1) and app.status_line == ""
        app.action_seek_to(3)
        await pilot.pause()
        assert app.current_view().step == 2
