"""``collviz bench`` on 4 real gloo ranks: nccl-tests factors, checked results, JSON, N/A device figures."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest

import collviz.runtime.programs.bench as bench
from collviz.app.cli import main
from collviz.runtime.reports.bench_table import bench_report, parse_table, render_table
from collviz.runtime.wire.trace import read_trace

from support.cli import run_cli
from support.paths import FIXTURES


N = 4
SIZES = [1024 * 2**k for k in range(7)]  # 1K:64K
NCCL_TESTS_FACTOR = {  # nccl-tests doc/PERFORMANCE.md, written here independently of runtime.metrics
    "all_reduce": Fraction(2 * (N - 1), N),
    "all_gather": Fraction(N - 1, N), "reduce_scatter": Fraction(N - 1, N), "all_to_all": Fraction(N - 1, N),
    "gather": Fraction(N - 1, N), "scatter": Fraction(N - 1, N),
    "broadcast": Fraction(1), "reduce": Fraction(1),
}


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path, str]:
    """One 4-rank bench of all-reduce and reduce-scatter over 1K:64K: (JSON, trace, stderr)."""
    trace = tmp_path_factory.mktemp("bench") / "bench.cvz"
    result = run_cli("bench", "all-reduce", "reduce-scatter", "--gpus", str(N), "--backend", "gloo",
                     "--sizes", "1K:64K", "--iters", "3", "--warmup", "1", "--json", "--record", str(trace))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout), trace, result.stderr


def test_every_size_of_every_op_has_a_row(sweep):
    document, _, _ = sweep
    rows = document["rows"]
    assert [(r["op"], r["size"]) for r in rows] == [(op, s) for op in ("all_reduce", "reduce_scatter") for s in SIZES]
    for row in rows:
        assert row["count"] == row["size"] // 4 and row["dtype"] == "float32" and row["iters"] == 3
        assert row["time_us"] > 0


def test_busbw_is_algbw_times_the_nccl_tests_factor(sweep):
    for row in sweep[0]["rows"]:
        assert row["algbw_gbps"] == pytest.approx(row["size"] / (row["time_us"] * 1e-6) / 1e9, rel=1e-9)
        assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"] * float(NCCL_TESTS_FACTOR[row["op"]]), rel=1e-12)


def test_results_are_exactly_the_expected_reduction(sweep):
    document, _, _ = sweep
    assert [row["wrong"] for row in document["rows"]] == [0] * len(document["rows"])
    assert document["wrong_total"] == 0 and document["status"] == "ok"


def test_no_nvml_means_na_device_figures_and_exit_0(sweep):
    document, trace, stderr = sweep
    assert [d["nvml_used"] for d in document["devices"]] == [None] * N
    table = render_table(bench_report(read_trace(trace).events), explain=True)
    assert "device memory (NVML): N/A" in table
    assert "2(n−1)/n = 2·3/4 = 1.5" in table and "(n−1)/n = 3/4 = 0.75" in table


def test_table_from_the_recorded_trace_equals_the_live_one(sweep):
    document, trace, _ = sweep
    replayed = bench_report(read_trace(trace).events)
    assert [row.__dict__ for row in replayed.rows] == document["rows"]


def test_replay_headless_prints_the_bench_table(sweep, capsys):
    _, trace, _ = sweep
    assert main(["replay", str(trace), "--headless"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# collviz bench — 4 ranks") and "reduce_scatter       65536" in out


def test_the_printed_tables_rows_read_back_as_the_report_computed_them(sweep, capsys):
    """The row parser the GPU tier and gpu_check read tables with, on collviz's real output:
    rows start with the op name, not a digit."""
    _, trace, _ = sweep
    assert main(["replay", str(trace), "--headless"]) == 0
    printed = capsys.readouterr().out
    assert not [line for line in printed.splitlines() if line.lstrip()[:1].isdigit()]  # no row starts with a digit
    report = bench_report(read_trace(trace).events)
    rows = parse_table(printed)
    assert [(r.op, r.size, r.count, r.dtype, r.wrong, r.algo, r.nccl) for r in rows] == [
        (op, size, size // 4, "float32", 0, "library", None) for op in ("all_reduce", "reduce_scatter") for size in SIZES]
    for parsed, computed in zip(rows, report.rows):  # a printed figure lies within half its last digit, a tie
        # included: 6243.75 µs prints 6243.8, and 6243.8 − 6243.75 is a hair over 0.05 in binary floating point
        assert abs(parsed.time_us - computed.time_us) <= 0.05 + 1e-9
        assert abs(parsed.busbw_gbps - computed.busbw_gbps) <= 0.0005 + 1e-12


def test_the_row_parser_reads_ncclls_column_and_an_algorithm_table():
    from collviz.runtime.reports.bench_table import BenchReport, BenchRow
    from collviz.runtime.reports.nccl_log import NcclChoice

    def row(algo: str, size: int) -> BenchRow:
        return BenchRow(op="all_reduce", size=size, count=size // 4, dtype="float32", iters=1, time_us=12.25,
                        algbw_gbps=1.0, busbw_gbps=1.5, bus_factor=1.5, bus_factor_text="2(n−1)/n", wrong=0, algo=algo,
                        hops=2 if algo != "library" else 0, sent_bytes=size if algo != "library" else 0)

    report = BenchReport(world_size=2, backend="nccl", backend_reason="2 GPUs", options={},
                         rows=[row("library", 1024), row("ring", 1024)], devices=[], status="ok")
    nccl = {("all_reduce", 1024): NcclChoice("all_reduce", 1024, "RING", "LL")}
    parsed = parse_table(render_table(report, explain=True, nccl=nccl))
    assert [(r.algo, r.op, r.size, r.time_us, r.busbw_gbps, r.nccl) for r in parsed] == [
        ("library", "all_reduce", 1024, 12.2, 1.5, "RING/LL"), ("ring", "all_reduce", 1024, 12.2, 1.5, None)]
    assert parse_table("no table here") == []


def test_no_progress_when_stderr_is_not_a_terminal(sweep):
    assert "collviz: bench" not in sweep[2] and "\r" not in sweep[2]


def test_table_output_exits_0_and_shows_na():
    result = run_cli("bench", "broadcast", "--gpus", "2", "--backend", "gloo", "--sizes", "4K:4K",
                     "--iters", "2", "--warmup", "0", "--explain")
    assert result.returncode == 0, result.stderr
    assert "device memory (NVML): N/A" in result.stdout
    assert "      broadcast        4096" in result.stdout and "result: ok" in result.stdout


def test_a_wrong_result_is_counted_and_fails_the_run(monkeypatch, capsys):
    """The check is real: corrupt one element per rank after each call (in the forked ranks)."""
    real_caller = bench.collective_caller

    def corrupting_caller(spec, rank, world_size):
        call = real_caller(spec, rank, world_size)

        def corrupted(inp, out, reduce_op):
            call(inp, out, reduce_op)
            inp.view(-1)[0] += 1

        return corrupted

    monkeypatch.setattr(bench, "collective_caller", corrupting_caller)
    status = main(["bench", "all-reduce", "--gpus", "2", "--backend", "gloo", "--sizes", "64:64", "--iters", "2",
                   "--warmup", "0", "--json"])
    captured = capsys.readouterr()
    assert status == 1, captured.err
    assert json.loads(captured.out)["rows"][0]["wrong"] == 2  # one element on each of the 2 ranks


@pytest.mark.parametrize("args,needle", [
    (["--sizes", "1K-64K"], "--sizes '1K-64K'"),
    (["--sizes", "lots:1M"], "--sizes 'lots:1M'"),
    (["--sizes", "64K:1K"], "MIN ≤ MAX"),
    (["--sizes", "0:1K"], "MIN ≤ MAX"),
    (["all-reduse"], "unknown operation 'all-reduse'"),
    (["--iters", "0"], "--iters 0"),
    (["--warmup", "-1"], "--warmup -1"),
    (["--gpus", "0"], "--gpus 0"),
    (["--record", "/nonexistent/b.cvz"], "does not exist"),
    (["all-gather", "--gpus", "4", "--sizes", "4:8"], "smaller than one float32 element per rank"),
    (["--sizes", "1K:4K", "-b", "8"], "--sizes 1K:4K and -b 8 both give the sizes"),
    (["--gpus", "4", "-g", "2"], "--gpus 4 and -g 2 both give the number of ranks"),
    (["-f", "1"], "-f 1: the factor between sizes must be between 2 and 1,024"),
    (["-b", "8x"], "-b '8x': expected a size as nccl-tests takes it"),
    (["-b", "1M", "-e", "1K"], "-b 1048576 -e 1024 (from -b 1M -e 1K): need 0 < -b ≤ -e"),
    (["-b", "0"], "need 0 < -b ≤ -e"),
    (["-b", "32M"], "-b 33554432 -e 16777216 (from -b 32M): need 0 < -b ≤ -e"),  # -e is the default sweep's 16M
    (["-g", "0"], "-g 0: must be between 1 and"),
    (["-e", "2048G"], "-e 2,199,023,255,552 B: must be between 1 B and"),
], ids=lambda v: v if isinstance(v, str) else " ".join(v))
def test_bad_bench_input(capsys, args, needle):
    assert main(["bench", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("collviz: error: ") and needle in err[0], err


@pytest.mark.parametrize("text,expected", [
    ("8", 8), ("64K", 64 * 1024), ("64k", 64 * 1024), ("128M", 128 * 1024 * 1024), ("1G", 1024**3),
    ("128MB", 128 * 1024 * 1024), ("1.5K", 1536), (".5K", 512), ("2.7", 2), (" 16 M ", 16 * 1024 * 1024),
])
def test_sizes_read_as_nccl_tests_reads_them(text, expected):
    """nccl-tests' parsesize: a number (a fraction allowed), then K, M or G by 1024 in either case,
    a letter after it ignored (so 128MB is 128 MiB); the product rounded down to whole bytes."""
    from collviz.app.commands.sweep_args import parse_nccl_tests_bytes

    assert parse_nccl_tests_bytes(text, "-b") == expected


def test_nccl_tests_spelling_sweeps_by_its_factor_on_g_ranks_with_hash_headers():
    """``-g 2 -b 1K -e 64K -f 4``: 2 ranks, 1 KiB, 4 KiB, 16 KiB, 64 KiB; every line but the rows starts
    with #, so grep -v '^#' leaves the rows alone, as with nccl-tests' own tables."""
    result = run_cli("bench", "all-reduce", "-g", "2", "-b", "1K", "-e", "64K", "-f", "4", "--backend", "gloo",
                     "--iters", "1", "--warmup", "0")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("# collviz bench — 2 ranks")
    rows = [line.split() for line in lines if not line.startswith("#")]
    assert [(op, int(size), int(count), wrong) for op, size, count, _, _, _, _, wrong in rows] == [
        ("all_reduce", 1024, 256, "0"), ("all_reduce", 4096, 1024, "0"), ("all_reduce", 16384, 4096, "0"),
        ("all_reduce", 65536, 16384, "0")]
    assert lines[-1] == "# result: ok"


def test_sizes_that_cannot_be_measured_as_asked_are_named_with_the_reason():
    """all_gather on 4 float32 ranks moves whole elements per rank: S is a multiple of 16 B."""
    from collviz.runtime.programs.bench import build_bench

    program = build_bench(["all_gather", "all_reduce"], [1, 2, 4, 8, 16, 24, 32], 4)
    gather, reduce_small, reduce_round = None, None, None
    for line in program.adjusted:
        if line.startswith("all_gather 1 B, 2 B, 4 B, 8 B:"):
            gather = line
        elif line.startswith("all_reduce 1 B, 2 B:"):
            reduce_small = line
        elif line.startswith("all_gather 24 B → 16 B: rounded down"):
            reduce_round = line
    assert gather and "16 B" in gather and reduce_small and "4 B" in reduce_small and reduce_round
    assert [c.size for c in program.cases if c.op == "all_gather"] == [16, 32]
    assert [c.size for c in program.cases if c.op == "all_reduce"] == [4, 8, 16, 24, 32]


def test_alpha_beta_fit_recovers_the_machine_and_predicts_the_crossover():
    """Rows made from α = 50 µs/hop and β = 0.01 µs/B exactly: the fit finds both; ring (6 hops,
    1.5 B sent per byte of S on 4 ranks) and tree (4 hops, 2 B per byte) meet where
    50·6 + 0.01·1.5·S = 50·4 + 0.01·2·S, i.e. S = 100 / 0.005 = 20,000 B."""
    from types import SimpleNamespace

    from collviz.runtime.reports.alpha_beta import crossovers, fit_alpha_beta

    rows = []
    for size in (1024, 8192, 65536, 524288):
        for algo, hops, per_byte in (("ring", 6, 1.5), ("tree", 4, 2.0)):
            sent = int(per_byte * size)
            rows.append(SimpleNamespace(op="all_reduce", algo=algo, size=size, hops=hops, sent_bytes=sent,
                                        time_us=50 * hops + 0.01 * sent))
    fit = fit_alpha_beta(rows)
    assert fit.alpha_us == pytest.approx(50) and fit.beta_us_per_byte == pytest.approx(0.01)
    (line,) = crossovers(fit, rows)
    assert "tree (fewer hops) is faster below S ≈ 19.5 KiB, ring (less traffic per rank) above it" in line


def test_bench_algo_times_each_algorithm_with_its_hops_and_traffic(tmp_path):
    """2 ranks: ring all-reduce is 2(n−1) = 2 hops and each rank sends 2(n−1)/n · S = S bytes."""
    path = tmp_path / "algo.cvz"
    result = run_cli("bench", "all-reduce", "--algo", "ring,library", "--sizes", "1K:2K", "--gpus", "2", "--backend",
                     "gloo", "--iters", "2", "--warmup", "0", "--record", str(path), timeout=240)
    assert result.returncode == 0, result.stderr
    report = bench_report(read_trace(path).events)
    ring = [r for r in report.rows if r.algo == "ring"]
    assert [r.size for r in ring] == [1024, 2048] and all(r.wrong == 0 for r in report.rows)
    assert all(r.hops == 2 and r.sent_bytes == r.size for r in ring)
    assert {r.algo for r in report.rows} == {"ring", "library"}
    assert "α–β fit over 2 algorithm rows" in result.stdout and "ring" in result.stdout


def test_nccl_choices_are_read_from_its_tuning_lines_and_labelled_on_library_rows():
    """NCCL's log format as documented, shipped as test data (no GPU here to capture one)."""
    from collviz.runtime.reports.bench_table import BenchReport, BenchRow
    from collviz.runtime.reports.nccl_log import NCCL_LABEL, nccl_choices

    text = (FIXTURES / "nccl" / "tuning.log").read_text().splitlines()
    found = nccl_choices(text)
    assert {key: (c.algo, c.protocol) for key, c in found.items()} == {
        ("all_reduce", 1024): ("TREE", "LL"), ("all_reduce", 1048576): ("RING", "LL128"),
        ("all_reduce", 16777216): ("RING", "SIMPLE"), ("all_gather", 1048576): ("RING", "SIMPLE")}  # Algo 1 proto 2
    row = BenchRow(op="all_reduce", size=1048576, count=262144, dtype="float32", iters=1, time_us=1.0,
                   algbw_gbps=1.0, busbw_gbps=1.5, bus_factor=1.5, bus_factor_text="", wrong=0)
    report = BenchReport(world_size=4, backend="nccl", backend_reason="4 GPUs", options={}, rows=[row],
                         devices=[], status="ok")
    table = render_table(report, nccl=found)
    assert "NCCL: RING/LL128" in table and NCCL_LABEL in table
    assert "NCCL" not in render_table(report)  # nothing claimed without NCCL's own lines


def test_worker_log_lines_keeps_only_the_marked_lines_of_every_rank(tmp_path):
    from collviz.runtime.sessions.local import worker_log_lines

    (tmp_path / "rank0.log").write_text("hello\nx NCCL INFO AllReduce: 8 Bytes -> Algo RING proto LL\n")
    (tmp_path / "rank1.log").write_text("x NCCL INFO Channel 00/02\nbye\n")
    (tmp_path / "events.sock").write_text("NCCL INFO not a log")
    assert worker_log_lines(str(tmp_path), "NCCL INFO") == [
        "x NCCL INFO AllReduce: 8 Bytes -> Algo RING proto LL", "x NCCL INFO Channel 00/02"]
