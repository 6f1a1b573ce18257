"""Each training scenario's memory, category by category, against sizes worked out here from the
scenario files and the models written out in the tests (reference_models.py) — never from the runtime.

float32 parameters take 4 bytes each; AdamW keeps two float32 moments per parameter and a float32
step count per parameter tensor; token ids are int64 (8 bytes).
"""

from __future__ import annotations

import pytest
import torch

from collviz.runtime.wire.protocol import Memory
from collviz.runtime.wire.trace import TraceContents, read_trace

from support.recordings import ScenarioRuns
from support.reference_models import ReferenceMLP, reference_gpt
from support.training import N, phase_names, settings_of


FLOAT, TOKEN = 4, 8


@pytest.fixture(scope="module")
def runs(scenario_runs: ScenarioRuns) -> dict[str, TraceContents]:
    """tp, moe and pp on 4 gloo ranks, recorded once per session (ddp's run is the one ``compare
    ddp fsdp`` records for ``training_runs``: the same plan as a plain run's)."""
    return {name: read_trace(scenario_runs(name).path) for name in ("tp", "moe", "pp")}


def _at_end(trace: TraceContents, starts_with: str) -> dict[int, dict[str, int]]:
    """Rank → its categories when the phase whose name starts with ``starts_with`` ended."""
    [phase] = [i for i, name in phase_names(trace).items() if name.startswith(starts_with)]
    return {e.rank: e.by_category for e in trace.events if isinstance(e, Memory) and e.phase == phase and e.label == "end"}


def _adamw(parameters: list[torch.Tensor]) -> int:
    return sum(2 * FLOAT * p.numel() + FLOAT for p in parameters)


def test_ddp_keeps_whole_parameters_and_gradient_buckets_and_adamw_state_on_every_rank(training_runs):
    s = settings_of("ddp")
    parameters = list(reference_gpt(s).parameters())
    weights = FLOAT * sum(p.numel() for p in parameters)
    tokens = TOKEN * s["batch"] * (s["seq"] + 1)  # inputs and targets are views of one batch of seq + 1 ids
    setup = _at_end(training_runs["ddp"], "setup")
    # gradient_as_bucket_view: the gradients live in DDP's buckets, one float per parameter
    assert setup == {r: {"params": weights, "grads": weights, "inputs": tokens} for r in range(N)}
    optimizer = _at_end(training_runs["ddp"], "AdamW step")
    assert optimizer == {r: {"params": weights, "grads": weights, "inputs": tokens, "optimizer": _adamw(parameters)}
                         for r in range(N)}


def test_pp_keeps_only_its_own_stages_parameters_gradients_and_adamw_state(runs):
    s = settings_of("pp")
    model = reference_gpt(s)
    blocks = list(model.blocks)
    # 4 blocks on 4 stages: the embedding goes with the first block, the head with the last
    stages = [[model.embed, blocks[0]], [blocks[1]], [blocks[2]], [blocks[3], model.head]]
    tokens = 2 * TOKEN * s["batch"] * s["seq"]  # the batch's inputs and its targets
    setup, optimizer = _at_end(runs["pp"], "setup"), _at_end(runs["pp"], "AdamW step")
    for rank, modules in enumerate(stages):
        parameters = [p for module in modules for p in module.parameters()]
        weights = FLOAT * sum(p.numel() for p in parameters)
        assert setup[rank] == {"params": weights, "grads": weights, "inputs": tokens}, rank
        assert optimizer[rank]["optimizer"] == _adamw(parameters), rank
        assert (optimizer[rank]["params"], optimizer[rank]["grads"]) == (weights, weights), rank


def test_moe_keeps_the_router_and_every_expert_and_its_own_tokens(runs):
    s = settings_of("moe")
    d, hidden = s["d_model"], s["hidden"]
    expert = sum(p.numel() for p in ReferenceMLP(d, hidden).parameters())
    router = d * N  # no bias
    setup = _at_end(runs["moe"], "setup")
    assert setup == {r: {"params": FLOAT * (router + N * expert), "inputs": FLOAT * s["tokens"] * d} for r in range(N)}


def test_tp_keeps_its_shards_and_counts_the_hidden_slice_as_activations_and_the_sum_as_communication(runs):
    s = settings_of("tp")
    d, part = s["d_model"], s["hidden"] // N
    shards = part * d + part + d * part + d  # W1's rows, b1's slice, W2's columns, all of b2 (replicated)
    x = s["batch"] * d  # the input every rank holds
    setup = _at_end(runs["tp"], "setup")
    # and the device mesh's table of the N ranks (int32 in torch 2.13; int64 allowed)
    assert {r: c["params"] - FLOAT * (shards + x) for r, c in setup.items()} in (
        {r: 4 * N for r in range(N)}, {r: 8 * N for r in range(N)})
    fc1 = _at_end(runs["tp"], "fc1")
    assert {r: c["activations"] for r, c in fc1.items()} == {r: FLOAT * s["batch"] * s["hidden"] // N for r in range(N)}
    summed = _at_end(runs["tp"], "all-reduce")
    assert {r: c["communication"] for r, c in summed.items()} == {r: FLOAT * s["batch"] * s["d_model"] for r in range(N)}
