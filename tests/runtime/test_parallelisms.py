"""HSDP, FSDP × TP and mixture-of-experts on real gloo ranks (the session's ``training_runs``):
each result against the same layer or model computed here on one process."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from collviz.runtime.wire.protocol import Check, Collective, Transfer

from support.reference_models import ReferenceGPT, ReferenceMLP
from support.training import N, assert_matches, buffers, events, per_rank_gradients, phase_names, settings_of


# ------------------------------------------------------------------------------------------- moe


def _moe_expected(s: dict, n: int) -> tuple[list[torch.Tensor], list[list[list[int]]], list[list[int]]]:
    """The layer written out here: each rank's output, its (token, slot) → expert choices (−1 for a
    slot over capacity), and how many slots it sends each expert."""
    torch.manual_seed(s["seed"])
    router = torch.nn.Linear(s["d_model"], n, bias=False)
    experts = [ReferenceMLP(s["d_model"], s["hidden"]) for _ in range(n)]
    capacity = math.ceil(s["capacity_factor"] * s["tokens"] * s["top_k"] / n)
    outputs, choices, sends = [], [], []
    with torch.no_grad():
        for rank in range(n):
            x = torch.randn(s["tokens"], s["d_model"], generator=torch.Generator().manual_seed(s["seed"] + 1 + rank))
            probs = torch.softmax(x @ router.weight.T, dim=-1)
            top = probs.topk(s["top_k"], dim=-1)
            taken, chosen, y = [0] * n, [], torch.zeros_like(x)
            for token in range(s["tokens"]):
                row = []
                weights = top.values[token] / top.values[token].sum()
                for slot in range(s["top_k"]):
                    e = int(top.indices[token, slot])
                    if taken[e] < capacity:
                        taken[e] += 1
                        row.append(e)
                        y[token] += weights[slot] * experts[e](x[token])
                    else:
                        row.append(-1)
                chosen.append(row)
            outputs.append(y)
            choices.append(chosen)
            sends.append(taken)
    return outputs, choices, sends


@pytest.mark.parametrize("key, n", [("moe", N), ("moe-2", 2)])
def test_moe_dispatches_by_uneven_all_to_all_and_equals_the_layer_on_one_rank(training_runs, key, n):
    trace, s = training_runs[key], settings_of("moe")
    outputs, choices, sends = _moe_expected(s, n)
    for rank in range(n):
        torch.testing.assert_close(torch.tensor(buffers(trace, "y", "result")[rank].values).reshape(s["tokens"], -1),
                                   outputs[rank], rtol=1e-5, atol=1e-6)
        got = buffers(trace, "chosen experts (−1: dropped)", "result")[rank].values
        assert [int(v) for v in got] == [e for row in choices[rank] for e in row]
    dispatch = next(i for i, name in phase_names(trace).items() if name.startswith("dispatch"))
    rows = {(t.src, t.dst): t.bytes // (4 * s["d_model"]) for t in events(trace, Transfer)
            if t.phase == dispatch and t.buffer == "expert input"}
    assert rows == {(src, dst): sends[src][dst] for src in range(n) for dst in range(n)
                    if src != dst and sends[src][dst]}
    calls = [c for c in events(trace, Collective, 0) if c.edge == "end"]
    assert [c.op for c in calls] == ["all_to_all"] * 3 and all(c.duration_ns for c in calls)
    assert sum(c.ok for c in events(trace, Check)) == n


def test_moe_cost_gives_each_ranks_bytes_and_time_and_whose_figures_lead(training_runs):
    """Uneven splits have no "per rank" figure: the cost of the dispatch's token all-to-all lists
    each rank's bytes in and out (the rows it sent and received, from the layer written out here)
    and time, and its headline time and S are the slowest rank's, named."""
    from collviz.app.model import EventLog, costs_at
    from collviz.app.widgets.cost import cost_lines

    trace, s = training_runs["moe"], settings_of("moe")
    _, _, sends = _moe_expected(s, N)
    log = EventLog(trace.events)
    dispatch = next(i for i, name in phase_names(trace).items() if name.startswith("dispatch"))
    tokens = costs_at(log, len(log), dispatch)[0][-1]
    row = 4 * s["d_model"]
    assert {r.rank: (r.bytes_in, r.bytes_out) for r in tokens.by_rank} == {
        rank: (row * sum(sends[rank]), row * sum(sends[src][rank] for src in range(N))) for rank in range(N)}
    assert not tokens.even
    slowest = max(tokens.by_rank, key=lambda r: r.seconds)
    assert tokens.slowest == slowest.rank and tokens.algo_bytes == slowest.algo_bytes
    text = cost_lines(tokens).plain
    assert "per rank" not in text and f"r{slowest.rank}'s" in text and "slowest" in text
    for r in tokens.by_rank:
        assert f"r{r.rank} " in text


# ------------------------------------------------------------------------------- 2-D meshes


def test_hsdp_shards_within_groups_and_all_reduces_across_them(training_runs, trained_reference):
    """2 × 2 mesh: ranks {0, 1} and {2, 3} each shard one copy; rank r holds shard r mod 2. Gathers
    never cross groups; each reduce-scatter phase also all-reduces shard copies across groups
    (r with r ± 2). After the step every shard equals the single-process model's."""
    trace, model = training_runs["hsdp"], trained_reference["model"]
    group = {0: {0, 1}, 1: {0, 1}, 2: {2, 3}, 3: {2, 3}}
    for rank in range(N):
        assert buffers(trace, "loss", "result")[rank].values[0] == pytest.approx(trained_reference["losses"][rank], rel=1e-5)
    for name, expected in trained_reference["after"].items():
        for rank, shard in buffers(trace, name, "after").items():
            assert_matches(shard, expected.chunk(2, dim=0)[rank % 2], f"{name} on rank {rank}")
    names = phase_names(trace)
    for t in events(trace, Transfer):
        phase = names[t.phase]
        if phase.endswith("all-gather"):
            assert t.src in group[t.dst] and t.buffer == "flat params (gathered)", (phase, t)
        if phase.endswith("reduce-scatter"):
            assert (t.buffer, t.src in group[t.dst]) in {("flat grads (reduced shard)", True), ("summed", False)}, (phase, t)
            assert t.buffer == "flat grads (reduced shard)" or t.src == (t.dst + 2) % N
    reduce_ops = {(c.op, tuple(c.group_ranks)) for c in events(trace, Collective, 0)
                  if c.edge == "end" and names[c.phase] == "block 0 backward: reduce-scatter"}
    assert reduce_ops == {("reduce_scatter", (0, 1)), ("all_reduce", (0, 2))}
    average = sum(per_rank_gradients("blocks.0.attn.query.weight")) / N
    for rank, kept in buffers(trace, "block 0 W_query grad shard (averaged)", "after").items():
        # averaged within the pair by the reduce-scatter, then across the pairs by the all-reduce
        assert_matches(kept, average.chunk(2, dim=0)[rank % 2], f"rank {rank}'s averaged gradient shard")
        assert [run.ranks for run in kept.provenance] == [list(range(N))]
    half = model.blocks[0].attn.query.weight.numel() // 2
    for rank, gathered in buffers(trace, "block 0 W_query (gathered)", "after").items():
        first = min(group[rank])  # rows of shard 0 from the group's first rank, shard 1 from its second
        assert [(r.start, r.length, r.ranks) for r in gathered.provenance] == [(0, half, [first]), (half, half, [first + 1])]
    assert sum(c.ok for c in events(trace, Check)) == N


def test_fsdp_tp_splits_mlps_in_pairs_shards_across_them_and_equals_one_process(training_runs):
    """2 × 2 mesh: pairs (0, 1) and (2, 3) share a batch (the data of ranks 0 and 1 of plain data
    parallelism) and split every block's MLP; after the step every parameter, put back together,
    equals the single-process model trained on those two batches."""
    trace, s = training_runs["fsdp-tp"], settings_of("fsdp-tp")
    torch.manual_seed(s["seed"])
    model = ReferenceGPT(s["vocab"], s["d_model"], s["blocks"], s["seq"])
    batches = []
    for data_rank in range(N // 2):
        tokens = torch.randint(s["vocab"], (s["batch"], s["seq"] + 1),
                               generator=torch.Generator().manual_seed(s["seed"] + 1 + data_rank))
        batches.append((tokens[:, :-1], tokens[:, 1:]))
    with torch.no_grad():
        losses = [F.cross_entropy(model(x).reshape(-1, s["vocab"]), y.reshape(-1)).item() for x, y in batches]
    optimizer = torch.optim.AdamW(model.parameters(), lr=s["lr"])
    inputs, targets = torch.cat([b[0] for b in batches]), torch.cat([b[1] for b in batches])
    F.cross_entropy(model(inputs).reshape(-1, s["vocab"]), targets.reshape(-1)).backward()
    optimizer.step()
    for rank in range(N):
        assert buffers(trace, "loss", "result")[rank].values[0] == pytest.approx(losses[rank // 2], rel=1e-5)
    for name, expected in model.named_parameters():
        got = buffers(trace, f"{name} (full)", "after")[0]
        if expected.grad.abs().max() < 1e-7:
            # attention's key bias: softmax ignores it, so its gradient is 0 up to rounding, and AdamW
            # turns that rounding (different under TP) into steps of up to lr either way
            moved = (torch.tensor(got.values).reshape(expected.shape) - expected.detach()).abs().max()
            assert moved <= 2 * s["lr"] + 1e-6, name
            continue
        assert_matches(got, expected, name)
    names = phase_names(trace)
    tp_reduces = {tuple(c.group_ranks) for c in events(trace, Collective) if c.edge == "end" and c.op == "all_reduce"
                  and names[c.phase].startswith("block 0 forward: compute")}
    assert tp_reduces == {(0, 1), (2, 3)}  # fc2's all-reduce within each pair
    gathers = {tuple(c.group_ranks) for c in events(trace, Collective) if c.edge == "end" and c.op == "all_gather"
               and names[c.phase] == "block 0 forward: all-gather"}
    assert gathers == {(0, 2), (1, 3)}  # FSDP across the pairs
    assert sum(c.ok for c in events(trace, Check)) == N
