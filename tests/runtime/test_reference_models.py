"""The tests' own models (tests/support/reference_models.py) are the models the runtime trains: built from
the same seed, every parameter has the same name, shape and value, and both compute the same logits.

This is what lets the training tests compare the runtime against a reference that shares no code
with it: a change to the runtime's model shows up here as a named parameter or a forward that differs.
"""

from __future__ import annotations

import pytest
import torch

from collviz.runtime.programs.training.model import MLP, make_gpt, token_batch

from support.reference_models import ReferenceMLP, reference_batch, reference_gpt
from support.training import settings_of


def _same_parameters(ours: torch.nn.Module, theirs: torch.nn.Module) -> None:
    mine, runtime = dict(ours.named_parameters()), dict(theirs.named_parameters())
    assert sorted(mine) == sorted(runtime)
    for name, parameter in mine.items():
        assert parameter.shape == runtime[name].shape, name
        assert torch.equal(parameter, runtime[name]), name


@pytest.mark.parametrize("scenario", ["ddp", "fsdp", "pp", "fsdp-tp"])
def test_the_runtime_builds_the_reference_gpt_parameter_for_parameter(scenario):
    settings = settings_of(scenario)
    ours, theirs = reference_gpt(settings), make_gpt(settings)
    _same_parameters(ours, theirs)
    inputs, targets = reference_batch(settings, 1)
    runtime_inputs, runtime_targets = token_batch(settings, 1)
    assert torch.equal(inputs, runtime_inputs) and torch.equal(targets, runtime_targets)
    with torch.no_grad():
        torch.testing.assert_close(ours(inputs), theirs(inputs), rtol=0, atol=0)


def test_the_runtime_builds_the_reference_mlp_parameter_for_parameter():
    settings = settings_of("tp")
    torch.manual_seed(settings["seed"])
    ours = ReferenceMLP(settings["d_model"], settings["hidden"])
    torch.manual_seed(settings["seed"])
    theirs = MLP(settings["d_model"], settings["hidden"])
    _same_parameters(ours, theirs)
    x = torch.randn(3, settings["d_model"])
    with torch.no_grad():
        torch.testing.assert_close(ours(x), theirs(x), rtol=0, atol=0)


def test_a_changed_runtime_model_is_told_apart():
    """The comparison can fail: one weight nudged, and the parameters no longer match."""
    settings = settings_of("ddp")
    theirs = make_gpt(settings)
    with torch.no_grad():
        theirs.blocks[0].attn.key.weight[0, 0] += 1e-3
    with pytest.raises(AssertionError, match="blocks.0.attn.key.weight"):
        _same_parameters(reference_gpt(settings), theirs)
