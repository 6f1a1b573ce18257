"""Collectives a profiler trace records outside torch.distributed: named, counted and timed, never dropped.

An inference engine reduces a tensor-parallel layer's output without a process group: vLLM's and
SGLang's custom all-reduce (``torch.ops._C_custom_ar.all_reduce``, kernels
``vllm::cross_device_reduce_1stage`` / ``_2stage``; AMD's AIter has the same kernels) and
torch's symmetric memory (``symm_mem::one_shot_all_reduce``, ``two_shot_all_reduce_``,
``multimem_all_reduce_``, ``multimem_all_gather_out``, their ``…_kernel`` kernels). None of these
is a c10d call: it has no group or sequence number to match it across ranks, so collviz shows no
step for it, but each rank's trace says how many it made and how long they took. A GPU trace is
read by its kernels (the GPU's own time); a trace without such kernels by its CPU operators.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence

__all__ = ["KERNEL_PARTS", "outside_c10d", "outside_text"]

KERNEL_PARTS = ("cross_device_reduce", "one_shot_all_reduce", "two_shot_all_reduce", "multimem_all_reduce",
                "multimem_one_shot", "multimem_all_gather", "allreduce_fusion")
"""Parts of the kernel names of collectives made outside c10d (custom all-reduce, symmetric memory)."""
_OPERATORS = ("symm_mem::", "_C_custom_ar::")
"""Prefixes of the CPU operators that launch them."""
_QUALIFIED = re.compile(r"[\w:]+")


def _short(name: str) -> str:
    """A kernel's name without ``void``, ``(anonymous namespace)::``, its template arguments and its
    parameters: ``vllm::cross_device_reduce_1stage``."""
    plain = name.strip().removeprefix("void ").replace("(anonymous namespace)::", "")
    match = _QUALIFIED.match(plain)
    return match.group(0) if match else plain[:80]


def outside_c10d(slices: Sequence[dict]) -> dict[str, tuple[int, float]]:
    """Name → (calls, total µs) of the collectives ``slices`` (a rank's complete events) record
    outside c10d: its kernels where it has any, else its CPU operators."""
    kernels = [e for e in slices if e.get("cat") in ("kernel", "Kernel")
               and any(part in e["name"] for part in KERNEL_PARTS)]
    found = kernels or [e for e in slices if e.get("cat") in ("cpu_op", None) and e["name"].startswith(_OPERATORS)]
    totals: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for event in found:
        total = totals[_short(event["name"]) if kernels else event["name"]]
        total[0] += 1
        total[1] += float(event["dur"])
    return {name: (int(n), us) for name, (n, us) in totals.items()}


def outside_text(rank: int, found: dict[str, tuple[int, float]]) -> str:
    """The warning that lists them: ``rank 0: 73 collective calls made outside torch.distributed …``."""
    calls = sum(n for n, _ in found.values())
    listed = ", ".join(f"{name} ×{n} ({us / 1000:,.3f} ms)" for name, (n, us) in sorted(found.items()))
    return (f"rank {rank}: {calls} collective call{'s' if calls > 1 else ''} made outside torch.distributed (custom "
            f"all-reduce or symmetric memory: no process group to match them across ranks, so no step): {listed}")
