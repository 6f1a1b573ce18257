"""Analytic memory estimates for DDP and FSDP: labelled as estimates, formula next to each number.

Per parameter, fp32 training with AdamW keeps 4 B of weight, 4 B of gradient and 8 B of optimizer
state (Adam's m and v): 16 B. Mixed precision with fp32 master weights also comes to 16 B
(2 B bf16 weight + 2 B bf16 gradient + 4 B master + 8 B m, v). DDP keeps all of it on every rank;
FSDP (full sharding) keeps 1/N of it, plus — only while a unit runs — that unit's gathered weights
and gradients (8 B per parameter of the unit). Activations, communication buffers and framework
overhead are not included: they depend on batch, sequence length and implementation.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..observation.metrics import human_bytes

__all__ = ["BYTES_PER_PARAM", "Estimate", "estimate", "render_estimates", "estimate_document", "theory_ratio"]

BYTES_PER_PARAM = 16
"""4 (fp32 weight) + 4 (gradient) + 8 (AdamW m and v)."""


@dataclass(frozen=True)
class Estimate:
    """One estimated per-rank figure and the formula, with its numbers, that gives it."""

    label: str
    bytes: float
    formula: str


def estimate(params: float, gpus: int, unit_params: float = 0.0) -> list[Estimate]:
    """DDP and FSDP per-rank state for ``params`` parameters on ``gpus`` ranks.

    ``unit_params`` (the largest FSDP unit) adds the transient gathered weights and gradients.
    """
    p, n = params, gpus
    ddp = Estimate("DDP", BYTES_PER_PARAM * p, f"16·P = 16 × {p:.4g} B")
    sharded = BYTES_PER_PARAM * p / n
    if unit_params:
        fsdp = Estimate("FSDP", sharded + 8 * unit_params,
                        f"16·P/N + 8·P_unit = 16 × {p:.4g} / {n} + 8 × {unit_params:.4g} B")
    else:
        fsdp = Estimate("FSDP", sharded, f"16·P/N = 16 × {p:.4g} / {n} B")
    return [ddp, fsdp]


def theory_ratio(params: float, gpus: int, unit_params: float = 0.0) -> tuple[float, str]:
    """DDP ÷ FSDP per-rank state, and the arithmetic that gives it."""
    ddp, fsdp = estimate(params, gpus, unit_params)
    return ddp.bytes / fsdp.bytes, f"{ddp.bytes:,.0f} B / {fsdp.bytes:,.0f} B = {ddp.bytes / fsdp.bytes:.2f}"


def render_estimates(params: float, gpus: int) -> str:
    """The ``collviz compare --params P --gpus N`` text: estimates, clearly labelled."""
    lines = [f"ESTIMATES (analytic, nothing was run): P = {params:.4g} parameters, N = {gpus} ranks, "
             "fp32 AdamW (16 B per parameter: 4 weight + 4 gradient + 8 Adam m, v)"]
    for item in estimate(params, gpus):
        lines.append(f"  {item.label:<5} per rank ≈ {human_bytes(item.bytes):>10} ({item.bytes:,.0f} B)   = {item.formula}")
    ratio, arithmetic = theory_ratio(params, gpus)
    lines.append(f"  DDP / FSDP ≈ {ratio:.2f}   ({arithmetic}; = N)")
    lines.append("  not included: activations, FSDP's gathered unit while it runs (+8 B per parameter of the "
                 "largest unit), communication buffers, framework overhead")
    return "\n".join(lines)


def estimate_document(params: float, gpus: int) -> dict:
    """The estimates as a JSON-ready dict, labelled as estimates (nothing was run)."""
    ratio, arithmetic = theory_ratio(params, gpus)
    return {"format": "collviz-estimates", "version": 1, "estimates_only": True, "params": params, "ranks": gpus,
            "bytes_per_param": BYTES_PER_PARAM,
            "per_rank": [{"label": item.label, "bytes": item.bytes, "formula": item.formula}
                         for item in estimate(params, gpus)],
            "ddp_over_fsdp": ratio, "ratio_arithmetic": arithmetic}
