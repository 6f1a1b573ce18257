"""NCCL Inspector lines written to its documented format (tests/fixtures/nccl_inspector/README.md)
for the tests of a followed folder, and the session that follows them."""

from __future__ import annotations

import json
from pathlib import Path

from collviz.runtime.sessions.live import LiveSession, followed_session

WORLD = "0x7f8c496ae9f661"
BASE_US = 1764097200000000


def record_line(rank: int, coll: str, sn: int, size: int, exec_us: int, dump_ms: int, algbw: float, busbw: float,
          n_ranks: int = 3) -> str:
    """One Inspector record of a call on the 3-rank world communicator, with its newline."""
    return json.dumps({
        "header": {"id": WORLD, "rank": rank, "n_ranks": n_ranks, "nnodes": 1},
        "metadata": {"inspector_output_format_version": "v4.0", "git_rev": "", "rec_mechanism": "nccl_profiler_interface",
                     "dump_timestamp_us": BASE_US + dump_ms * 1000, "hostname": "node0", "pid": 100 + rank},
        "coll_perf": {"coll": coll, "coll_sn": sn, "coll_msg_size_bytes": size, "coll_exec_time_us": exec_us,
                      "coll_timing_source": "kernel_gpu", "coll_algobw_gbs": algbw, "coll_busbw_gbs": busbw}}) + "\n"


# 1 MiB all-reduce in 100 µs: algbw 2^20 B / 100 µs = 10.48576 GB/s, busbw × 2(3−1)/3 = 13.98 GB/s
AR0 = {rank: record_line(rank, "AllReduce", 0, 1 << 20, 100, 1, 10.48576, 13.981013) for rank in range(3)}
# 256 KiB sent per rank by an all-gather in 200 µs: 768 KiB gathered; algbw 3.93216, busbw × 2/3 = 2.62144
AG0 = {rank: record_line(rank, "AllGather", 0, 1 << 18, 200, 2, 3.93216, 2.62144) for rank in range(3)}


def append(path: Path, text: str) -> None:
    """Add ``text`` at the end of ``path``, as NCCL's dump thread does."""
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(text)


def follow(folder: Path, **options) -> LiveSession:
    """A started session on ``folder`` that reads at every poll and is not ended by idleness."""
    session = followed_session(folder, idle_s=60.0, every_s=0.0, **options)
    session.start()
    return session


def written(tmp_path: Path) -> tuple[Path, Path, Path]:
    """The folder and two processes' files (ranks 0 and 1), each with its first batch: the
    all-reduce on both, and rank 0's all-gather record cut after 40 characters."""
    folder = tmp_path / "insp"
    folder.mkdir()
    first, second = folder / "node0-pid100.log", folder / "node0-pid101.log"
    append(first, AR0[0] + AG0[0][:40])
    append(second, AR0[1])
    return folder, first, second


