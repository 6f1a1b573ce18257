"""Training scenarios on 4 real gloo ranks: ring all-reduce, DDP, FSDP2, tensor parallelism, compare.

Each scenario runs once per test session through the CLI with --record (the ``training_runs``
fixture; DDP and FSDP through ``collviz compare ddp fsdp --record DIR``, which runs both); every
expectation is computed here, in one process, from the scenario files' settings: inputs by their
documented rules, the models from the same seed, one AdamW step on the concatenated batch
(``trained_reference``). HSDP, FSDP × TP and MoE are in test_parallelisms.py, pp in test_pp.py.
"""

from __future__ import annotations

import pytest
import torch

from collviz.runtime.wire.protocol import Buffer, Check, Collective, Freed, Memory, Phase, RunEnd, RunStart, Transfer
from collviz.runtime.wire.trace import TraceContents

from support.reference_models import ReferenceMLP
from support.scenarios import needs_ddp
from support.training import N, assert_matches, buffers, events, per_rank_gradients, phase_names, settings_of


# ------------------------------------------------------------------------------------------- ring


def test_ring_result_equals_all_reduce_of_the_inputs(training_runs):
    trace = training_runs["ring"]
    count = events(trace, RunStart)[0].options["count"]
    expected = torch.tensor([sum(r * count + i + 1 for r in range(N)) for i in range(count)], dtype=torch.float32)
    last_hop = max(i for i, name in phase_names(trace).items() if name.startswith("hop"))
    finals = {b.rank: b for b in events(trace, Buffer) if b.name == "x" and b.phase == last_hop}
    for rank in range(N):
        torch.testing.assert_close(torch.tensor(finals[rank].values, dtype=torch.float32), expected)
        torch.testing.assert_close(torch.tensor(buffers(trace, "all_reduce(x)", "result")[rank].values), expected)
    checks = events(trace, Check)
    assert sorted(c.rank for c in checks if c.ok and c.name == "matches all_reduce") == list(range(N))


def test_ring_has_2n_minus_2_hops_each_moving_one_chunk_to_the_right(training_runs):
    trace = training_runs["ring"]
    count = events(trace, RunStart)[0].options["count"]
    hops = [i for i, name in phase_names(trace).items() if name.startswith("hop")]
    assert len(hops) == 2 * (N - 1)
    transfers = [t for t in events(trace, Transfer) if t.phase in hops]
    assert len(transfers) == N * len(hops)
    for t in transfers:
        assert t.kind == "p2p" and t.bytes == count // N * 4 and t.length == count // N
        assert t.src == (t.dst - 1) % N
        assert t.phase == hops[t.hop - 1]  # hops count from 1


def test_ring_compare_shows_the_library_all_reduce_as_logical_transfers(training_runs):
    """The compare phase's dist.all_reduce is observed: every rank's data reaches every other rank."""
    trace = training_runs["ring"]
    count = events(trace, RunStart)[0].options["count"]
    compare = next(i for i, name in phase_names(trace).items() if name.startswith("compare"))
    moved = [t for t in events(trace, Transfer) if t.phase == compare]
    assert sorted((t.dst, t.src) for t in moved) == [(d, s) for d in range(N) for s in range(N) if s != d]
    assert all(t.kind == "logical" and (t.start, t.length, t.bytes) == (0, count, 4 * count) for t in moved)
    assert all(t.phase != compare for t in events(trace, Transfer) if t.kind == "p2p")


def test_ring_provenance_grows_hop_by_hop(training_runs):
    trace = training_runs["ring"]
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


def test_tp_output_equals_the_unsharded_mlp_and_shards_are_its_slices(training_runs):
    trace, s = training_runs["tp"], settings_of("tp")
    torch.manual_seed(s["seed"])
    mlp = ReferenceMLP(s["d_model"], s["hidden"])
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
    assert "✓" in training_runs["tp:stdout"]


# ------------------------------------------------------------------------------------ DDP, FSDP


def test_ddp_parameters_equal_on_all_ranks_and_the_single_process_reference(training_runs, trained_reference):
    trace = training_runs["ddp"]
    assert sorted(c.rank for c in events(trace, Check) if c.ok and c.name == "parameters identical on all ranks") == list(range(N))
    for name, expected in trained_reference["after"].items():
        for rank, buffer in buffers(trace, name, "after").items():
            assert_matches(buffer, expected, f"{name} on rank {rank}")
    assert len(buffers(trace, "blocks.0.attn.query.weight", "after")) == N
    for rank in range(N):
        assert buffers(trace, "loss", "result")[rank].values[0] == pytest.approx(trained_reference["losses"][rank], rel=1e-5)


def test_ddp_buckets_average_the_tracked_element_and_cover_every_parameter(training_runs, trained_reference):
    trace = training_runs["ddp"]
    before, after = buffers(trace, "W_query[0,0].grad", "before"), buffers(trace, "W_query[0,0].grad", "after")
    mean = sum(before[r].values[0] for r in range(N)) / N
    assert len({before[r].values[0] for r in range(N)}) == N, "different data should give different gradients"
    for rank in range(N):
        assert after[rank].values[0] == pytest.approx(mean, rel=1e-5)
        assert [run.ranks for run in after[rank].provenance] == [list(range(N))]
    sizes = [b.shape[0] for b in events(trace, Buffer, 0) if b.name.startswith("bucket ") and b.moment == "before"]
    assert len(sizes) > 1 and sum(sizes) == sum(p.numel() for p in trained_reference["before"].values())
    reduced = [c for c in events(trace, Collective, 0) if c.op == "all_reduce" and c.edge == "end"]
    assert [c.bytes_in for c in reduced] == [4 * n for n in sizes]


def test_fsdp_loss_and_updated_shards_equal_the_reference(training_runs, trained_reference):
    trace = training_runs["fsdp"]
    for rank in range(N):
        assert buffers(trace, "loss", "result")[rank].values[0] == pytest.approx(trained_reference["losses"][rank], rel=1e-5)
    for name, expected in trained_reference["after"].items():
        shards = buffers(trace, name, "after")
        assert sum(shards[r].shape[0] for r in range(N)) == expected.shape[0], name
        for rank in range(N):
            assert shards[rank].shape[1:] == list(expected.shape[1:])
            assert_matches(shards[rank], expected.chunk(N, dim=0)[rank], f"{name} shard {rank}")
    assert sum(c.ok for c in events(trace, Check)) == N


def test_fsdp_backward_shows_each_ranks_own_gradient_then_the_averaged_shard_it_keeps(training_runs):
    """At block 0's gradients phase every rank shows its own full gradient of W_query (its batch
    alone: four different gradients); after the reduce-scatter, the shard of their average it owns
    (rows r·16 … r·16+15), every element holding data of all four ranks."""
    trace = training_runs["fsdp"]
    own = per_rank_gradients("blocks.0.attn.query.weight")
    average = sum(own) / N
    names = phase_names(trace)
    before = buffers(trace, "block 0 W_query grad (this rank's)", "before")
    after = buffers(trace, "block 0 W_query grad shard (averaged)", "after")
    assert sorted(before) == sorted(after) == list(range(N))
    for rank in range(N):
        assert names[before[rank].phase] == "block 0 backward: gradients"
        assert names[after[rank].phase] == "block 0 backward: reduce-scatter"
        assert before[rank].shape == list(own[rank].shape)
        assert_matches(before[rank], own[rank], f"rank {rank}'s own gradient")
        assert [run.ranks for run in before[rank].provenance] == [[rank]]
        assert_matches(after[rank], average.chunk(N, dim=0)[rank], f"rank {rank}'s averaged shard")
        assert [run.ranks for run in after[rank].provenance] == [list(range(N))]
    assert len({b.summary.crc32 for b in before.values()}) == N, "different data, different gradients"


def _memory(trace: TraceContents, phase: int, rank: int, label: str) -> Memory:
    return next(m for m in events(trace, Memory, rank) if m.phase == phase and m.label == label)


def test_fsdp_forward_gathers_each_block_and_frees_it_after_reshard(training_runs, trained_reference):
    """Live bytes rise by the block's gathered size during its all-gather and the gathered bytes
    are freed by its reshard. FSDP2 (torch 2.13) also holds each unit's flat all-gather buffer
    until the next unit's copy-out: for blocks 1.. that swaps equal sizes; for block 0 it swaps
    the embeddings' buffer for block 0's."""
    trace, model = training_runs["fsdp"], trained_reference["model"]
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


def test_fsdp_prefetch_moves_the_next_gather_into_the_current_compute(training_runs):
    plain, early = training_runs["fsdp"], training_runs["fsdp-prefetch"]
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


def test_fsdp_gathers_and_reduce_scatters_show_logical_transfers_and_are_timed(training_runs, trained_reference):
    """Into each rank, every all-gather brings every other rank's whole shard at its place in the
    flat buffer; every reduce-scatter brings every other rank's contribution to the kept shard."""
    trace, model = training_runs["fsdp"], trained_reference["model"]
    units = [("embed", model.embed), *((f"block {i}", b) for i, b in enumerate(model.blocks)), ("head", model.head)]
    index = {name: i for i, name in phase_names(trace).items()}
    moved = events(trace, Transfer)
    for name, module in units:
        count = _shard_count(module)
        for phase_name, buffer in ((f"{name} forward: all-gather", "flat params (gathered)"),
                                   (f"{name} backward: reduce-scatter", "flat grads (reduced shard)")):
            into = sorted((t.dst, t.src, t.start, t.length, t.bytes, t.buffer, t.kind)
                          for t in moved if t.phase == index[phase_name])
            start = (lambda s: s * count) if buffer == "flat params (gathered)" else (lambda s: 0)
            assert into == [(d, s, start(s), count, 4 * count, buffer, "logical")
                            for d in range(N) for s in range(N) if s != d], phase_name
    timed = [c for c in events(trace, Collective) if c.edge == "end" and c.op in ("all_gather", "reduce_scatter")]
    assert timed and all(c.duration_ns is not None and c.duration_ns > 0 for c in timed)


def test_fsdp_cost_in_the_view_is_the_slowest_ranks_call_with_the_bus_factor(training_runs, trained_reference):
    """The viewer's cost of block 0's forward all-gather, recomputed here from the raw events."""
    from collviz.app.model import EventLog, view_at
    trace = training_runs["fsdp"]
    log = EventLog(trace.events)
    phase = {name: i for i, name in phase_names(trace).items()}["block 0 forward: all-gather"]
    cursor = log.step_ends[phase]
    view = view_at(log, cursor)
    assert view.step == phase
    (cost,) = view.costs
    ends = [c for c in events(trace, Collective) if c.phase == phase and c.edge == "end"]
    count = _shard_count(trained_reference["model"].blocks[0])
    seconds = max(c.duration_ns for c in ends) / 1e9
    assert (cost.op, cost.ranks, cost.timed, cost.reported) == ("all_gather", N, "call", N)
    assert (cost.bytes_in, cost.bytes_out, cost.algo_bytes) == (4 * count, 4 * N * count, 4 * N * count)
    assert cost.seconds == pytest.approx(seconds)
    assert cost.rate.algbw == pytest.approx(4 * N * count / seconds)
    assert cost.rate.busbw == pytest.approx(cost.rate.algbw * (N - 1) / N)


def test_ddp_buckets_and_tp_all_reduce_show_every_rank_reaching_every_other(training_runs):
    trace = training_runs["ddp"]
    for bucket in (b for b in events(trace, Buffer, 0) if b.name.startswith("bucket ") and b.moment == "before"):
        moved = sorted((t.dst, t.src, t.start, t.length) for t in events(trace, Transfer)
                       if t.phase == bucket.phase and t.buffer == bucket.name)
        assert moved == [(d, s, 0, bucket.shape[0]) for d in range(N) for s in range(N) if s != d], bucket.name
    trace, tp = training_runs["tp"], settings_of("tp")
    phase = next(i for i, name in phase_names(trace).items() if name.startswith("all-reduce"))
    moved = sorted((t.dst, t.src, t.start, t.length) for t in events(trace, Transfer) if t.phase == phase)
    assert moved == [(d, s, 0, tp["batch"] * tp["d_model"]) for d in range(N) for s in range(N) if s != d]


def test_fsdp_shows_each_units_gathered_weight_freed_by_its_reshard_only_when_it_reshards(training_runs, trained_reference):
    """Every unit's followed weight (the token embedding, each block's W_query, the head's output
    projection) is shown freed at that unit's forward reshard, with its float32 bytes."""
    model = trained_reference["model"]
    followed = {"embed": ("embed tokens", model.embed.tokens.weight), "head": ("head W_out", model.head.out.weight),
                **{f"block {i}": (f"block {i} W_query", block.attn.query.weight) for i, block in enumerate(model.blocks)}}
    for key, reshards in (("fsdp", True), ("fsdp-keep", False)):
        trace = training_runs[key]
        phases = {name: i for i, name in phase_names(trace).items()}
        freed = sorted((e.rank, e.phase, e.name, e.bytes) for e in events(trace, Freed))
        expected = sorted((r, phases[f"{unit} forward: reshard"], f"{label} (gathered)", 4 * weight.numel())
                          for r in range(N) for unit, (label, weight) in followed.items())
        assert freed == (expected if reshards else []), key


def test_fsdp_panels_show_each_units_shard_and_gathered_weight_at_its_all_gather(training_runs, trained_reference):
    """At every unit's forward all-gather each rank shows that unit's shard (rows r·k … of the
    weight, k = rows / N) and the whole weight gathered: the buffers of the call the cost pane
    describes (issue 43: the embedding's gather showed block 0's W_query)."""
    trace, before = training_runs["fsdp"], trained_reference["before"]
    names = phase_names(trace)
    for unit, label, weight in (("embed", "embed tokens", before["embed.tokens.weight"]),
                                ("block 1", "block 1 W_query", before["blocks.1.attn.query.weight"]),
                                ("head", "head W_out", before["head.out.weight"])):
        gathered = {b.rank: b for b in events(trace, Buffer) if b.name == f"{label} (gathered)"
                    and names[b.phase] == f"{unit} forward: all-gather"}
        shards = buffers(trace, f"{label} shard", "before")
        assert sorted(gathered) == list(range(N)), label
        for rank in range(N):
            assert names[shards[rank].phase] == f"{unit} forward: all-gather", label
            assert_matches(shards[rank], weight.detach().chunk(N, dim=0)[rank], f"{label} shard {rank}")
            assert_matches(gathered[rank], weight.detach(), f"{label} gathered on {rank}")


def test_fsdp_without_reshard_after_forward_skips_the_backward_gathers(training_runs):
    trace = training_runs["fsdp-keep"]
    names = phase_names(trace)
    backward = [names[c.phase] for c in events(trace, Collective, 0) if c.op == "all_gather" and "backward" in names[c.phase]]
    assert not [name for name in backward if name.startswith("block")]
    assert events(trace, RunStart)[0].options["reshard_after_forward"] is False


def test_compare_prints_the_recorded_peaks_and_the_theory(training_runs, trained_reference):
    out = training_runs["compare:stdout"]
    peaks = {name: max(m.peak_bytes for m in events(training_runs[name], Memory)) for name in ("ddp", "fsdp")}
    assert f"{peaks['ddp']:,} B / {peaks['fsdp']:,} B = {peaks['ddp'] / peaks['fsdp']:.2f}" in out
    params = sum(p.numel() for p in trained_reference["before"].values())
    assert f"{16 * params:,} B / {16 * params // N:,} B = 4.00" in out
    assert peaks["fsdp"] < peaks["ddp"]


# ------------------------------------------------------------------------------- every scenario


@pytest.mark.parametrize("key", ["ring", "tp", "ddp", "fsdp", "fsdp-prefetch", "fsdp-keep", "hsdp", "moe", "moe-2",
                                 "fsdp-tp"])
def test_every_phase_has_narration_and_the_run_is_ok(training_runs, key):
    trace = training_runs[key]
    begins = [e for e in events(trace, Phase) if e.edge == "begin"]
    assert begins and all(e.narration.strip() and "{" not in e.narration for e in begins)
    start = events(trace, RunStart)[0]
    assert {e.index for e in begins} == set(range(start.phase_count))
    assert events(trace, RunEnd)[0].status == "ok"


@pytest.mark.parametrize("key", ["ring", "tp", "ddp", "fsdp"])
async def test_trace_replays_in_the_viewer_to_the_end(training_runs, key):
    from collviz.app.app import make_app

    expected = len(training_runs[key].events)

    async def until(pilot, condition) -> None:
        for _ in range(600):  # generous: other test runs share the two cores
            if condition():
                return
            await pilot.pause(0.05)
        raise AssertionError("the viewer never got there")

    app = make_app(trace=training_runs["paths"][key])
    async with app.run_test(size=(160, 50)) as pilot:
        await until(pilot, lambda: len(app.event_log) == expected)
        await pilot.press("end")
        await until(pilot, lambda: app.cursor == len(app.event_log) == expected)
        await pilot.press("q")


STEP_SCRIPT = """
import json, sys, time
from collviz.runtime.sessions.local import LocalSession
from collviz.runtime.plan import plan_run
from collviz.runtime.wire.protocol import Gate
from collviz.runtime.scenario_files.loading import find_scenario
plan = plan_run(find_scenario(sys.argv[1]), 4, backend="gloo", step=True, timeout_s=60)
session = LocalSession(plan)
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
print(session.outcome.status if session.outcome else "unfinished", plan.program.phase_count, json.dumps(passed))
"""


@pytest.mark.parametrize("name", [pytest.param("ddp", marks=needs_ddp), "fsdp"])
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
    assert json.loads(passed) == list(range(1, int(count)))  # the setup runs behind no gate


@pytest.mark.parametrize("key", ["ddp", "fsdp"])
def test_the_untracked_timed_phase_reports_memory_only_as_it_opens(training_runs, key):
    trace = training_runs[key]
    timed = next(i for i, name in phase_names(trace).items() if "unobserved" in name)
    for rank in range(N):
        assert [m.label for m in events(trace, Memory, rank) if m.phase == timed] == ["start"]
