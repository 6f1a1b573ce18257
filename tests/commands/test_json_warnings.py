"""``--json``'s ``warnings``: every warning a command says on stderr (``collviz: warning: TEXT``) is
in its document's ``warnings`` list as ``TEXT``, in the same order; an empty list where none was
said. Each case is a command that warns, its expected warnings written out by hand from its input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from support.fr_dumps import dump, entry
from support.killed_job import KILLED_SCRIPT
from support.paths import FIXTURES

DEADLINE_S = 180
PREFIX = "collviz: warning: "


def _said(stderr: str) -> list[str]:
    """The warnings a command said on stderr, without their prefix."""
    return [line.removeprefix(PREFIX) for line in stderr.splitlines() if line.startswith(PREFIX)]


def _collviz(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "collviz", *args], capture_output=True, text=True, timeout=DEADLINE_S,
                          stdin=subprocess.DEVNULL, cwd=cwd, env={**os.environ, "OMP_NUM_THREADS": "1"})


def test_an_nccl_log_the_job_went_on_after_says_each_notice_in_both(tmp_path):
    """nccl-tests#311's real log (four SHARP notices, ranks 2, 4, 6, 0) with two all-reduces logged by
    each of its 8 processes after them (NCCL's per-call format; pid and comm pointer from each rank's
    own ``comm`` line): each notice is one "job went on" warning."""
    hung = FIXTURES / "nccl" / "collnet" / "nccl-tests-311-collnet-sharp-hang.log"
    processes = [("gpu34:23654:23684", "0x5aae1d0"), ("gpu34:23655:23685", "0x60005e0"),
                 ("gpu36:15433:15499", "0x6426550"), ("gpu36:15434:15500", "0x5464220"),
                 ("gpu40:2899:2929", "0x5289720"), ("gpu40:2900:2930", "0x617db00"),
                 ("gpu41:63046:63077", "0x55b2020"), ("gpu41:63047:63078", "0x6a02830")]
    calls = [f"{agent} [{rank % 2}] NCCL INFO AllReduce: opCount {n} sendbuff 0x7f0000000000 recvbuff 0x7f0000000000 "
             f"count 1048576 datatype 7 op 0 root 0 comm {comm} [nranks=8] stream 0x7f0000001000"
             for n in (0, 1) for rank, (agent, comm) in enumerate(processes)]
    log = tmp_path / "went-on.log"
    log.write_text(hung.read_text() + "\n".join(calls) + "\n")
    done = _collviz("replay", str(log), "--json")
    assert done.returncode == 0, done.stderr
    warnings = json.loads(done.stdout)["warnings"]
    assert warnings == _said(done.stderr)
    notice = "NCCL WARN SHARP int8,uint8,bfloat16 Datatypes not supported (sharp_plugin.c:382)"
    assert [w for w in warnings if w.startswith("job went on")] == [
        f"job went on: {notice} on rank {rank} ({host}): 2 calls logged after it by its process (SHARP cannot "
        "reduce those datatypes: NCCL reduces them without it)"
        for rank, host in ((2, "gpu36"), (4, "gpu40"), (6, "gpu41"), (0, "gpu34"))]


def test_a_cut_trace_says_so_in_both(tmp_path):
    """A trace cut inside its last record: the replay says where it was cut, once on stderr, once in
    the document."""
    whole = (FIXTURES / "all-reduce.cvz").read_bytes()
    cut = tmp_path / "cut.cvz"
    cut.write_bytes(whole[:-5])
    done = _collviz("replay", str(cut), "--headless", "--json")
    assert done.returncode == 0, done.stderr
    [warning] = json.loads(done.stdout)["warnings"]
    assert _said(done.stderr) == [warning] and "truncated after" in warning


def test_a_whole_trace_says_none():
    done = _collviz("replay", str(FIXTURES / "all-reduce.cvz"), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["warnings"] == [] and _said(done.stderr) == []


def test_a_run_whose_rank_was_killed_before_it_dumped_says_so_in_both(tmp_path):
    """4 gloo ranks; rank 3 is killed (SIGKILL: no dump) after all_reduce #1, the others fail in #2."""
    (tmp_path / "killed.py").write_text(KILLED_SCRIPT)
    done = _collviz("run", "--nproc", "4", "--headless", "--json", "killed.py", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["warnings"] == _said(done.stderr) == [
        "no dump of rank 3 (made no call, or killed before it could write one): what it did after the last live "
        "reading is unknown"]


def _pair_dump(rank: int) -> bytes:
    """Rank ``rank``'s recorder, as gloo's reads: the world's all_reduce #1, then its pair's
    all_gather #1 (ranks 0, 1 on group ``1``; 2, 3 on ``2``), neither pair named in ``pg_config``."""
    pair = ("1", "undefined") if rank < 2 else ("2", "undefined")
    return json.dumps(dump([entry(1, record_id=0), entry(1, "all_gather", group=pair, record_id=1)])).encode()


def test_attach_says_a_rank_not_read_and_the_pairs_it_holds_back_in_both(monkeypatch, capsys):
    """Rank 0's server is slow: neither pair's members are guessed from ranks 1–3 (rank 0 may be in
    either), which is said for each pair; the snapshot names rank 0 not read (exit 1)."""
    from collviz.app.cli import main
    from collviz.runtime.live import recorder_reader, workers
    from collviz.runtime.live.workers import Answer, Worker

    def ask(asked, handler: str, timeout_s: float) -> dict[int, Answer]:
        return {w.rank: Answer(w.rank, None, "slow: no whole answer within 2 s", slow=True) if w.rank == 0
                else Answer(w.rank, _pair_dump(w.rank), status=200) if handler == "fr_trace_json"
                else Answer(w.rank, None, f"{handler} answered 404", status=404) for w in asked}

    class Served(recorder_reader.RecorderReader):
        """The reader attach makes, its servers answering as ``ask`` says."""

        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, ask=ask, **kwargs)

    monkeypatch.setattr(workers, "find_workers",
                        lambda target, timeout_s: [Worker(rank, f"rank{rank}.sock") for rank in range(4)])
    monkeypatch.setattr(recorder_reader, "RecorderReader", Served)
    assert main(["attach", "--headless", "--json", "job"]) == 1
    out, err = capsys.readouterr()
    document = json.loads(out)
    assert document["not_read"] == [0]
    held = ("rank 0 not read (slow: no whole answer within 2 s): group {}'s ranks, not in the dumps' pg_config, are "
            "not guessed from the other ranks; its calls are shown once every rank is read")
    assert document["warnings"] == _said(err) == [held.format(1), held.format(2)]
