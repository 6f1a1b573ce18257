"""Flight Recorder dumps that say a call failed or timed out, list their entries out of order, or
refer to one entry millions of times (:mod:`collviz.runtime.sources.fr_columns`). The dumps are
written by hand (:mod:`support.fr_dumps`: every call they hold is in each test's docstring) and
every expected value below is worked out from them by hand."""

from __future__ import annotations

import json
import pickle

from collviz.app.model import EventLog, view_at
from collviz.runtime.reports.summary_json import summary_document
from collviz.runtime.sources import open_artifacts
from collviz.runtime.wire.protocol import RunEnd, Stall

from support.fr_dumps import T0, dump, entry, hang_and_mismatch

GROUP = "0 (default_pg)"
NOT_A_HANG = (f"all_reduce #3 on group {GROUP}: every other rank completed it, but rank 2 had not yet recorded it "
              "completed: not a hang")


def _write(folder, entries_of) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for rank in range(4):
        (folder / f"rank_{rank}.json").write_text(json.dumps(dump(entries_of(rank))))


def _end(run) -> RunEnd:
    return next(e for e in run.events if isinstance(e, RunEnd))


def test_a_call_a_dump_marks_failed_fails_the_reading_first_everywhere(tmp_path):
    """4 ranks all-reduce #1–#4 (2 ms each); rank 2's dump marks its #3 'failed', the others completed
    it: no hang, no mismatch, yet the job failed there."""
    _write(tmp_path, lambda rank: [entry(3, done=False, state="failed") if rank == 2 and seq == 3 else
                                   entry(seq, duration_ms=2.0) for seq in range(1, 5)])
    run = open_artifacts([tmp_path])
    said = f"rank 2's all_reduce #3 on group {GROUP}: its dump marks it 'failed'"
    assert run.exit_status == 1 and run.warnings == []
    assert (_end(run).status, _end(run).detail) == ("failed", said)
    assert summary_document(run.events)["outcome"]["detail"] == said
    assert view_at(EventLog(run.events), len(run.events)).state.text == f"failed: {said}"


def test_a_call_past_its_timeout_is_timed_out_and_named_before_the_hang(tmp_path):
    """Ranks 0, 1, 3 call #1–#3 (1 ms each, #n issued at T0 + n ms): the dumps' last time is #3's
    end, T0 + 4 ms. Rank 2 issues its #3 at T0 + 2.5 ms with timeout_ms 1 and never completes it:
    its deadline, T0 + 3.5 ms, is before T0 + 4 ms, so it timed out, 1.5 ms after it was issued."""
    def entries(rank: int) -> list:
        calls = [entry(seq, duration_ms=1.0) for seq in (1, 2)]
        if rank == 2:
            return calls + [entry(3, done=False, timeout_ms=1, time_created_ns=T0 + 2_500_000)]
        return calls + [entry(3, duration_ms=1.0)]
    _write(tmp_path, entries)
    run = open_artifacts([tmp_path])
    assert run.exit_status == 1
    assert _end(run).detail.startswith(f"rank 2's all_reduce #3 on group {GROUP}: still not completed 1.5 ms after it "
                                       "was issued, past its timeout_ms: timed out")
    assert not [e for e in run.events if isinstance(e, Stall)]  # every other rank completed #3: no hang
    assert run.warnings == [NOT_A_HANG]


def test_a_call_still_within_its_timeout_is_no_failure(tmp_path):
    """As above with timeout_ms 600,000: rank 2's #3 is only still running (a warning says so)."""
    def entries(rank: int) -> list:
        calls = [entry(seq, duration_ms=1.0) for seq in (1, 2)]
        return calls + [entry(3, done=rank != 2, **({"duration_ms": 1.0} if rank != 2 else {}))]
    _write(tmp_path, entries)
    run = open_artifacts([tmp_path])
    assert run.exit_status == 0 and _end(run).detail == "" and run.warnings == [NOT_A_HANG]


def test_entries_listed_in_reverse_are_read_in_record_id_order(tmp_path):
    """:func:`hang_and_mismatch`'s set with every dump's entries reversed: the same mismatch at #3
    and the same hang at #6 (ranks 0, 1, 3 waiting, rank 2 never arrived), exit 1 as in order."""
    hang_and_mismatch(tmp_path / "in_order")
    (tmp_path / "reversed").mkdir()
    for path in (tmp_path / "in_order").iterdir():
        content = json.loads(path.read_text())
        content["entries"].reverse()
        (tmp_path / "reversed" / path.name).write_text(json.dumps(content))
    ordered, reversed_ = open_artifacts([tmp_path / "in_order"]), open_artifacts([tmp_path / "reversed"])
    assert reversed_.exit_status == ordered.exit_status == 1
    [stall] = [e for e in reversed_.events if isinstance(e, Stall)]
    assert (stall.group_seq, stall.waiting) == (6, [0, 1, 3])
    assert _end(reversed_).detail == _end(ordered).detail
    said = "its entries are not listed in the order of their record_id: read in that order"
    assert [w for w in reversed_.warnings if said in w] == [f"rank {r}: {said}" for r in range(4)]


def test_a_pickle_of_many_references_to_one_entry_reads_it_once(tmp_path):
    """A pickle whose entries are 100,000 references to one entry (the benchmark has 5 million):
    one call, and the references said."""
    (tmp_path / "nccl_trace_rank_0").write_bytes(pickle.dumps(dump([entry(1, duration_ms=1.0)] * 100_000, ranks=1)))
    run = open_artifacts([tmp_path])
    assert run.exit_status == 0
    assert ("rank 0: 99,999 entries are further references to an entry already read (one object, referred to again "
            "in the pickle): each read once") in run.warnings
    assert sum(1 for e in run.events if type(e).__name__ == "Collective" and e.edge == "end") == 1


def test_a_pg_config_naming_many_ranks_costs_by_the_ranks_present(tmp_path):
    """Two ranks' dumps of 3 calls whose pg_config names 100,000 ranks (the benchmark has 10⁶): the
    job is said to have 100,000 ranks, 99,998 of them unknown, and export gives a process to the two
    ranks present only (it wrote four events per rank named, 4 million for 10⁶)."""
    from collviz.runtime.reports.export import perfetto_trace

    for rank in range(2):
        (tmp_path / f"rank_{rank}.json").write_text(
            json.dumps(dump([entry(seq, duration_ms=1.0) for seq in (1, 2, 3)], ranks=100_000)))
    run = open_artifacts([tmp_path])
    assert run.warnings == ["no dump of ranks 2–99999 (the dumps name 100000 ranks): what they did is unknown"]
    names = [e for e in perfetto_trace(run.events)["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"]
    # the entries are nccl's (support.fr_dumps): the device its backend implies, as the header says
    assert [e["args"]["name"] for e in names] == ["rank 0 (cuda)", "rank 1 (cuda)", "launcher"]


def test_entries_without_record_ids_listed_in_reverse_are_read_in_time_order(tmp_path):
    """As above, each entry's record_id removed (a dump older than the field): the times order them."""
    hang_and_mismatch(tmp_path / "in_order")
    (tmp_path / "reversed").mkdir()
    for path in (tmp_path / "in_order").iterdir():
        content = json.loads(path.read_text())
        content["entries"] = [{k: v for k, v in e.items() if k != "record_id"} for e in reversed(content["entries"])]
        (tmp_path / "reversed" / path.name).write_text(json.dumps(content))
    run = open_artifacts([tmp_path / "reversed"])
    assert run.exit_status == 1
    assert _end(run).detail == _end(open_artifacts([tmp_path / "in_order"])).detail
    said = "its entries are not listed in the order of their time_created_ns: read in that order"
    assert [w for w in run.warnings if said in w] == [f"rank {r}: {said}" for r in range(4)]
