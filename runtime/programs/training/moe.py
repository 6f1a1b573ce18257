"""``moe``: a mixture-of-experts layer with one expert per rank and a learned top-k router.

Every rank routes its own tokens: the router's softmax picks k experts per token (gates
renormalised over the k), and each rank may send an expert at most ``capacity`` token slots
(⌈capacity factor · tokens · k / n⌉); slots beyond it are dropped (their gate counts as 0).
Dispatch is two real ``all_to_all_single`` calls (the counts, then the tokens, with uneven split
sizes), each expert runs its MLP on what it received, and a third ``all_to_all_single`` returns
the results; each rank sums them weighted by their gates. The output is checked against the same
layer computed on one rank, with every expert local and the same routing rule.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.distributed as dist

from ...context import RankContext
from ...observation.metrics import algo_bytes
from ...observation.tensors import uniform_provenance
from ...observation.timing import CallClock
from ...scenario_files.schema import Scenario
from ...wire.protocol import Collective, ProvenanceRun, Transfer
from ..devices import rank_tensor
from ..program import RunOptions
from .common import PhaseSequence, TrainingProgram, check_close, refuse_options
from .model import MLP

__all__ = ["MoEProgram", "build", "route", "moe_reference", "tokens_of"]

GROUP = "world"


@dataclass(frozen=True)
class MoEProgram(TrainingProgram):
    """The MoE layer's forward on ``world_size`` ranks (one expert each)."""

    top_k: int
    capacity_factor: float

    @property
    def phase_count(self) -> int:
        """setup, route, dispatch, expert, combine, check."""
        return 6

    def capacity(self, world_size: int) -> int:
        """Token slots one rank may send each expert."""
        tokens = int(self.settings["tokens"])
        return max(1, math.ceil(self.capacity_factor * tokens * self.top_k / world_size))

    def narration_values(self, world_size: int) -> dict[str, object]:
        """Values for the narration placeholders."""
        return {"world_size": world_size, "tokens": self.settings["tokens"], "d_model": self.settings["d_model"],
                "top_k": self.top_k, "capacity_factor": f"{self.capacity_factor:g}",
                "capacity": self.capacity(world_size)}

    def run_options(self) -> dict[str, str | int | float | bool]:
        """Settings plus top-k and the capacity factor, as recorded in RunStart."""
        return {**self.settings, "top_k": self.top_k, "capacity_factor": self.capacity_factor}

    def run(self, ctx: RankContext) -> None:
        """Run this rank's part: every phase, every event."""
        run_moe(ctx, self)


def build(scenario: Scenario, world_size: int, options: RunOptions) -> MoEProgram:
    """The MoE program; ``--top-k`` (≤ the number of experts) and ``--capacity-factor`` (> 0)
    override the scenario's."""
    from ...errors import UsageError

    refuse_options(options, scenario.name, allowed=("top_k", "capacity_factor"))
    top_k = int(options.top_k if options.top_k is not None else scenario.settings["top_k"])
    factor = float(options.capacity_factor if options.capacity_factor is not None else scenario.settings["capacity_factor"])
    if not 1 <= top_k <= world_size:
        raise UsageError(f"--top-k {top_k}: must be between 1 and the number of experts, {world_size} (one per rank)")
    if not (math.isfinite(factor) and 0 < factor <= 64):
        raise UsageError(f"--capacity-factor {factor:g}: must be a number above 0 (and at most 64)")
    seed = int(scenario.settings["seed"])
    return MoEProgram(world_size=world_size, settings=scenario.settings, top_k=top_k, capacity_factor=factor,
                      source=f"router and experts from torch.manual_seed({seed}); rank r's tokens from generator "
                             f"seed {seed} + 1 + r")


def _layers(settings: dict, experts: int) -> tuple[torch.nn.Linear, list[MLP]]:
    """The router and every expert, identical on every rank (from the seed)."""
    torch.manual_seed(int(settings["seed"]))
    d, hidden = int(settings["d_model"]), int(settings["hidden"])
    router = torch.nn.Linear(d, experts, bias=False)
    return router, [MLP(d, hidden) for _ in range(experts)]


def tokens_of(settings: dict, rank: int) -> torch.Tensor:
    """Rank ``rank``'s tokens: ``randn(tokens, d_model)`` from generator seed + 1 + rank."""
    generator = torch.Generator().manual_seed(int(settings["seed"]) + 1 + rank)
    return torch.randn(int(settings["tokens"]), int(settings["d_model"]), generator=generator)


def route(router: torch.nn.Linear, x: torch.Tensor, top_k: int, capacity: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(experts [tokens, k], gates [tokens, k]): each token's top-k experts and their renormalised
    gates; a slot beyond an expert's ``capacity`` (in token order) gets expert −1 (dropped)."""
    probs = torch.softmax(router(x), dim=-1)
    gates, experts = probs.topk(top_k, dim=-1)
    gates = gates / gates.sum(-1, keepdim=True)
    taken = [0] * router.out_features
    for token in range(x.shape[0]):
        for slot in range(top_k):
            expert = int(experts[token, slot])
            if taken[expert] >= capacity:
                experts[token, slot] = -1
            else:
                taken[expert] += 1
    return experts, gates


def moe_reference(router: torch.nn.Linear, experts: list[MLP], x: torch.Tensor, top_k: int, capacity: int) -> torch.Tensor:
    """The layer on one rank, every expert local: Σ over kept slots of gate · expert(token)."""
    chosen, gates = route(router, x, top_k, capacity)
    out = torch.zeros_like(x)
    for token in range(x.shape[0]):
        for slot in range(top_k):
            expert = int(chosen[token, slot])
            if expert >= 0:
                out[token] += gates[token, slot] * experts[expert](x[token:token + 1])[0]
    return out


def _all_to_all(ctx: RankContext, out: torch.Tensor, inp: torch.Tensor, send: list[int], receive: list[int],
                row_bytes: int, buffer: str) -> None:
    """One real ``all_to_all_single`` with uneven splits, its Collective events, and the logical
    transfers it made into this rank (one per source that sent rows)."""
    n = ctx.world_size
    bytes_in, bytes_out = inp.numel() * inp.element_size(), out.numel() * out.element_size()
    fields = dict(phase=ctx.phase_index, op="all_to_all", group=GROUP, group_ranks=list(range(n)),
                  group_seq=ctx.next_group_seq(GROUP), dtype=str(inp.dtype).removeprefix("torch."),
                  count=inp.numel(), bytes_in=bytes_in, bytes_out=bytes_out)
    fields["algo_bytes"] = algo_bytes("all_to_all", n, bytes_in, bytes_out)
    clock = CallClock(ctx.device)
    ctx.emitter.emit(Collective, t_ns=clock.started_ns, edge="begin", **fields)
    dist.all_to_all_single(out, inp, output_split_sizes=receive, input_split_sizes=send)
    clock.issued()
    took = clock.read()
    ctx.emitter.emit(Collective, t_ns=took.ended_ns, edge="end", duration_ns=took.duration_ns, clock=took.clock,
                     **fields)
    offset = 0
    per_row = out.numel() // max(out.shape[0], 1) if out.dim() > 1 else 1
    for src, rows in enumerate(receive):
        if rows and src != ctx.rank:
            ctx.emitter.emit(Transfer, phase=ctx.phase_index, src=src, dst=ctx.rank, bytes=rows * row_bytes,
                             buffer=buffer, start=offset * per_row, length=rows * per_row, kind="logical")
        offset += rows


def _row_provenance(counts: list[int], per_row: int) -> list[ProvenanceRun]:
    """Rows from each source rank in turn: ``counts[s]`` rows of ``per_row`` elements from rank s."""
    runs, start = [], 0
    for src, rows in enumerate(counts):
        if rows:
            runs.append(ProvenanceRun(start, rows * per_row, [src]))
            start += rows * per_row
    return runs


def run_moe(ctx: RankContext, program: MoEProgram) -> None:
    """This rank's part of the MoE forward."""
    settings, rank, n = dict(program.settings), ctx.rank, ctx.world_size
    d = int(settings["d_model"])
    capacity = program.capacity(n)
    phases = PhaseSequence(ctx)
    phases.next("setup", f"setup: a router over {n} experts, expert r on rank r", category="params", gated=False)
    device = ctx.device
    router, experts = _layers(settings, n)
    router, experts = router.to(device), [e.to(device) for e in experts]
    expert = experts[rank]
    with ctx.tracker.category("inputs"):
        x = tokens_of(settings, rank).to(device)
    ctx.buffer("tokens", "input", "before", x, uniform_provenance(x.numel(), [rank]))
    with torch.no_grad():
        phases.next("route", f"route: top-{program.top_k} experts per token, at most {capacity} slots per expert",
                    category="activations")
        chosen, gates = route(router, x, program.top_k, capacity)
        ctx.buffer("chosen experts (−1: dropped)", "routing", "result", chosen.float(), None)
        kept = [(token, slot, int(chosen[token, slot])) for token in range(x.shape[0])
                for slot in range(program.top_k) if chosen[token, slot] >= 0]
        kept.sort(key=lambda item: item[2])
        send = [sum(1 for _, _, e in kept if e == expert_rank) for expert_rank in range(n)]
        ctx.buffer("token slots sent to each expert", "routing", "result", torch.tensor(send, dtype=torch.float32), None)

        phases.next("dispatch", "dispatch: the counts, then the tokens, by all_to_all with uneven splits",
                    category="communication")
        receive_counts = rank_tensor(device, torch.int64, shape=n)
        _all_to_all(ctx, receive_counts, rank_tensor(device, torch.int64, values=send), [1] * n, [1] * n, 8,
                    "slot counts")
        receive = [int(c) for c in receive_counts]
        outgoing = x[[token for token, _, _ in kept]] if kept else rank_tensor(device, x.dtype, shape=(0, d))
        incoming = rank_tensor(device, x.dtype, shape=(sum(receive), d))
        _all_to_all(ctx, incoming, outgoing, send, receive, d * x.element_size(), "expert input")
        ctx.buffer("expert input", "communication", "after", incoming, _row_provenance(receive, d))
        ctx.buffer("slots received from each rank", "routing", "result", torch.tensor(receive, dtype=torch.float32),
                   [ProvenanceRun(src, 1, [src]) for src in range(n)])

        phases.next("expert", "experts: each rank's MLP on the token slots it received", category="activations")
        results = expert(incoming) if sum(receive) else torch.zeros(0, d, device=device)
        ctx.buffer("expert output", "activation", "result", results, _row_provenance(receive, d))

        phases.next("combine", "combine: the results go back by all_to_all, each weighted by its gate",
                    category="communication")
        returned = rank_tensor(device, results.dtype, shape=(len(kept), d))
        _all_to_all(ctx, returned, results, receive, send, d * x.element_size(), "expert results")
        y = torch.zeros_like(x)
        for row, (token, slot, _) in enumerate(kept):
            y[token] += gates[token, slot] * returned[row]
        ctx.buffer("y", "output", "result", y, None)

    phases.next("check", "check: the same layer on one rank")
    with ctx.tracker.suspended(), torch.no_grad():
        expected = moe_reference(router, experts, x, program.top_k, capacity)
    check_close(ctx, "output equals the single-process MoE", y, expected, "the layer on one rank, same routing")
    phases.close()
