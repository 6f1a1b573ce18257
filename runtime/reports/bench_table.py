"""The bench table, derived from a bench run's event log only (live, or a recorded trace).

This module does not import torch, so ``collviz replay TRACE --headless`` stays quick.

One row per phase of a bench run: the operation, its nccl-tests size S and element count, the
slowest rank's median call time, algbw/busbw with the nccl-tests formulas of
:mod:`runtime.metrics`, and the number of wrong result elements the ranks reported in their
``Check`` events. Device figures are NVML's used/total per rank where the run had them, "N/A"
where it did not.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass

from ..observation.metrics import bandwidth, bus_factor, bus_factor_text
from .alpha_beta import fit_alpha_beta, fit_lines, fitted_rows
from .nccl_log import NCCL_LABEL, NcclChoice
from .warnings import with_warnings
from ..wire.protocol import AnyEvent, Check, Collective, Memory, RankStart, RunEnd, RunStart

__all__ = ["BENCH_SCENARIO_NAME", "wrong_detail", "parse_wrong_detail", "is_bench_log", "BenchRow", "DeviceFigures", "BenchReport", "bench_row", "bench_report", "render_table", "render_json",
           "TableRow", "parse_table"]

NA = "N/A"
"""What the table shows for a figure the run did not have."""

BENCH_SCENARIO_NAME = "bench"
"""``RunStart.scenario`` of a bench run (how a trace is recognised as one)."""


def wrong_detail(wrong: int, checked: int) -> str:
    """The ``Check.detail`` of a bench case (read back by :func:`parse_wrong_detail`)."""
    return f"{wrong} of {checked} elements wrong"


def parse_wrong_detail(detail: str) -> int:
    """The wrong-element count in a :func:`wrong_detail` text."""
    return int(detail.split(" ", 1)[0])


@dataclass(frozen=True)
class BenchRow:
    """One size of one operation: what the table prints (bandwidths in GB/s, 10⁹ B/s)."""

    op: str
    size: int
    count: int
    dtype: str
    iters: int
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    bus_factor: float
    bus_factor_text: str
    wrong: int | None
    """Wrong result elements summed over the ranks; None when a rank did not report its check."""
    algo: str = "library"
    """``library`` (the backend's own call) or the hop-by-hop algorithm that ran."""
    hops: int = 0
    """The algorithm's hops (0 for the library's call: not observable)."""
    sent_bytes: int = 0
    """The most bytes one rank sent (0 for the library's call)."""


@dataclass(frozen=True)
class DeviceFigures:
    """One rank's device and NVML's view of it (None where NVML gave nothing)."""

    rank: int
    device: str
    nvml_used: int | None = None
    nvml_total: int | None = None
    utilization_pct: int | None = None

    @property
    def text(self) -> str:
        """``r0 cuda:0 12.1/79.6 GiB used, 35 %`` or ``r0 cpu N/A``."""
        if self.nvml_used is None or self.nvml_total is None:
            return f"r{self.rank} {self.device} {NA}"
        util = f", {self.utilization_pct} %" if self.utilization_pct is not None else ""
        return f"r{self.rank} {self.device} {self.nvml_used / 2**30:.1f}/{self.nvml_total / 2**30:.1f} GiB used{util}"


@dataclass(frozen=True)
class BenchReport:
    """Everything ``collviz bench`` prints."""

    world_size: int
    backend: str
    backend_reason: str
    options: dict
    rows: list[BenchRow]
    devices: list[DeviceFigures]
    status: str
    """``ok``, ``failed``, ``interrupted``, or ``incomplete`` when the log has no RunEnd."""

    @property
    def wrong_total(self) -> int:
        """Wrong elements over every row that reported its checks."""
        return sum(row.wrong or 0 for row in self.rows)

    @property
    def all_checked(self) -> bool:
        """Whether every row has every rank's check."""
        return all(row.wrong is not None for row in self.rows)


def is_bench_log(events: Iterable[AnyEvent]) -> bool:
    """Whether the log is of a ``collviz bench`` run (its RunStart names the bench scenario)."""
    start = next((e for e in events if isinstance(e, RunStart)), None)
    return start is not None and start.scenario == BENCH_SCENARIO_NAME


def bench_row(phase_events: Iterable[AnyEvent], world_size: int) -> BenchRow | None:
    """The row of one bench phase from its events; None until some rank reported a timed call."""
    ends = [e for e in phase_events if isinstance(e, Collective) and e.edge == "end" and e.duration_ns]
    checks = [e for e in phase_events if isinstance(e, Check)]
    if not ends:
        return None
    per_rank: dict[int, list[int]] = defaultdict(list)
    for call in ends:
        if call.duration_ns:  # always: ends holds timed calls only
            per_rank[call.rank].append(call.duration_ns)
    slowest_ns = max(statistics.median(times) for times in per_rank.values())
    first = ends[0]
    itemsize = next((c.bytes_in // c.count for c in ends if c.count), 1)
    ranks = len(first.group_ranks) or world_size  # the call's own group: a subgroup's factor is its own
    bw = bandwidth(first.op, ranks, first.algo_bytes, slowest_ns / 1e9)
    reported = {c.rank for c in checks}
    wrong = sum(parse_wrong_detail(c.detail) for c in checks) if len(reported) == world_size else None
    return BenchRow(
        op=first.op, size=first.algo_bytes, count=first.algo_bytes // itemsize, dtype=first.dtype,
        iters=min(len(times) for times in per_rank.values()), time_us=slowest_ns / 1e3,
        algbw_gbps=bw.algbw / 1e9, busbw_gbps=bw.busbw / 1e9, bus_factor=float(bus_factor(first.op, ranks)),
        bus_factor_text=bus_factor_text(first.op, ranks), wrong=wrong,
        algo=first.algo or "library", hops=first.hops, sent_bytes=max(c.sent_bytes for c in ends),
    )


def bench_report(events: Iterable[AnyEvent]) -> BenchReport:
    """The report of a bench run from its event log (in any order of arrival)."""
    events = list(events)
    start = next((e for e in events if isinstance(e, RunStart)), None)
    world_size = start.world_size if start else 1 + max((e.rank for e in events), default=0)
    by_phase: dict[int, list[AnyEvent]] = defaultdict(list)
    for event in events:
        if isinstance(event, (Collective, Check)):
            by_phase[event.phase].append(event)
    rows = [row for index in sorted(by_phase) if (row := bench_row(by_phase[index], world_size)) is not None]
    end = next((e for e in events if isinstance(e, RunEnd)), None)
    return BenchReport(
        world_size=world_size, backend=start.backend if start else "", backend_reason=start.backend_reason if start else "",
        options=dict(start.options) if start else {}, rows=rows, devices=_devices(events),
        status=end.status if end else "incomplete",
    )


def _devices(events: list[AnyEvent]) -> list[DeviceFigures]:
    """Each rank's device, with the last NVML figures it reported."""
    devices = {e.rank: e.device for e in events if isinstance(e, RankStart)}
    nvml = {e.rank: e.nvml for e in events if isinstance(e, Memory) and e.nvml is not None}
    return [
        DeviceFigures(rank=rank, device=device, nvml_used=nvml[rank].used if rank in nvml else None,
                      nvml_total=nvml[rank].total if rank in nvml else None,
                      utilization_pct=nvml[rank].utilization_pct if rank in nvml else None)
        for rank, device in sorted(devices.items())
    ]


def _device_line(report: BenchReport) -> str:
    if any(d.nvml_used is not None for d in report.devices):
        return "device memory (NVML): " + ", ".join(d.text for d in report.devices)
    note = report.options.get("nvml", "")
    why = "no CUDA device in this run" if report.backend != "nccl" else "NVML gave no figures"
    if note and note != "available":
        why += f"; {note}"
    return f"device memory (NVML): {NA} ({why})"


_COLUMNS = (("op", 15, "s"), ("size (B)", 12, "d"), ("count", 11, "d"), ("dtype", 9, "s"), ("time (µs)", 11, ".1f"),
            ("algbw (GB/s)", 13, ".3f"), ("busbw (GB/s)", 13, ".3f"), ("#wrong", 7, "s"))


def render_table(report: BenchReport, explain: bool = False,
                 nccl: Mapping[tuple[str, int], NcclChoice] | None = None) -> str:
    """The nccl-tests-style table as text; ``explain`` adds each row's busbw factor formula;
    ``nccl`` (from :func:`.nccl_log.nccl_choices`) adds, on library rows, the algorithm and protocol
    NCCL reported for that op and size. As nccl-tests prints its tables, every line but the rows
    starts with ``#`` (the column titles' first column gives up its first space for it), so
    ``grep -v '^#'`` keeps the rows alone."""
    opts = report.options
    preamble = [
        f"collviz bench — {report.world_size} ranks, {report.backend_reason}",
        f"{opts.get('dtype', '?')} · reduce op sum · {opts.get('iters', '?')} timed calls after "
        f"{opts.get('warmup', '?')} warm-up · time = slowest rank's median · GB/s = 10⁹ B/s",
        _device_line(report),
        "",
    ]
    titles = "".join(f"{title:>{width}}" for title, width, _ in _COLUMNS)
    titles += "   busbw = algbw × factor" if explain else ""
    algorithms = any(row.algo != "library" for row in report.rows)
    fit = fit_alpha_beta(report.rows) if algorithms else None
    fitted = fitted_rows(report.rows) if fit is not None else []
    if algorithms:
        titles = f"{'algo':>20}" + titles + f"{'hops':>6}{'sent/rank (B)':>15}{'model (µs)':>12}{'resid':>8}"
    rows = []
    for row in report.rows:
        values = (row.op, row.size, row.count, row.dtype, row.time_us, row.algbw_gbps, row.busbw_gbps,
                  "?" if row.wrong is None else str(row.wrong))
        line = "".join(f"{value:>{width}{fmt}}" for value, (_, width, fmt) in zip(values, _COLUMNS))
        if algorithms:
            model = f"{fit.predict(row):.1f}" if fit is not None and row in fitted else "—"
            residual = f"{fit.residual(row):+.0%}" if fit is not None and row in fitted else "—"
            hops = str(row.hops) if row.hops else "—"
            sent = str(row.sent_bytes) if row.hops else "—"
            line = f"{row.algo:>20}" + line + f"{hops:>6}{sent:>15}{model:>12}{residual:>8}"
        chosen = _nccl_choice(nccl or {}, row, report.world_size)
        rows.append(line + (f"   {row.bus_factor_text}" if explain else "")
                    + (f"   NCCL: {chosen.algo}/{chosen.protocol}" if chosen else ""))
    closing = [""]
    if nccl:
        closing.append(f"NCCL: algorithm/protocol as {NCCL_LABEL}")
    if algorithms:
        closing += [*fit_lines(fit, report.rows), ""]
    if report.rows:
        average = statistics.mean(row.busbw_gbps for row in report.rows)
        checked = "" if report.all_checked else " (some ranks did not report their check)"
        closing.append(f"wrong results: {report.wrong_total}{checked} · average busbw {average:.3f} GB/s")
    closing.append(f"result: {report.status}")
    return "\n".join([*map(_comment, preamble), "#" + titles[1:], *rows, *map(_comment, closing)])


def _comment(line: str) -> str:
    """``line`` as one of the table's ``#`` lines."""
    return f"# {line}" if line else "#"


def _nccl_choice(nccl: Mapping[tuple[str, int], NcclChoice], row: BenchRow, world_size: int) -> NcclChoice | None:
    """NCCL's reported choice for a library row: by op and S, or S / n (NCCL counts one rank's
    part for the gathering and scattering ops)."""
    if row.algo != "library":
        return None
    return nccl.get((row.op, row.size)) or nccl.get((row.op, row.size // max(world_size, 1)))


def render_json(report: BenchReport, warnings: Sequence[str] = ()) -> str:
    """The report as one JSON document (bandwidths in GB/s, time in µs, NVML bytes or null), with
    the ``warnings`` the command said (:mod:`.warnings`)."""
    document = asdict(report)
    document["format"] = "collviz-bench"
    document["wrong_total"] = report.wrong_total
    return json.dumps(with_warnings(document, warnings), indent=2)


@dataclass(frozen=True)
class TableRow:
    """One row of a printed bench table, read back from its text (:func:`parse_table`)."""

    op: str
    size: int
    count: int
    dtype: str
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: int | None
    algo: str = "library"
    nccl: str | None = None
    """NCCL's ``algorithm/protocol`` for the row, where the table names it."""


def parse_table(text: str) -> list[TableRow]:
    """The rows of a table :func:`render_table` printed (what ``collviz bench`` writes): the
    lines after its column titles up to the first ``#`` or blank line. Each row starts with its op
    (after the algorithm, in a table with an ``algo`` column), right-aligned under the titles."""
    lines = text.splitlines()
    header = next((i for i, line in enumerate(lines) if "busbw (GB/s)" in line), None)
    if header is None:
        return []
    with_algo = lines[header].lstrip("#").split()[0] == "algo"
    rows = []
    for line in lines[header + 1:]:
        if not line.strip() or line.startswith("#"):
            break
        fields = line.split()
        algo = fields.pop(0) if with_algo else "library"
        op, size, count, dtype, time_us, algbw, busbw, wrong = fields[:8]
        nccl = fields[fields.index("NCCL:") + 1] if "NCCL:" in fields else None
        rows.append(TableRow(op, int(size), int(count), dtype, float(time_us), float(algbw), float(busbw),
                             None if wrong == "?" else int(wrong), algo, nccl))
    return rows
