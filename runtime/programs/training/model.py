"""The models of the training scenarios: a tiny GPT (DDP, FSDP) and a two-layer MLP (TP).

Weights come from ``torch.manual_seed(seed)`` before construction, so every rank — and a test's
single-process reference — builds the same model. Data is drawn per rank from its own generator
(:func:`token_batch`), so ranks train on different sequences.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ...errors import UsageError

__all__ = ["HEADS", "Attention", "Block", "Embed", "Head", "TinyGPT", "MLP", "token_batch", "make_gpt"]

HEADS = 4
"""Attention heads of every tiny GPT."""


class Attention(nn.Module):
    """Causal self-attention with separate ``query``, ``key``, ``value`` and ``proj`` projections."""

    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.query, self.key, self.value, self.proj = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Attend over the sequence, each position to itself and earlier ones."""
        b, t, c = x.shape
        q, k, v = (layer(x).view(b, t, HEADS, c // HEADS).transpose(1, 2) for layer in (self.query, self.key, self.value))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    """A pre-norm transformer block: attention, then a 4× MLP, each with a residual."""

    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attn = Attention(d_model)
        self.fc1, self.fc2 = nn.Linear(d_model, 4 * d_model), nn.Linear(4 * d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x + attn(ln1(x)), then + mlp(ln2(x))."""
        x = x + self.attn(self.ln1(x))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Embed(nn.Module):
    """Token plus learned position embeddings."""

    def __init__(self, vocab: int, d_model: int, seq: int) -> None:
        super().__init__()
        self.tokens, self.positions = nn.Embedding(vocab, d_model), nn.Embedding(seq, d_model)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """Embeddings of ``idx`` (batch × seq token ids)."""
        return self.tokens(idx) + self.positions(torch.arange(idx.shape[1], device=idx.device))


class Head(nn.Module):
    """Final LayerNorm and the projection to vocabulary logits."""

    def __init__(self, vocab: int, d_model: int) -> None:
        super().__init__()
        self.ln, self.out = nn.LayerNorm(d_model), nn.Linear(d_model, vocab, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits for every position."""
        return self.out(self.ln(x))


class TinyGPT(nn.Module):
    """Embed → ``blocks`` transformer blocks → Head. Each piece is one FSDP unit in ``fsdp``."""

    def __init__(self, vocab: int, d_model: int, blocks: int, seq: int) -> None:
        super().__init__()
        self.embed = Embed(vocab, d_model, seq)
        self.blocks = nn.ModuleList(Block(d_model) for _ in range(blocks))
        self.head = Head(vocab, d_model)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """Logits (batch × seq × vocab)."""
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def make_gpt(settings: dict) -> TinyGPT:
    """The tiny GPT of a scenario's settings, with weights from ``torch.manual_seed(seed)``.

    UsageError when ``d_model`` does not split over the :data:`HEADS` attention heads.
    """
    if int(settings["d_model"]) % HEADS:
        raise UsageError(f"settings.d_model = {settings['d_model']} is not a multiple of the {HEADS} attention heads")
    torch.manual_seed(int(settings["seed"]))
    return TinyGPT(int(settings["vocab"]), int(settings["d_model"]), int(settings["blocks"]), int(settings["seq"]))


def token_batch(settings: dict, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank ``rank``'s (inputs, targets): ``batch`` random sequences from generator seed + 1 + rank."""
    generator = torch.Generator().manual_seed(int(settings["seed"]) + 1 + rank)
    tokens = torch.randint(int(settings["vocab"]), (int(settings["batch"]), int(settings["seq"]) + 1), generator=generator)
    return tokens[:, :-1], tokens[:, 1:]


class MLP(nn.Module):
    """``fc2(gelu(fc1(x)))``: the layer tensor parallelism splits."""

    def __init__(self, d_model: int, hidden: int) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d_model, hidden), nn.Linear(hidden, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The MLP's output."""
        return self.fc2(F.gelu(self.fc1(x)))
