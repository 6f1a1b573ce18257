"""Training scenarios on 4 real gloo ranks: ring all-reduce, DDP, FSDP2, tensor parallelism, compare.

Each scenario runs once per module through the CLI with --record (DDP and FSDP through
``collviz compare ddp fsdp --record DIR``, which runs both); every expectation is computed here,
in one process, from the scenario files' settings: inputs by their documented rules, the models
from the same seed, one AdamW step on the concatenated batch.
"""

from __future__ import annotations

import math
import re
import tomllib
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from collviz.app.cli import main
from collviz.runtime.wire.protocol import Buffer, Check, Collective, Freed, Memory, Phase, RunEnd, RunStart, Transfer
from collviz.runtime.scenarios.loading import ScenarioError, load_scenario
from collviz.runtime.wire.trace import TraceContents, read_trace
from collviz.runtime.scenarios.training.model import MLP, TinyGPT
from conftest import run_cli

N = 4
SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"


def settings_of(name: str) -> dict:
    """The [settings] table of a builtin scenario file, read directly."""
    return tomllib.loads((SCENARIOS / f"{name}.toml").read_text())["settings"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, TraceContents | str]:
    """ring, tp, fsdp --prefetch, fsdp --no-reshard-after-forward, hsdp, moe (4 and 2 ranks), fsdp-tp,
    and compare ddp fsdp; once each."""
    folder = tmp_path_factory.mktemp("training")
    traces: dict = {}
    for key, args in {
        "ring": ["ring-all-reduce"],
        "tp": ["tp"],
        "fsdp-prefetch": ["fsdp", "--prefetch"],
        "fsdp-keep": ["fsdp", "--no-reshard-after-forward"],
        "hsdp": ["hsdp"],
        "moe": ["moe"],
        "moe-2": ["moe", "--gpus", "2"],
        "fsdp-tp": ["fsdp-tp"],
    }.items():
        world = [] if "--gpus" in args else ["--gpus", str(N)]
        result = run_cli(*args, *world, "--backend", "gloo", "--headless", "--record", str(folder / f"{key}.cvz"),
                         timeout=240)
        assert result.returncode == 0, f"{key} failed:\n{result.stdout[-3000:]}\n{result.stderr}"
        traces[key] = read_trace(folder / f"{key}.cvz")
        traces[f"{key}:stdout"] = result.stdout
    result = run_cli("compare", "ddp", "fsdp", "--gpus", str(N), "--backend", "gloo", "--record", str(folder), timeout=300)
    assert result.returncode == 0, f"compare failed:\n{result.stdout}\n{result.stderr}"
    traces["compare:stdout"] = result.stdout
    for name in ("ddp", "fsdp"):
        traces[name] = read_trace(folder / f"{name}.cvz")
    traces["paths"] = {key: folder / f"{key}.cvz" for key in ("ring", "tp", "ddp", "fsdp")}
    return traces


def events(trace: TraceContents, kind: type, rank: int | None = None) -> list:
    return [e for e in trace.events if isinstance(e, kind) and (rank is None or e.rank == rank)]


def phase_names(trace: TraceContents) -> dict[int, str]:
    return {e.index: e.name for e in events(trace, Phase, 0) if e.edge == "begin"}


def buffers(trace: TraceContents, name: str, moment: str) -> dict[int, Buffer]:
    return {b.rank: b for b in events(trace, Buffer) if b.name == name and b.moment == moment}


# ------------------------------------------------------------------------------------------- ring


def test_ring_result_equals_all_reduce_of_the_inputs(runs):
    trace = runs["ring"]
    count = events(trace, RunStart)[0].options["count"]
    expected = torch.tensor([sum(r * count + i + 1 for r in range(N)) for i in range(count)], dtype=torch.float32)
    last_hop = max(i for i, name in phase_names(trace).items() if name.startswith("hop"))
    finals = {b.rank: b for b in events(trace, Buffer) if b.name == "x" and b.phase == last_hop}
    for rank in range(N):
        torch.testing.assert_close(torch.tensor(finals[rank].values, dtype=torch.float32), expected)
        torch.testing.assert_close(torch.tensor(buffers(trace, "all_reduce(x)", "result")[rank].values), expected)
    checks = events(trace, Check)
    assert sorted(c.rank for c in checks if c.ok and c.name == "matches all_reduce") == list(range(N))


def test_ring_has_2n_minus_2_hops_each_moving_one_chunk_to_the_right(runs):
    trace = runs["ring"]
    count = events(trace, RunStart)[0].options["count"]
    hops = [i for i, name in phase_names(trace).items() if name.startswith("hop")]
    assert len(hops) == 2 * (N - 1)
    transfers = [t for t in events(trace, Transfer) if t.phase in hops]
    assert len(transfers) == N * len(hops)
    for t in transfers:
        assert t.kind == "p2p" and t.bytes == count // N * 4 and t.length == count // N
        assert t.src == (t.dst - 1) % N
        assert t.phase == hops[t.step - 1]  # hops count from 1


def test_ring_compare_shows_the_library_all_reduce_as_logical_transfers(runs):
    """The compare phase's dist.all_reduce is observed: every rank's data reaches every other rank."""
    trace = runs["ring"]
    count = events(trace, RunStart)[0].options["count"]
    compare = next(i for i, name in phase_names(trace).items() if name.startswith("compare"))
    moved = [t for t in events(trace, Transfer) if t.phase == compare]
    assert sorted((t.dst, t.src) for t in moved) == [(d, s) for d in range(N) for s in range(N) if s != d]
    assert all(t.kind == "logical" and (t.start, t.length, t.bytes) == (0, count, 4 * count) for t in moved)
    assert all(t.phase != compare for t in events(trace, Transfer) if t.kind == "p2p")


def test_ring_provenance_grows_hop_by_hop(runs):
    trace = runs["ring"]
    hops = sorted(i for i, name in phase_names(trace).items() if name.startswith("hop"))
    for step, phase in enumerate(hops):
        for b in (b for b in events(trace, Buffer) if b.name == "x" and b.phase == phase):
            widest = max(len(run.ranks) for run in b.provenance)
            assert widest == min(step + 2, N), f"hop {step + 1} rank {b.rank}: {b.provenance}"
            if step >= N - 2:  # after the reduce-scatter half, every rank has at least one complete chunk
                assert any(run.ranks == list(range(N)) for run in b.provenance)
    for b in (b for b in events(trace, Buffer) if b.name == "x" and b.phase == hops[-1]):
        assert [run.ranks for run in b.provenance] == [list(range(N))]


# -------------------------------------------------------------------------------------------- tp


def test_tp_output_equals_the_unsharded_mlp_and_shards_are_its_slices(runs):
    trace, s = runs["tp"], settings_of("tp")
    torch.manual_seed(s["seed"])
    mlp = MLP(s["d_model"], s["hidden"])
    x = torch.randn(s["batch"], s["d_model"], generator=torch.Generator().manual_seed(s["seed"] + 1))
    with torch.no_grad():
        expected = mlp(x)
    outputs = buffers(trace, "y", "after")
    partials = buffers(trace, "partial y", "result")
    for rank in range(N):
        torch.testing.assert_close(torch.tensor(outputs[rank].values).reshape(expected.shape), expected)
        w1 = torch.tensor(buffers(trace, "W1 shard", "before")[rank].values)
        w2 = torch.tensor(buffers(trace, "W2 shard", "before")[rank].values)
        torch.testing.assert_close(w1, mlp.fc1.weight.detach().chunk(N, dim=0)[rank].reshape(-1))
        torch.testing.assert_close(w2, mlp.fc2.weight.detach().chunk(N, dim=1)[rank].reshape(-1))
    total = sum(torch.tensor(partials[r].values) for r in range(N))
    torch.testing.assert_close(total.reshape(expected.shape), expected)
    # each partial recomputes from the screen: its gelu(h) shard · its W2 shardᵀ + the b2/N it shows
    share = f"b2/{N} (in each partial)"
    for rank in range(N):
        g = torch.tensor(buffers(trace, "gelu(h) shard", "result")[rank].values).reshape(s["batch"], -1)
        w2 = torch.tensor(buffers(trace, "W2 shard", "before")[rank].values).reshape(s["d_model"], -1)
        b2 = torch.tensor(buffers(trace, share, "result")[rank].values)
        torch.testing.assert_close(b2, mlp.fc2.bias.detach() / N)
        torch.testing.assert_close(torch.tensor(partials[rank].values).reshape(expected.shape), g @ w2.T + b2)
    assert [c.op for c in events(trace, Collective, 0) if c.edge == "end" and c.phase == 4] == ["all_reduce"]
    assert sum(c.ok for c in events(trace, Check)) == N
    assert "✓" in runs["tp:stdout"]


# ------------------------------------------------------------------------------------------- moe


def _moe_expected(s: dict, n: int) -> tuple[list[torch.Tensor], list[list[list[int]]], list[list[int]]]:
    """The layer written out here: each rank's output, its (token, slot) → expert choices (−1 for a
    slot over capacity), and how many slots it sends each expert."""
    torch.manual_seed(s["seed"])
    router = torch.nn.Linear(s["d_model"], n, bias=False)
    experts = [MLP(s["d_model"], s["hidden"]) for _ in range(n)]
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
def test_moe_dispatches_by_uneven_all_to_all_and_equals_the_layer_on_one_rank(runs, key, n):
    trace, s = runs[key], settings_of("moe")
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


# ------------------------------------------------------------------------------------ DDP, FSDP


@pytest.fixture(scope="module")
def reference() -> dict:
    """The tiny GPT after one AdamW step on all ranks' batches at once, and each rank's first loss."""
    s = settings_of("ddp")
    assert all(settings_of("fsdp")[k] == s[k] for k in ("seed", "vocab", "d_model", "blocks", "seq", "batch", "lr"))
    torch.manual_seed(s["seed"])
    model = TinyGPT(s["vocab"], s["d_model"], s["blocks"], s["seq"])
    batches = []
    for rank in range(N):
        tokens = torch.randint(s["vocab"], (s["batch"], s["seq"] + 1), generator=torch.Generator().manual_seed(s["seed"] + 1 + rank))
        batches.append((tokens[:, :-1], tokens[:, 1:]))

    def loss_of(inputs, targets):
        return F.cross_entropy(model(inputs).reshape(-1, s["vocab"]), targets.reshape(-1))

    with torch.no_grad():
        losses = [loss_of(*batch).item() for batch in batches]
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    optimizer = torch.optim.AdamW(model.parameters(), lr=s["lr"])
    loss_of(torch.cat([b[0] for b in batches]), torch.cat([b[1] for b in batches])).backward()
    optimizer.step()
    return {"losses": losses, "before": before, "after": dict(model.named_parameters()), "model": model}


def assert_matches(buffer: Buffer, expected: torch.Tensor, what: str) -> None:
    """Values when the buffer ships them, else its min/max/mean."""
    expected = expected.detach().reshape(-1).double()
    if buffer.values is not None:
        torch.testing.assert_close(torch.tensor(buffer.values, dtype=torch.float64), expected, rtol=1e-4, atol=1e-5, msg=what)
    else:
        got = torch.tensor([buffer.summary.min, buffer.summary.max, buffer.summary.mean], dtype=torch.float64)
        want = torch.stack([expected.min(), expected.max(), expected.mean()])
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5, msg=what)


def test_ddp_parameters_equal_on_all_ranks_and_the_single_process_reference(runs, reference):
    trace = runs["ddp"]
    assert sorted(c.rank for c in events(trace, Check) if c.ok and c.name == "parameters identical on all ranks") == list(range(N))
    for name, expected in reference["after"].items():
        for rank, buffer in buffers(trace, name, "after").items():
            assert_matches(buffer, expected, f"{name} on rank {rank}")
    assert len(buffers(trace, "blocks.0.attn.query.weight", "after")) == N
    for rank in range(N):
        assert buffers(trace, "loss", "result")[rank].values[0] == pytest.approx(reference["losses"][rank], rel=1e-5)


def test_ddp_buckets_average_the_tracked_element_and_cover_every_parameter(runs, reference):
    trace = runs["ddp"]
    before, after = buffers(trace, "W_query[0,0].grad", "before"), buffers(trace, "W_query[0,0].grad", "after")
    mean = sum(before[r].values[0] for r in range(N)) / N
    assert len({before[r].values[0] for r in range(N)}) == N, "different data should give different gradients"
    for rank in range(N):
        assert after[rank].values[0] == pytest.approx(mean, rel=1e-5)
        assert [run.ranks for run in after[rank].provenance] == [list(range(N))]
    sizes = [b.shape[0] for b in events(trace, Buffer, 0) if b.name.startswith("bucket ") and b.moment == "before"]
    assert len(sizes) > 1 and sum(sizes) == sum(p.numel() for p in reference["before"].values())
    reduced = [c for c in events(trace, Collective, 0) if c.op == "all_reduce" and c.edge == "end"]
    assert [c.bytes_in for c in reduced] == [4 * n for n in sizes]


def test_fsdp_loss_and_updated_shards_equal_the_reference(runs, reference):
    trace = runs["fsdp"]
    for rank in range(N):
        assert buffers(trace, "loss", "result")[rank].values[0] == pytest.approx(reference["losses"][rank], rel=1e-5)
    for name, expected in reference["after"].items():
        shards = buffers(trace, name, "after")
        assert sum(shards[r].shape[0] for r in range(N)) == expected.shape[0], name
        for rank in range(N):
            assert shards[rank].shape[1:] == list(expected.shape[1:])
            assert_matches(shards[rank], expected.chunk(N, dim=0)[rank], f"{name} shard {rank}")
    assert sum(c.ok for c in events(trace, Check)) == N


def _memory(trace: TraceContents, phase: int, rank: int, label: str) -> Memory:
    return next(m for m in events(trace, Memory, rank) if m.phase == phase and m.label == label)


def test_fsdp_forward_gathers_each_block_and_frees_it_after_reshard(runs, reference):
    """Live bytes rise by the block's gathered size during its all-gather and the gathered bytes
    are freed by its reshard. FSDP2 (torch 2.13) also holds each unit's flat all-gather buffer
    until the next unit's copy-out: for blocks 1.. that swaps equal sizes; for block 0 it swaps
    the embeddings' buffer for block 0's."""
    trace, model = runs["fsdp"], reference["model"]
    size = {name: 4 * sum(p.numel() for p in module.parameters())
            for name, module in [("embed", model.embed), *((f"block {i}", b) for i, b in enumerate(model.blocks))]}
    index = {name: i for i, name in phase_names(trace).items()}
    for rank in range(N):
        for b in range(len(model.blocks)):
            gathered, previous = size[f"block {b}"], size["embed" if b == 0 else f"block {b - 1}"]
            start = _memory(trace, index[f"block {b} forward: all-gather"], rank, "start")
            end = _memory(trace, index[f"block {b} forward: all-gather"], rank, "end")
            resharded = _memory(trace, index[f"block {b} forward: reshard"], rank, "end")
            assert end.live_bytes - start.live_bytes == 2 * gathered - previous, f"rank {rank} block {b}"
            comm = lambda m: m.by_category.get("communication", 0)  # noqa: E731
            assert comm(resharded) - comm(start) == gathered - previous, f"rank {rank} block {b}"
            if b:
                assert end.live_bytes - start.live_bytes == gathered


def test_fsdp_prefetch_moves_the_next_gather_into_the_current_compute(runs):
    plain, early = runs["fsdp"], runs["fsdp-prefetch"]
    for trace, prefetch in ((plain, False), (early, True)):
        names = phase_names(trace)
        gathers = [names[c.phase] for c in events(trace, Collective, 0) if c.op == "all_gather" and c.edge == "begin"]
        forward = [g for g in gathers if "forward" in g]
        if prefetch:
            assert "block 0 forward: compute" in forward and "block 1 forward: all-gather" not in forward
        else:
            assert all(g.endswith("all-gather") for g in gathers)
            assert len(forward) == len(gathers) // 2 == 6
    assert events(early, RunStart)[0].options["prefetch"] is True


def _shard_count(module: torch.nn.Module) -> int:
    """Elements of one rank's FSDP2 shard of ``module``: each parameter's dim 0 padded to a
    multiple of N, split in N."""
    total = 0
    for p in module.parameters():
        rows = -(-p.shape[0] // N)
        total += rows * (p.numel() // p.shape[0])
    return total


def test_fsdp_gathers_and_reduce_scatters_show_logical_transfers_and_are_timed(runs, reference):
    """Into each rank, every all-gather brings every other rank's whole shard at its place in the
    flat buffer; every reduce-scatter brings every other rank's contribution to the kept shard."""
    trace, model = runs["fsdp"], reference["model"]
    units = [("embed", model.embed), *((f"block {i}", b) for i, b in enumerate(model.blocks)), ("head", model.head)]
    index = {name: i for i, name in phase_names(trace).items()}
    moved = events(trace, Transfer)
    for name, module in units:
        count = _shard_count(module)
        for phase_name, buffer in ((f"{name} forward: all-gather", "gathered"),
                                   (f"{name} backward: reduce-scatter", "reduced_shard")):
            into = sorted((t.dst, t.src, t.start, t.length, t.bytes, t.buffer, t.kind)
                          for t in moved if t.phase == index[phase_name])
            start = (lambda s: s * count) if buffer == "gathered" else (lambda s: 0)
            assert into == [(d, s, start(s), count, 4 * count, buffer, "logical")
                            for d in range(N) for s in range(N) if s != d], phase_name
    timed = [c for c in events(trace, Collective) if c.edge == "end" and c.op in ("all_gather", "reduce_scatter")]
    assert timed and all(c.duration_ns is not None and c.duration_ns > 0 for c in timed)


def test_fsdp_cost_in_the_view_is_the_slowest_ranks_call_with_the_bus_factor(runs, reference):
    """The viewer's cost of block 0's forward all-gather, recomputed here from the raw events."""
    from collviz.app.model import EventLog, view_at
    trace = runs["fsdp"]
    log = EventLog(trace.events)
    phase = {name: i for i, name in phase_names(trace).items()}["block 0 forward: all-gather"]
    cursor = log.step_ends[phase]
    view = view_at(log, cursor)
    assert view.step == phase
    (cost,) = view.costs
    ends = [c for c in events(trace, Collective) if c.phase == phase and c.edge == "end"]
    count = _shard_count(reference["model"].blocks[0])
    seconds = max(c.duration_ns for c in ends) / 1e9
    assert (cost.op, cost.ranks, cost.timed, cost.reported) == ("all_gather", N, "call", N)
    assert (cost.bytes_in, cost.bytes_out, cost.algo_bytes) == (4 * count, 4 * N * count, 4 * N * count)
    assert cost.seconds == pytest.approx(seconds)
    assert cost.rate.algbw == pytest.approx(4 * N * count / seconds)
    assert cost.rate.busbw == pytest.approx(cost.rate.algbw * (N - 1) / N)


def test_ddp_buckets_and_tp_all_reduce_show_every_rank_reaching_every_other(runs):
    trace = runs["ddp"]
    for bucket in (b for b in events(trace, Buffer, 0) if b.name.startswith("bucket ") and b.moment == "before"):
        moved = sorted((t.dst, t.src, t.start, t.length) for t in events(trace, Transfer)
                       if t.phase == bucket.phase and t.buffer == bucket.name)
        assert moved == [(d, s, 0, bucket.shape[0]) for d in range(N) for s in range(N) if s != d], bucket.name
    trace, tp = runs["tp"], settings_of("tp")
    phase = next(i for i, name in phase_names(trace).items() if name.startswith("all-reduce"))
    moved = sorted((t.dst, t.src, t.start, t.length) for t in events(trace, Transfer) if t.phase == phase)
    assert moved == [(d, s, 0, tp["batch"] * tp["d_model"]) for d in range(N) for s in range(N) if s != d]


def test_fsdp_shows_block_0s_gathered_weight_freed_by_its_reshard_only_when_it_reshards(runs, reference):
    weight = reference["model"].blocks[0].attn.query.weight
    for key, reshards in (("fsdp", True), ("fsdp-keep", False)):
        trace = runs[key]
        reshard = {name: i for i, name in phase_names(trace).items()}["block 0 forward: reshard"]
        freed = sorted((e.rank, e.phase, e.name, e.bytes) for e in events(trace, Freed))
        expected = [(r, reshard, "block 0 W_query (gathered)", 4 * weight.numel()) for r in range(N)]
        assert freed == (expected if reshards else []), key


def test_hsdp_shards_within_groups_and_all_reduces_across_them(runs, reference):
    """2 × 2 mesh: ranks {0, 1} and {2, 3} each shard one copy; rank r holds shard r mod 2. Gathers
    never cross groups; each reduce-scatter phase also all-reduces shard copies across groups
    (r with r ± 2). After the step every shard equals the single-process model's."""
    trace, model = runs["hsdp"], reference["model"]
    group = {0: {0, 1}, 1: {0, 1}, 2: {2, 3}, 3: {2, 3}}
    for rank in range(N):
        assert buffers(trace, "loss", "result")[rank].values[0] == pytest.approx(reference["losses"][rank], rel=1e-5)
    for name, expected in reference["after"].items():
        for rank, shard in buffers(trace, name, "after").items():
            assert_matches(shard, expected.chunk(2, dim=0)[rank % 2], f"{name} on rank {rank}")
    names = phase_names(trace)
    for t in events(trace, Transfer):
        phase = names[t.phase]
        if phase.endswith("all-gather"):
            assert t.src in group[t.dst] and t.buffer == "gathered", (phase, t)
        if phase.endswith("reduce-scatter"):
            assert (t.buffer, t.src in group[t.dst]) in {("reduced_shard", True), ("summed", False)}, (phase, t)
            assert t.buffer == "reduced_shard" or t.src == (t.dst + 2) % N
    reduce_ops = {(c.op, tuple(c.group_ranks)) for c in events(trace, Collective, 0)
                  if c.edge == "end" and names[c.phase] == "block 0 backward: reduce-scatter"}
    assert reduce_ops == {("reduce_scatter", (0, 1)), ("all_reduce", (0, 2))}
    half = model.blocks[0].attn.query.weight.numel() // 2
    for rank, gathered in buffers(trace, "block 0 W_query (gathered)", "after").items():
        first = min(group[rank])  # rows of shard 0 from the group's first rank, shard 1 from its second
        assert [(r.start, r.length, r.ranks) for r in gathered.provenance] == [(0, half, [first]), (half, half, [first + 1])]
    assert sum(c.ok for c in events(trace, Check)) == N


def test_fsdp_tp_splits_mlps_in_pairs_shards_across_them_and_equals_one_process(runs):
    """2 × 2 mesh: pairs (0, 1) and (2, 3) share a batch (the data of ranks 0 and 1 of plain data
    parallelism) and split every block's MLP; after the step every parameter, put back together,
    equals the single-process model trained on those two batches."""
    trace, s = runs["fsdp-tp"], settings_of("fsdp-tp")
    torch.manual_seed(s["seed"])
    model = TinyGPT(s["vocab"], s["d_model"], s["blocks"], s["seq"])
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


def test_fsdp_without_reshard_after_forward_skips_the_backward_gathers(runs):
    trace = runs["fsdp-keep"]
    names = phase_names(trace)
    backward = [names[c.phase] for c in events(trace, Collective, 0) if c.op == "all_gather" and "backward" in names[c.phase]]
    assert not [name for name in backward if name.startswith("block")]
    assert events(trace, RunStart)[0].options["reshard_after_forward"] is False


def test_compare_prints_the_recorded_peaks_and_the_theory(runs, reference):
    out = runs["compare:stdout"]
    peaks = {name: max(m.peak_bytes for m in events(runs[name], Memory)) for name in ("ddp", "fsdp")}
    assert f"{peaks['ddp']:,} B / {peaks['fsdp']:,} B = {peaks['ddp'] / peaks['fsdp']:.2f}" in out
    params = sum(p.numel() for p in reference["before"].values())
    assert f"{16 * params:,} B / {16 * params // N:,} B = 4.00" in out
    assert peaks["fsdp"] < peaks["ddp"]


# ------------------------------------------------------------------------------- every scenario


@pytest.mark.parametrize("key", ["ring", "tp", "ddp", "fsdp", "fsdp-prefetch", "fsdp-keep", "hsdp", "moe", "moe-2",
                                 "fsdp-tp"])
def test_every_phase_has_narration_and_the_run_is_ok(runs, key):
    trace = runs[key]
    begins = [e for e in events(trace, Phase) if e.edge == "begin"]
    assert begins and all(e.narration.strip() and "{" not in e.narration for e in begins)
    start = events(trace, RunStart)[0]
    assert {e.index for e in begins} == set(range(start.phase_count))
    assert events(trace, RunEnd)[0].status == "ok"


@pytest.mark.parametrize("key", ["ring", "tp", "ddp", "fsdp"])
async def test_trace_replays_in_the_viewer_to_the_end(runs, key):
    from collviz.app.app import make_app

    expected = len(runs[key].events)

    async def until(pilot, condition) -> None:
        for _ in range(600):  # generous: other test runs share the two cores
            if condition():
                return
            await pilot.pause(0.05)
        raise AssertionError("the viewer never got there")

    app = make_app(trace=runs["paths"][key])
    async with app.run_test(size=(160, 50)) as pilot:
        await until(pilot, lambda: len(app.event_log) == expected)
        await pilot.press("end")
        await until(pilot, lambda: app.cursor == len(app.event_log) == expected)
        await pilot.press("q")


STEP_SCRIPT = """
import json, sys, time
from collviz.runtime.launch import RunPlan, Session, choose_backend
from collviz.runtime.scenarios.program import RunOptions
from collviz.runtime.scenarios.registry import build_program
from collviz.runtime.wire.protocol import Gate
from collviz.runtime.scenarios.loading import find_scenario
scenario = find_scenario(sys.argv[1])
program = build_program(scenario, 4, RunOptions())
session = Session(RunPlan(scenario=scenario, world_size=4, backend=choose_backend("gloo", 4), program=program,
                          step=True, timeout_s=60))
session.start()
released, passed, deadline = -1, [], time.monotonic() + 240
while not session.finished and time.monotonic() < deadline:
    for event in session.poll(0.1):
        if isinstance(event, Gate) and event.edge == "pass" and event.rank == 0:
            passed.append(event.index)
    waiting = session.waiting_ranks
    if len(waiting) == 4 and len(set(waiting.values())) == 1 and min(waiting.values()) > released:
        released = min(waiting.values())
        session.release(released)
print(session.outcome.status if session.outcome else "unfinished", program.phase_count, json.dumps(passed))
"""


@pytest.mark.parametrize("name", ["ddp", "fsdp"])
def test_step_mode_gates_every_hook_opened_phase_on_all_ranks_together(name):
    """Phases opened from DDP's comm hook and FSDP2's parameter groups are gates: all 4 ranks
    reach gate k together, and the run finishes once every gate is released in order."""
    import json
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-c", STEP_SCRIPT, name], capture_output=True, text=True, timeout=300,
                            stdin=subprocess.DEVNULL)
    status, count, passed = result.stdout.strip().split(" ", 2)
    assert status == "ok", result.stderr[-2000:]
    assert json.loads(passed) == list(range(int(count)))


# -------------------------------------------------------------------------------- command line


@pytest.mark.parametrize("argv, words", [
    (["fsdp", "--root", "1"], "--root does not apply to fsdp"),
    (["tp", "--prefetch"], "--prefetch/--no-prefetch does not apply to tp"),
    (["all-reduce", "--no-reshard-after-forward"], "does not apply to all-reduce"),
    (["ring-all-reduce", "--size", "6"], "multiple of 4"),
    (["ring-all-reduce", "--gpus", "3"], "multiple of 3"),
    (["compare", "ddp", "tp"], "compare runs ddp, fsdp, hsdp, fsdp-tp, pp scenarios, not tp"),
    (["compare"], "two scenarios"),
])
def test_options_that_do_not_apply_are_one_line_errors(argv, words, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("collviz: error: ") and words in err and err.count("\n") == 1


def test_compare_estimates_show_formula_and_numbers(capsys):
    assert main(["compare", "--params", "7e9", "--gpus", "8"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("ESTIMATES (analytic, nothing was run)")
    assert f"({16 * 7 * 10**9:,} B)   = 16·P = 16 × 7e+09 B" in out
    assert f"({16 * 7 * 10**9 // 8:,} B)   = 16·P/N = 16 × 7e+09 / 8 B" in out
    assert "DDP / FSDP ≈ 8.00" in out


def test_training_scenario_errors_name_file_key_and_problem(tmp_path):
    text = (SCENARIOS / "tp.toml").read_text()
    bad = tmp_path / "tp.toml"
    bad.write_text(text.replace("d_model = 8", "d_modle = 8"))
    with pytest.raises(ScenarioError, match=r"tp.toml: key 'settings.d_modle': unknown key \(probably a typo for 'd_model'\)"):
        load_scenario(bad)
    bad.write_text(re.sub(r'^fc1 = ".*"$', 'fc1 = "uses {nothing}"', text, flags=re.M))
    with pytest.raises(ScenarioError, match=r"key 'narration.fc1': unknown placeholder \{nothing\}"):
        load_scenario(bad)
    bad.write_text(text.replace("hidden = 16", "hidden = 0"))
    with pytest.raises(ScenarioError, match=r"key 'settings.hidden': 0 is less than 1"):
        load_scenario(bad)


@pytest.mark.parametrize("key", ["ddp", "fsdp"])
def test_the_untracked_timed_phase_reports_memory_only_as_it_opens(runs, key):
    trace = runs[key]
    timed = next(i for i, name in phase_names(trace).items() if "unobserved" in name)
    for rank in range(N):
        assert [m.label for m in events(trace, Memory, rank) if m.phase == timed] == ["start"]
