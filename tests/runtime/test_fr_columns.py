"""Flight Recorder dumps read as columns, and an import too large for events read as a table.

The dumps are written by hand (:mod:`support.fr_dumps`), so every value asserted here is counted
from the entries the test wrote, not from what the reader makes of them.
"""

from __future__ import annotations

import json
import pickle

import pytest

from collviz.app.cli import main
from collviz.app.model import EventLog, view_at
from collviz.runtime.errors import UsageError
from collviz.runtime.reports.summary import render_summary
from collviz.runtime.reports.summary_json import summary_document
from collviz.runtime.sources import flight_recorder, open_artifacts
from collviz.runtime.sources.flight_recorder import read_content
from collviz.runtime.wire.protocol import Collective, Mismatch, Phase, RunEnd, Stall

from support.fr_dumps import T0, dump, entry, hang_and_mismatch

GROUP = "0 (default_pg)"
MISMATCH = ("collective mismatch at call #3 on group 0 (default_pg): rank 3 called broadcast(float32 ×8), "
            "where ranks 0–2 called all_reduce(float32 ×8)")
STALL = ("all_reduce #6 on group 0 (default_pg): ranks 0, 1, 3 waiting; rank 2 never arrived "
         "(last seen in phase 4 'all_reduce #5 on group 0 (default_pg)')")


def test_a_dump_becomes_one_row_per_call_with_its_own_numbers():
    """Eight entries: a call of 2×4 elements timed 1.5 ms; an all_gather of 8 → 32 bfloat16 still
    running; a send; a coalesced call of 4 + 6 elements and its closing entry; a broadcast reusing
    call number 1; two damaged entries (no group; a negative dimension); a last call #6."""
    read = read_content(dump([
        entry(1, sizes=[[2, 4]], duration_ms=1.5),
        entry(2, "all_gather", sizes=[[8]], out=[[32]], dtype="BFloat16", done=False),
        entry(2, "send", profiling_name="nccl:send 0->1", is_p2p=True),
        entry(3, sizes=[[4]]), entry(3, sizes=[[6]]), entry(3, "coalesced", sizes=[]),
        entry(1, "broadcast"),
        entry(4, process_group=None),
        entry(5, sizes=[[-1]]),
        entry(6),
    ]))
    assert read.seq.tolist() == [1, 2, 3, 6]
    assert [read.ops[op] for op in read.op] == ["all_reduce", "all_gather", "all_reduce", "all_reduce"]
    assert [read.dtypes[d] for d in read.dtype] == ["float32", "bfloat16", "float32", "float32"]
    assert read.in_count.tolist() == [8, 8, 10, 8] and read.out_count.tolist() == [8, 32, 10, 8]
    assert read.completed.tolist() == [True, False, True, True]
    assert read.duration_ns.tolist() == [1_500_000, -1, -1, -1]
    assert read.groups == [("0", "default_pg", "nccl")] and read.backends == {"nccl": 4}
    assert read.notes == [
        "2 entries left out as damaged (a field missing, malformed or impossible): process_group (1), input_sizes (1)",
        "1 point-to-point entries (send/recv) are not shown",
        "1 entries repeat a call number already seen on their group with another op: left out",
        "2 entries are further tensors of coalesced calls: each coalesced call is shown as one, its sizes summed",
        f"2 calls missing inside its dump's sequence on group {GROUP} (#4–#5): lost or damaged entries; what the "
        "rank did there is unknown",
    ]


@pytest.mark.parametrize(("field", "value"), [
    ("process_group", []), ("collective_seq_id", -1), ("profiling_name", 7), ("time_created_ns", "x"),
    ("time_created_ns", 2**63), ("input_sizes", [[1.5]]), ("input_sizes", [[True]]), ("output_sizes", [[10**30]]),
    ("input_dtypes", "Float"),
])
def test_one_bad_field_is_found_in_a_column_that_is_otherwise_whole(field, value):
    """The whole-column check fails, so the column is checked entry by entry: only entry #3 goes,
    named by its bad field."""
    read = read_content(dump([entry(1), entry(2), entry(3, **{field: value}), entry(4)]))
    assert read.seq.tolist() == [1, 2, 4]
    assert read.notes[0] == f"1 entries left out as damaged (a field missing, malformed or impossible): {field} (1)"


def test_an_entry_bad_in_two_fields_is_counted_once_by_its_first():
    read = read_content(dump([entry(1), "not an entry", entry(2, process_group=7, input_sizes=None), entry(3)]))
    assert read.seq.tolist() == [1, 3]
    assert read.notes == ["2 entries left out as damaged (a field missing, malformed or impossible): entry (1), "
                          "process_group (1)",
                          f"1 calls missing inside its dump's sequence on group {GROUP} (#2): lost or damaged "
                          "entries; what the rank did there is unknown"]


def test_a_whole_dump_has_no_notes():
    read = read_content(dump([entry(n) for n in range(1, 9)]))
    assert read.notes == [] and read.seq.tolist() == list(range(1, 9)) and read.in_count.tolist() == [8] * 8


def test_a_set_below_a_dumps_fields_is_damaged_input_and_one_at_them_is_refused(tmp_path):
    """The unpickler builds no class; a set (or bytes) where a field is read is that field damaged,
    one in the dump's own fields or entries refuses the file."""
    entries = [entry(1), entry(2, process_group={"0"})]
    (tmp_path / "nccl_trace_rank_0").write_bytes(pickle.dumps(dump(entries, ranks=1)))
    run = open_artifacts([tmp_path / "nccl_trace_rank_0"])
    assert ("rank 0: 1 entries left out as damaged (a field missing, malformed or impossible): process_group (1)"
            in run.warnings)
    (tmp_path / "nccl_trace_rank_1").write_bytes(pickle.dumps({**dump([]), "entries": [entry(1), {1, 2}]}))
    with pytest.raises(UsageError, match="refused pickle: it holds a set"):
        open_artifacts([tmp_path / "nccl_trace_rank_1"])


def _two_backends_job(folder):
    """A 4-rank job whose default group was made with "cpu:gloo,cuda:nccl": on every rank gloo's
    all_reduce #1–#3 of 4 float32 and NCCL's all_reduce #1–#2 of 8 float32, interleaved in time
    (gloo's #k at k ms, NCCL's #k at k ms + 0.5 ms), all completed; and a second communicator,
    group 1 of ranks 0 and 1, with NCCL's broadcast #1 of 16 float32 on those ranks."""
    folder.mkdir()
    for rank in range(4):
        entries = []
        for seq in (1, 2, 3):
            entries.append(entry(seq, sizes=[[4]], profiling_name="gloo:all_reduce"))
            if seq < 3:
                entries.append(entry(seq, sizes=[[8]], time_created_ns=T0 + seq * 1_000_000 + 500_000))
        if rank < 2:
            entries.append(entry(1, "broadcast", sizes=[[16]], group=("1", "tp"), time_created_ns=T0 + 4_000_000))
        content = dump(entries)
        content["pg_config"]["1"] = {"name": "1", "desc": "tp", "ranks": "[0, 1]"}
        (folder / f"rank_{rank}.json").write_text(json.dumps(content))
    return folder


def test_a_group_of_two_backends_numbers_each_backends_calls_on_its_own(tmp_path):
    run = open_artifacts([_two_backends_job(tmp_path / "job")])
    assert run.warnings == [] and run.exit_status == 0
    calls = sorted({(e.group, e.group_seq, e.op, e.bytes_in, tuple(e.group_ranks)) for e in run.events
                    if isinstance(e, Collective) and e.edge == "end"})
    world = (0, 1, 2, 3)
    assert calls == [("0 (default_pg) on gloo", 1, "all_reduce", 16, world),
                     ("0 (default_pg) on gloo", 2, "all_reduce", 16, world),
                     ("0 (default_pg) on gloo", 3, "all_reduce", 16, world),
                     ("0 (default_pg) on nccl", 1, "all_reduce", 32, world),
                     ("0 (default_pg) on nccl", 2, "all_reduce", 32, world),
                     ("1 (tp)", 1, "broadcast", 64, (0, 1))]
    assert sum(isinstance(e, Collective) and e.edge == "end" for e in run.events) == 4 * 5 + 2


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    return hang_and_mismatch(tmp_path_factory.mktemp("fr") / "job")


def test_the_hand_made_job_hangs_and_disagrees_where_it_was_written_to(job):
    run = open_artifacts([job])
    assert run.exit_status == 1 and run.summary is not None and run.summary.text() == render_summary(run.events)
    [stall] = [e for e in run.events if isinstance(e, Stall)]
    [mismatch] = [e for e in run.events if isinstance(e, Mismatch)]
    [end] = [e for e in run.events if isinstance(e, RunEnd)]
    assert stall.text == STALL and mismatch.text == MISMATCH
    # RunStart, 4 RankStarts; 5 calls × 4 events on each rank, 2 for each waiter's #6; Stall, Mismatch; no
    # RankEnd (every rank is a waiter, the one never arrived, or the odd one); RunEnd
    assert end.detail == MISMATCH and end.events == 1 + 4 + 5 * 4 * 4 + 3 * 2 + 2 + 1 == len(run.events)


def test_a_large_import_reads_as_the_small_one(job, monkeypatch):
    """Above the limit (here 8 calls: the job has 23) the summary comes from the table, word for
    word what the events give; the events are the last steps', and a warning says which."""
    small = open_artifacts([job])
    monkeypatch.setattr(flight_recorder, "EVENTS_UP_TO", 8)
    large = open_artifacts([job])
    assert large.summary is not None and large.exit_status == small.exit_status == 1
    text = large.summary.text()
    assert text == render_summary(small.events)
    assert f"hang: {STALL}\n{MISMATCH}\nresult: failed — {MISMATCH} · 94 events · 0 dropped" in text
    assert "phase 0  all_reduce #1 on group 0 (default_pg)  (2.0 ms, slowest rank)" in text
    assert large.summary.document() == summary_document(small.events)
    assert large.warnings == [*small.warnings, (
        "23 calls on 4 ranks, more than the 8 the viewer takes: it and export show the last 2 of 6 steps "
        f"(all_reduce #5 on group {GROUP} to all_reduce #6 on group {GROUP}), where the job stopped; "
        "the summary (--headless, --json) covers every call")]
    shown = sorted({(e.index, e.name) for e in large.events if isinstance(e, Phase)})
    assert shown == [(0, f"all_reduce #5 on group {GROUP}"), (1, f"all_reduce #6 on group {GROUP}")]
    ends = [e for e in large.events if isinstance(e, (Stall, Mismatch, RunEnd))]
    assert [type(e).__name__ for e in ends] == ["Stall", "Mismatch", "RunEnd"] and ends[-1].detail == MISMATCH
    views = [view_at(EventLog(run.events), len(run.events)) for run in (small, large)]
    assert [[(r.rank, r.status) for r in view.ranks] for view in views[1:]] == [[(r.rank, r.status) for r in views[0].ranks]]


def test_a_dump_set_written_as_json_and_as_pickle_reads_the_same(job, tmp_path):
    for path in sorted(job.iterdir()):
        rank = path.stem.split("_")[1]
        (tmp_path / f"nccl_trace_rank_{rank}").write_bytes(pickle.dumps(json.loads(path.read_text())))
    assert render_summary(open_artifacts([tmp_path]).events) == render_summary(open_artifacts([job]).events)


def test_replay_headless_and_json_print_a_large_imports_summary_from_its_table(job, monkeypatch, capsys):
    """``collviz replay DIR --headless`` (and ``--json``) above the limit print what they print below it."""
    printed = {}
    for limit in (flight_recorder.EVENTS_UP_TO, 8):
        monkeypatch.setattr(flight_recorder, "EVENTS_UP_TO", limit)
        for flag in ("--headless", "--json"):
            status = main(["replay", str(job), flag])
            printed[(limit, flag)] = (status, capsys.readouterr().out)
    assert printed[(8, "--headless")] == printed[(200_000, "--headless")]
    small, large = (json.loads(printed[(limit, "--json")][1]) for limit in (8, 200_000))
    # the one difference: above the limit, the warning the viewer's cut gives (said on stderr too)
    assert large.pop("warnings") == []
    # 5 calls on each of 4 ranks and 3 waiters' #6: 23; #6 (3 calls) and #5 (4) fit in 8, #4 would not
    assert small.pop("warnings") == [
        "23 calls on 4 ranks, more than the 8 the viewer takes: it and export show the last 2 of 6 steps "
        f"(all_reduce #5 on group {GROUP} to all_reduce #6 on group {GROUP}), where the job stopped; "
        "the summary (--headless, --json) covers every call"]
    assert (printed[(8, "--json")][0], small) == (printed[(200_000, "--json")][0], large)
    status, text = printed[(8, "--headless")]
    assert status == 1 and text.endswith(f"result: failed — {MISMATCH} · 94 events · 0 dropped\n")
    assert json.loads(printed[(8, "--json")][1])["hangs"] == [STALL]


def test_a_jobs_dumps_count_against_the_import_limit_as_their_columns(job, monkeypatch):
    """A job's dumps are read one by one into columns: together they may be larger than what one
    import holds (here 4 dumps of ~3 KB under a 4 KB limit); a profiler trace is held whole."""
    from collviz.runtime.sources import detect

    sizes = [path.stat().st_size for path in job.iterdir()]
    monkeypatch.setattr(detect, "MAX_TOTAL_BYTES", max(sizes) + 1000)
    assert sum(sizes) > detect.MAX_TOTAL_BYTES
    assert open_artifacts([job]).exit_status == 1
    monkeypatch.setattr(detect, "MAX_TOTAL_BYTES", max(sizes) - 1)
    with pytest.raises(UsageError, match="the artifacts hold more than"):
        open_artifacts([job])


async def test_the_viewer_opens_a_large_imports_last_steps(job, monkeypatch):
    """The viewer steps through the last steps it was given, the job's hang at the end, though the
    mismatch it was also told of lies in a step before them."""
    from collviz.app.app import make_app

    from support.app import until

    monkeypatch.setattr(flight_recorder, "EVENTS_UP_TO", 8)
    app = make_app(events=open_artifacts([job]).events)
    async with app.run_test(size=(160, 50)) as pilot:
        await until(pilot, lambda: app.loaded)
        await pilot.press("end")
        await pilot.pause()
        cost = " ".join(app.screen.query_one("#cost").render().plain.split())
    assert "all_reduce #6 has not ended on r0, r1, r3: no cost" in cost
