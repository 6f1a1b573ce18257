"""The training scenarios' own checks (runtime/programs/training/common.py) can fail: given a wrong
value they emit a failed Check naming it. The training tests count passing checks; these show that
a pass is not the only thing a check can say."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import torch

from collviz.runtime.programs.training.common import check_close, check_identical
from collviz.runtime.wire.protocol import Check

from support.reference import run_on_gloo_ranks


class _Emitter:
    """Keeps what a check emits."""

    def __init__(self) -> None:
        self.emitted: list[tuple[type, dict]] = []

    def emit(self, kind: type, **fields) -> None:
        self.emitted.append((kind, fields))


def _context(rank: int = 0, world_size: int = 1) -> SimpleNamespace:
    tracker = SimpleNamespace(suspended=contextlib.nullcontext)
    return SimpleNamespace(rank=rank, world_size=world_size, phase_index=5, emitter=_Emitter(), tracker=tracker)


def test_check_close_passes_rounding_and_fails_a_wrong_value():
    expected = torch.tensor([1.0, 2.0, 3.0])
    ctx = _context()
    assert check_close(ctx, "output equals the reference", expected * (1 + 1e-7), expected, "the reference")
    assert not check_close(ctx, "output equals the reference", expected + torch.tensor([0.0, 1e-3, 0.0]), expected,
                           "the reference")
    (_, passed), (kind, failed) = ctx.emitter.emitted
    assert passed["ok"] and passed["name"] == "output equals the reference"
    assert kind is Check and not failed["ok"] and failed["phase"] == 5
    assert failed["name"] == "differs: output equals the reference"
    assert failed["detail"] == "largest difference from the reference: 0.001 (beyond rtol 1e-5, atol 1e-6)"


def _identical_on(rank: int, n: int):
    ctx = _context(rank, n)
    values = torch.arange(6, dtype=torch.float32)
    if rank == 2:
        values[4] += 1e-3  # rank 2 drifted
    ok = check_identical(ctx, "parameters identical on all ranks", [values[:3], values[3:]])
    yield ok, ctx.emitter.emitted[0][1]


def test_check_identical_names_the_ranks_that_differ():
    found = dict(run_on_gloo_ranks(_identical_on, 4))
    assert {rank: ok for rank, (ok, _) in found.items()} == {0: False, 1: False, 2: False, 3: False}
    details = {rank: fields["detail"] for rank, (_, fields) in found.items()}
    assert details[0] == details[1] == details[3] == "differs from ranks [2], by up to 0.001"
    assert details[2] == "differs from ranks [0, 1, 3], by up to 0.001"
