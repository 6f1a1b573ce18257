"""``collviz bench``: an nccl-tests-style size sweep of real collectives, as one scenario program.

:class:`BenchProgram` runs every (operation, size) case of the sweep in one launch, one phase per
case on every rank: allocate the buffers, warm up, time ``iters`` calls with the collective
scenarios' own timed loop (barrier, then one call; nothing sent while timing), report each call
as a ``Collective`` event, then check the result against the expected values computed on the rank
from the known inputs and report a ``Check`` with the number of wrong elements. The table is
derived from those events alone (:mod:`runtime.bench_report`), so a recorded bench replays as it ran.

Sizes follow nccl-tests: a case's size is the algorithm size S of the operation (the whole buffer
for all-reduce, broadcast, reduce and all-to-all; the gathered or scattered whole for the others),
rounded down so every rank gets whole elements.
"""

from __future__ import annotations

import dataclasses
import operator
from dataclasses import dataclass
from functools import reduce
from typing import Union

import torch

from ..context import RankContext
from ..errors import UsageError
from ..observation.metrics import human_bytes
from ..reports.bench_table import BENCH_SCENARIO_NAME, wrong_detail
from ..scenario_files.loading import find_scenario
from ..scenario_files.schema import COLLECTIVES, DTYPES, REDUCING, Scenario
from ..wire.protocol import Check
from .collectives import GATHERING, IN_PLACE, CollectiveSpec, collective_caller, make_output, present, timed_calls
from .devices import rank_tensor
from .algorithms.execute import algorithm_caller
from .algorithms.plans import ALGORITHMS, PlanError, plan
from .patterns import EXACT_LIMIT, pattern

__all__ = [
    "BenchCase",
    "BenchProgram",
    "bench_scenario",
    "build_bench",
    "op_name",
    "sweep_sizes",
]

_ROOT = 0
LIBRARY = "library"
"""The ``--algo`` name of the backend's own call."""
_SPLIT = frozenset({"all_gather", "gather", "reduce_scatter", "scatter", "all_to_all"})
"""Operations whose size S must divide into one whole-element part per rank."""

_PATTERN_PERIOD = 64
"""Inputs cycle through 1…64 (fewer where a sum over the ranks would not stay exact)."""


def op_name(text: str) -> str:
    """``"all-reduce"`` or ``"all_reduce"`` → ``"all_reduce"``; UsageError for anything else."""
    name = text.strip().lower().replace("-", "_")
    if name not in COLLECTIVES:
        known = ", ".join(c.replace("_", "-") for c in COLLECTIVES)
        raise UsageError(f"unknown operation {text!r} for bench; choose from {known}")
    return name


def sweep_sizes(low: int, high: int, factor: int = 2) -> list[int]:
    """``low, f·low, f²·low, …`` up to ``high`` inclusive (nccl-tests' ``-b low -e high -f factor``)."""
    if low <= 0 or high < low or factor < 2:
        raise UsageError(f"sizes {low}:{high} by a factor of {factor}: need 0 < min ≤ max and a factor of 2 or more")
    sizes = []
    size = low
    while size <= high:
        sizes.append(size)
        size *= factor
    return sizes


@dataclass(frozen=True)
class BenchCase:
    """One row of the sweep: ``op`` at algorithm size ``size`` bytes (``count`` elements in S)."""

    op: str
    size: int
    count: int
    rank_count: int
    """Elements of one rank's input (for scatter: of the root's whole input)."""
    algo: str = LIBRARY
    """``library`` (the backend's own call) or a hop-by-hop algorithm of :mod:`.algorithms`."""

    @property
    def label(self) -> str:
        """``all_reduce 64 KiB``, ``all_reduce ring 64 KiB``."""
        algo = "" if self.algo == LIBRARY else f" {self.algo}"
        return f"{self.op}{algo} {human_bytes(self.size)}"


def _with_algos(op: str, cases: list[BenchCase], algos: tuple[str, ...], world_size: int,
                skipped: list[str]) -> list[BenchCase]:
    """Each case once per algorithm that can run it; the others are said in ``skipped``."""
    out = []
    for algo in algos:
        if algo == LIBRARY:
            out.extend(cases)
            continue
        if algo not in ALGORITHMS.get(op, ()):
            raise UsageError(f"--algo {algo}: {op} has {', '.join((LIBRARY, *ALGORITHMS.get(op, ())))}")
        for case in cases:
            try:
                plan(op, algo, world_size, case.rank_count, _ROOT)
            except PlanError as why:
                skipped.append(f"{op} {algo} {human_bytes(case.size)}: {str(why).split(': ', 1)[-1]}")
                continue
            out.append(dataclasses.replace(case, algo=algo))
    return out


def _case(op: str, requested: int, world_size: int, itemsize: int) -> BenchCase | None:
    """The case for ``op`` near ``requested`` bytes, rounded down to whole elements per rank."""
    unit = itemsize * (world_size if op in _SPLIT else 1)
    size = requested // unit * unit
    if size == 0:
        return None
    count = size // itemsize
    rank_count = count // world_size if op in GATHERING else count
    return BenchCase(op=op, size=size, count=count, rank_count=rank_count)


@dataclass(frozen=True)
class BenchProgram:
    """The whole sweep, resolved for one run; identical on every rank (a ScenarioProgram)."""

    cases: tuple[BenchCase, ...]
    world_size: int
    dtype: str
    iters: int
    warmup: int
    nvml_note: str = ""
    """Why NVML figures are absent on the launcher's host ("" when NVML works)."""
    adjusted: tuple[str, ...] = ()
    """Requested sizes not measured as asked, one line per op saying which and why."""

    @property
    def phase_count(self) -> int:
        """One phase per case."""
        return len(self.cases)

    @property
    def period(self) -> int:
        """Inputs take the values 1…period, small enough that any sum over the ranks is exact."""
        return max(1, min(_PATTERN_PERIOD, EXACT_LIMIT[self.dtype] // self.world_size))

    @property
    def source(self) -> str:
        """How the inputs are generated."""
        return (f"generated: element i of rank r is (i + r) mod {self.period} + 1, "
                f"small integers exact in {self.dtype} so every result can be checked")

    def narration_values(self, world_size: int) -> dict[str, object]:
        """Values for the narration placeholders."""
        return {"world_size": world_size, "dtype": self.dtype, "iters": self.iters, "warmup": self.warmup}

    def run_options(self) -> dict[str, Union[str, int, float, bool]]:
        """The resolved options, as recorded in RunStart."""
        ops = ",".join(dict.fromkeys(c.op for c in self.cases))
        algos = ",".join(dict.fromkeys(c.algo for c in self.cases))
        return {"ops": ops, "algos": algos, "dtype": self.dtype, "iters": self.iters, "warmup": self.warmup,
                "cases": len(self.cases), "reduce_op": "sum", "root": _ROOT, "nvml": self.nvml_note or "available"}

    def run(self, ctx: RankContext) -> None:
        """Every case, in order, each in its own phase."""
        for case in self.cases:
            with ctx.phase("bench", case.label):
                _run_case(ctx, self, case)


def build_bench(ops: list[str], sizes: list[int], world_size: int, *, dtype: str = "float32", iters: int = 20,
                warmup: int = 5, nvml_note: str = "", algos: tuple[str, ...] = (LIBRARY,)) -> BenchProgram:
    """Validate the sweep and resolve its cases; UsageError names what does not fit."""
    if dtype not in DTYPES:
        raise UsageError(f"--dtype {dtype}: choose one of {', '.join(DTYPES)}")
    if iters < 1:
        raise UsageError(f"--iters {iters}: must be at least 1")
    if warmup < 0:
        raise UsageError(f"--warmup {warmup}: must be 0 or more")
    itemsize = getattr(torch, dtype).itemsize
    cases: list[BenchCase] = []
    skipped = []
    for op in dict.fromkeys(ops):
        resolved = [(size, _case(op, size, world_size, itemsize)) for size in sizes]
        too_small = [human_bytes(size) for size, case in resolved if case is None]
        if too_small:
            unit = itemsize * (world_size if op in _SPLIT else 1)
            skipped.append(f"{op} {', '.join(too_small)}: smaller than {human_bytes(unit)}, one {dtype} element"
                           + (f" per rank on {world_size} ranks" if op in _SPLIT else ""))
        kept = list(dict.fromkeys(case for _, case in resolved if case is not None))
        rounded = [f"{human_bytes(size)} → {human_bytes(case.size)}" for size, case in resolved
                   if case is not None and case.size != size]
        if rounded:
            skipped.append(f"{op} {', '.join(rounded)}: rounded down to whole elements per rank")
        cases.extend(_with_algos(op, kept, algos, world_size, skipped))
    if not cases:
        raise UsageError(f"--sizes: every size is smaller than one {dtype} element per rank "
                         f"({world_size} × {itemsize} B); use a larger maximum")
    return BenchProgram(cases=tuple(cases), world_size=world_size, dtype=dtype, iters=iters, warmup=warmup,
                        nvml_note=nvml_note, adjusted=tuple(skipped))


def bench_scenario() -> Scenario:
    """The Scenario a bench RunPlan carries: the all-reduce scenario renamed, with bench narration.

    Only its name, description and narration are used by the launcher; the work is the program's.
    """
    narration = {"bench": ("nccl-tests-style sweep on {world_size} ranks: {warmup} warm-up calls, then "
                           "{iters} timed calls (barrier, one call), then the result is checked.")}
    return dataclasses.replace(find_scenario("all-reduce"), name=BENCH_SCENARIO_NAME, kind=BENCH_SCENARIO_NAME,
                               description="size sweep of real collectives, nccl-tests style",
                               examples=(), followup=None, narration=narration)


def _expected(op: str, rank: int, n: int, count: int, period: int, device: torch.device) -> torch.Tensor | None:
    """What ``rank`` must hold after ``op`` on the generated inputs (sum), or None if unchecked.

    Computed here from the generation rule alone, never from what the collective returned.
    ``count`` is one rank's input element count (the root's whole input for scatter).
    """
    if op in ("reduce", "gather") and rank != _ROOT:
        return None  # gloo leaves partial sums on reduce's non-roots; gather's non-roots receive nothing
    if op in ("all_reduce", "reduce"):
        return reduce(operator.add, (pattern(r, count, period, device) for r in range(n)))
    if op == "broadcast":
        return pattern(_ROOT, count, period, device)
    if op in GATHERING:
        return torch.cat([pattern(r, count, period, device) for r in range(n)])
    if op == "reduce_scatter":
        return reduce(operator.add, (pattern(r, count, period, device) for r in range(n))).chunk(n)[rank]
    if op == "scatter":
        return pattern(_ROOT, count, period, device).chunk(n)[rank]
    if op == "all_to_all":
        return torch.cat([pattern(r, count, period, device).chunk(n)[rank] for r in range(n)])
    raise ValueError(f"unknown collective {op!r}")


def _input(op: str, rank: int, count: int, program: BenchProgram, device: torch.device) -> torch.Tensor | None:
    """This rank's input buffer (zeros on broadcast's non-roots, none on scatter's non-roots)."""
    dtype = getattr(torch, program.dtype)
    if op == "scatter" and rank != _ROOT:
        return None
    if op == "broadcast" and rank != _ROOT:
        return rank_tensor(device, dtype, shape=count)
    return pattern(rank, count, program.period, device).to(dtype)


def _wrong_elements(result: torch.Tensor, expected: torch.Tensor) -> int:
    """How many elements of ``result`` differ from ``expected`` (exact: see the period)."""
    return int((result != expected.to(result.dtype)).sum())


def _run_case(ctx: RankContext, program: BenchProgram, case: BenchCase) -> None:
    """One case on this rank: buffers, warm-up, timed calls and their events, the result check."""
    rank, n, op = ctx.rank, ctx.world_size, case.op
    spec = CollectiveSpec(op=op, reduce_op="sum" if op in REDUCING else None, dtype=program.dtype, root=_ROOT,
                          buffer_name="buffer", inputs=None, count=case.rank_count, iters=program.iters,
                          followup=None, source=program.source)
    extra: dict[str, str | int]
    if case.algo == LIBRARY:
        call, extra = collective_caller(spec, rank, n), {"algo": LIBRARY}
    else:
        steps = plan(op, case.algo, n, case.rank_count, _ROOT)
        call = algorithm_caller(steps, rank, spec.reduce_op)
        itemsize = getattr(torch, program.dtype).itemsize
        extra = {"algo": case.algo, "hops": len(steps.hops), "sent_bytes": steps.sent(rank) * itemsize}
    with ctx.tracker.category("inputs"):
        inp = _input(op, rank, case.rank_count, program, ctx.device)
    with ctx.tracker.category("communication"):
        out = make_output(spec, rank, n, ctx.device)
    pristine = None
    if op in IN_PLACE:
        with ctx.tracker.category("timing copy"):
            pristine = present(inp, "input").clone()
    ctx.memory("buffers allocated")
    with ctx.tracker.suspended():
        for _ in range(program.warmup):
            call(inp, out, "sum")
        if pristine is not None:
            present(inp, "input").copy_(pristine)
    timed_calls(ctx, spec, call, inp, out, pristine, extra)
    received = inp if op in IN_PLACE else out
    with ctx.tracker.suspended():
        expected = _expected(op, rank, n, case.rank_count, program.period, ctx.device)
        checked = 0 if expected is None else expected.numel()
        wrong = 0 if expected is None else _wrong_elements(present(received, "result"), expected)
    ctx.emitter.emit(Check, phase=ctx.phase_index, name=f"{case.label} results", ok=wrong == 0,
                     detail=wrong_detail(wrong, checked))
    del inp, out, pristine, received
    ctx.memory("buffers freed")
