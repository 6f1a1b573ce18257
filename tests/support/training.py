"""What the training tests share: the scenario files' settings read directly, lookups into a
recorded trace, and the tiny GPT trained on one process as the reference for DDP, FSDP and HSDP.

Every expected value is computed here or in the tests, never read from the code under test.
"""

from __future__ import annotations

import tomllib

import torch
import torch.nn.functional as F

from collviz.runtime.wire.protocol import Buffer, Phase
from collviz.runtime.wire.trace import TraceContents

from support.paths import SCENARIOS
from support.reference_models import ReferenceGPT

N = 4
"""Ranks in every training run the tests record (moe also runs on 2)."""


def settings_of(name: str) -> dict:
    """The [settings] table of a builtin scenario file, read directly."""
    return tomllib.loads((SCENARIOS / f"{name}.toml").read_text())["settings"]


def events(trace: TraceContents, kind: type, rank: int | None = None) -> list:
    """The trace's events of ``kind`` (from ``rank`` only, when given), in order."""
    return [e for e in trace.events if isinstance(e, kind) and (rank is None or e.rank == rank)]


def phase_names(trace: TraceContents) -> dict[int, str]:
    """Phase index → name, as rank 0 opened them."""
    return {e.index: e.name for e in events(trace, Phase, 0) if e.edge == "begin"}


def buffers(trace: TraceContents, name: str, moment: str) -> dict[int, Buffer]:
    """Rank → its buffer ``name`` at ``moment``."""
    return {b.rank: b for b in events(trace, Buffer) if b.name == name and b.moment == moment}


def single_process_step() -> dict:
    """The tiny GPT after one AdamW step on all ranks' batches at once, and each rank's first loss."""
    s = settings_of("ddp")
    assert all(settings_of("fsdp")[k] == s[k] for k in ("seed", "vocab", "d_model", "blocks", "seq", "batch", "lr"))
    torch.manual_seed(s["seed"])
    model = ReferenceGPT(s["vocab"], s["d_model"], s["blocks"], s["seq"])
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


def per_rank_gradients(name: str) -> list[torch.Tensor]:
    """The gradient of parameter ``name`` of the freshly built tiny GPT on each rank's own batch,
    computed on one process (rank r's loss alone, as rank r computes it before any reduction)."""
    s = settings_of("fsdp")
    gradients = []
    for rank in range(N):
        torch.manual_seed(s["seed"])
        model = ReferenceGPT(s["vocab"], s["d_model"], s["blocks"], s["seq"])
        tokens = torch.randint(s["vocab"], (s["batch"], s["seq"] + 1), generator=torch.Generator().manual_seed(s["seed"] + 1 + rank))
        logits = model(tokens[:, :-1])
        F.cross_entropy(logits.reshape(-1, s["vocab"]), tokens[:, 1:].reshape(-1)).backward()
        gradients.append(model.get_parameter(name).grad.detach().clone())
    return gradients


def assert_matches(buffer: Buffer, expected: torch.Tensor, what: str) -> None:
    """Values when the buffer ships them, else its min/max/mean."""
    expected = expected.detach().reshape(-1).double()
    if buffer.values is not None:
        torch.testing.assert_close(torch.tensor(buffer.values, dtype=torch.float64), expected, rtol=1e-4, atol=1e-5, msg=what)
    else:
        got = torch.tensor([buffer.summary.min, buffer.summary.max, buffer.summary.mean], dtype=torch.float64)
        want = torch.stack([expected.min(), expected.max(), expected.mean()])
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5, msg=what)

