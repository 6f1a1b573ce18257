"""The training kinds of scenario as data: their settings, narration keys and placeholders.

This module imports nothing from collviz (:mod:`.documents` and :mod:`.kinds` read it while
loading a file). A training scenario file has the common keys, a ``[settings]`` table with the
kind's settings (each optional, with the default below) and a ``[narration]`` table with exactly
the kind's narration keys, in phase order.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping, Union

__all__ = ["Setting", "TrainingKind", "TRAINING_KINDS", "SettingValue"]

SettingValue = Union[int, float]
"""What one setting holds."""


@dataclass(frozen=True)
class Setting:
    """One ``[settings]`` key: its type (``int`` or ``float``), smallest value, default, meaning."""

    name: str
    type: type
    minimum: SettingValue
    default: SettingValue
    meaning: str


@dataclass(frozen=True)
class TrainingKind:
    """A training kind: what its scenario file may set and must narrate."""

    name: str
    settings: tuple[Setting, ...]
    phase_keys: tuple[str, ...]
    placeholders: frozenset[str]

    def defaults(self) -> Mapping[str, SettingValue]:
        """Every setting at its default."""
        return MappingProxyType({s.name: s.default for s in self.settings})


_MODEL = (
    Setting("seed", int, 0, 0, "seed of the initial weights (same on every rank) and of the data"),
    Setting("vocab", int, 2, 64, "vocabulary size of the tiny GPT"),
    Setting("d_model", int, 4, 64, "width of the tiny GPT (a multiple of its 4 heads)"),
    Setting("blocks", int, 1, 4, "transformer blocks"),
    Setting("seq", int, 2, 16, "tokens per sequence"),
    Setting("batch", int, 1, 4, "sequences per rank (each rank draws different ones)"),
    Setting("lr", float, 0.0, 0.01, "AdamW learning rate of the one optimizer step"),
    Setting("timed_steps", int, 0, 3, "further steps run unobserved and untracked, to time a step"),
)

TRAINING_KINDS: Mapping[str, TrainingKind] = MappingProxyType({
    "ring": TrainingKind(
        "ring",
        (Setting("count", int, 1, 8, "float32 elements per rank (a multiple of the world size)"),),
        ("setup", "reduce_scatter_hop", "all_gather_hop", "compare"),
        frozenset({"world_size", "count", "chunk", "bytes", "chunk_bytes", "hops"}),
    ),
    "ddp": TrainingKind(
        "ddp",
        _MODEL + (Setting("bucket_kib", int, 1, 256, "DDP gradient bucket cap in KiB"),),
        ("setup", "forward", "backward", "bucket", "optimizer", "check", "timed"),
        frozenset({"world_size", "params", "param_bytes", "buckets", "batch", "tracked", "timed_steps"}),
    ),
    "fsdp": TrainingKind(
        "fsdp",
        _MODEL,
        ("setup", "forward_all_gather", "forward_compute", "forward_reshard", "loss",
         "backward_all_gather", "backward_gradient", "backward_reduce_scatter", "optimizer", "check", "timed"),
        frozenset({"world_size", "params", "param_bytes", "shard_bytes", "blocks", "units", "prefetch",
                   "reshard", "timed_steps"}),
    ),
    "hsdp": TrainingKind(
        "hsdp",
        _MODEL + (Setting("replicas", int, 1, 2, "replica groups: the ranks split into this many groups of "
                                                 "world_size/replicas, each sharding one copy of the model"),),
        ("setup", "forward_all_gather", "forward_compute", "forward_reshard", "loss",
         "backward_all_gather", "backward_gradient", "backward_reduce_scatter", "optimizer", "check", "timed"),
        frozenset({"world_size", "params", "param_bytes", "shard_bytes", "blocks", "units", "prefetch",
                   "reshard", "timed_steps", "replicas", "shards"}),
    ),
    "fsdp-tp": TrainingKind(
        "fsdp-tp",
        _MODEL + (Setting("tp", int, 2, 2, "tensor-parallel degree: every block's MLP split over groups of this "
                                           "many ranks, FSDP across the groups"),),
        ("setup", "forward_all_gather", "forward_compute", "forward_reshard", "loss",
         "backward_all_gather", "backward_gradient", "backward_reduce_scatter", "optimizer", "check", "timed"),
        frozenset({"world_size", "params", "param_bytes", "shard_bytes", "blocks", "units", "prefetch",
                   "reshard", "timed_steps", "tp", "shards"}),
    ),
    "pp": TrainingKind(
        "pp",
        _MODEL + (Setting("microbatches", int, 1, 4, "microbatches the batch is cut into (a divisor of batch; "
                                                   "--microbatches overrides)"),),
        ("setup", "schedule", "optimizer", "check", "timed"),
        frozenset({"world_size", "params", "stages", "schedule", "microbatches", "microbatch", "batch",
                   "bubble", "timed_steps"}),
    ),
    "moe": TrainingKind(
        "moe",
        (Setting("seed", int, 0, 0, "seed of the router and experts, and of the tokens"),
         Setting("d_model", int, 1, 8, "token width"),
         Setting("hidden", int, 1, 16, "hidden width of each expert's MLP"),
         Setting("tokens", int, 1, 8, "tokens per rank (each rank draws different ones)"),
         Setting("top_k", int, 1, 2, "experts per token (--top-k overrides)"),
         Setting("capacity_factor", float, 0.0, 1.0, "slots per expert = ⌈factor · tokens · k / n⌉ (--capacity-factor)")),
        ("setup", "route", "dispatch", "expert", "combine", "check"),
        frozenset({"world_size", "tokens", "d_model", "top_k", "capacity_factor", "capacity"}),
    ),
    "tp": TrainingKind(
        "tp",
        (Setting("seed", int, 0, 0, "seed of the MLP's weights and of its input"),
         Setting("d_model", int, 1, 8, "input and output width of the MLP"),
         Setting("hidden", int, 1, 16, "hidden width (a multiple of the world size)"),
         Setting("batch", int, 1, 2, "rows of the input (the same on every rank)")),
        ("setup", "fc1", "activation", "fc2", "all_reduce", "check"),
        frozenset({"world_size", "d_model", "hidden", "shard", "batch"}),
    ),
})
"""Training kinds by the value of a scenario's ``kind`` key."""
