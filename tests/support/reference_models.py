"""The training scenarios' models written out again, for the tests: nothing here imports collviz.

A reference that borrowed the runtime's ``TinyGPT`` would agree with it whatever the runtime's model
did. These are written from the scenario files' description instead — a GPT of token and position
embeddings, pre-norm blocks (causal 4-head attention with separate query/key/value/output
projections, a 4× GELU MLP), a final LayerNorm and a bias-free vocabulary projection; a two-layer
GELU MLP — with the parameter names and construction order a ``torch.manual_seed`` run needs to draw
the same weights. ``tests/runtime/test_reference_models.py`` checks, parameter for parameter, that the
runtime builds exactly these.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

ATTENTION_HEADS = 4
"""Heads of the tiny GPT's attention (the scenarios' d_model must split over them)."""


class ReferenceMLP(nn.Module):
    """``fc2(gelu(fc1(x)))``, widths ``width → hidden → width``."""

    def __init__(self, width: int, hidden: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(width, hidden)
        self.fc2 = nn.Linear(hidden, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The MLP of ``x``."""
        return self.fc2(F.gelu(self.fc1(x)))


class _CausalAttention(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.query = nn.Linear(width, width)
        self.key = nn.Linear(width, width)
        self.value = nn.Linear(width, width)
        self.proj = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape

        def heads(t: torch.Tensor) -> torch.Tensor:  # (batch, heads, length, width / heads)
            return t.reshape(batch, length, ATTENTION_HEADS, width // ATTENTION_HEADS).permute(0, 2, 1, 3)

        mixed = F.scaled_dot_product_attention(heads(self.query(x)), heads(self.key(x)), heads(self.value(x)),
                                               is_causal=True)
        return self.proj(mixed.permute(0, 2, 1, 3).reshape(batch, length, width))


class _Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(width)
        self.ln2 = nn.LayerNorm(width)
        self.attn = _CausalAttention(width)
        self.fc1 = nn.Linear(width, 4 * width)
        self.fc2 = nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class _Embed(nn.Module):
    def __init__(self, vocab: int, width: int, length: int) -> None:
        super().__init__()
        self.tokens = nn.Embedding(vocab, width)
        self.positions = nn.Embedding(length, width)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.tokens(ids) + self.positions.weight[: ids.shape[1]]


class _Head(nn.Module):
    def __init__(self, vocab: int, width: int) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(width)
        self.out = nn.Linear(width, vocab, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.ln(x))


class ReferenceGPT(nn.Module):
    """The tiny GPT: embeddings, ``blocks`` pre-norm transformer blocks, final norm and projection."""

    def __init__(self, vocab: int, width: int, blocks: int, length: int) -> None:
        super().__init__()
        self.embed = _Embed(vocab, width, length)
        self.blocks = nn.ModuleList([_Block(width) for _ in range(blocks)])
        self.head = _Head(vocab, width)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Logits (batch × length × vocab) of token ids (batch × length)."""
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def reference_gpt(settings: dict) -> ReferenceGPT:
    """The tiny GPT of a scenario's [settings], weights drawn after ``torch.manual_seed(seed)``."""
    torch.manual_seed(settings["seed"])
    return ReferenceGPT(settings["vocab"], settings["d_model"], settings["blocks"], settings["seq"])


def reference_batch(settings: dict, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank ``rank``'s (inputs, next-token targets): ``batch`` sequences of ``seq + 1`` random token
    ids from a generator seeded ``seed + 1 + rank``, the inputs all but the last, the targets all but the first."""
    ids = torch.randint(settings["vocab"], (settings["batch"], settings["seq"] + 1),
                        generator=torch.Generator().manual_seed(settings["seed"] + 1 + rank))
    return ids[:, :-1], ids[:, 1:]
