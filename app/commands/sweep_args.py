"""What ``collviz bench`` sweeps, in either spelling: collviz's ``--sizes MIN:MAX`` and ``--gpus N``,
or nccl-tests' ``-b MIN -e MAX -f FACTOR`` and ``-g N`` (``all_reduce_perf -b 8 -e 128M -f 2 -g 4``).

nccl-tests' ``-g`` is GPUs per thread, its ranks being processes × threads × GPUs per thread;
collviz runs one process per rank, so ``-g N`` here is N ranks in all, as ``--gpus N`` is. Sizes
given to ``-b``/``-e`` read as nccl-tests reads them (a number, K, M or G counting by 1024);
``--sizes`` keeps the units of ``--size``. Mixing the two spellings of one thing is refused.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass

from collviz.runtime.errors import UsageError

from .options import parse_size

__all__ = ["DEFAULT_SIZES", "DEFAULT_RANKS", "Sweep", "add_sweep_options", "parse_sweep", "parse_nccl_tests_bytes",
           "sweep_from", "ranks_from"]

DEFAULT_SIZES = "1K:16M"
"""The default sweep: quick on CPU (gloo), still reaching the sizes where bandwidth settles."""

DEFAULT_RANKS = 4
"""Ranks when neither ``--gpus`` nor ``-g`` says."""

_NCCL_TESTS_BYTES = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(?:([kmg])b?)?\s*", re.IGNORECASE)
_BINARY = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


@dataclass(frozen=True)
class Sweep:
    """Sizes S from ``low`` to ``high`` bytes, each ``factor`` times the one before, as ``text``
    (the options that gave them, for messages) and ``high_option`` (the one that gave ``high``)."""

    low: int
    high: int
    factor: int
    text: str
    high_option: str


def add_sweep_options(parser: argparse.ArgumentParser) -> None:
    """``--sizes``, ``-b``/``-e``/``-f`` and ``-g`` (``--gpus`` is the shared option's)."""
    parser.add_argument("--sizes", metavar="MIN:MAX",
                        help=f"sizes S in bytes, doubling from MIN to MAX (default {DEFAULT_SIZES})")
    parser.add_argument("-b", "--minbytes", metavar="SIZE",
                        help="nccl-tests' smallest size: bytes, or K, M, G counting by 1024 (default 1K)")
    parser.add_argument("-e", "--maxbytes", metavar="SIZE", help="nccl-tests' largest size, as -b (default 16M)")
    parser.add_argument("-f", "--stepfactor", type=int, metavar="F",
                        help="nccl-tests' factor between sizes, 2 or more (default 2; its fixed step, -i, is not "
                             "offered)")
    parser.add_argument("-g", "--ngpus", type=int, metavar="N",
                        help="nccl-tests' GPUs per thread; collviz runs one process per rank, so N ranks in all: "
                             "the same as --gpus N")


def parse_sweep(text: str) -> tuple[int, int]:
    """``"8:64M"`` → (8, 67108864); sizes take B, K/M/G (binary) and the units of ``--size``."""
    parts = text.split(":")
    if len(parts) != 2:
        raise UsageError(f"--sizes {text!r}: expected MIN:MAX such as 8:64M or 1K:16M")
    try:
        low, high = (parse_size(part, "--sizes") for part in parts)
    except UsageError:
        raise UsageError(f"--sizes {text!r}: expected MIN:MAX byte counts such as 8:64M or 1K:16M") from None
    if low <= 0 or high < low:
        raise UsageError(f"--sizes {text!r}: need 0 < MIN ≤ MAX")
    return low, high


def parse_nccl_tests_bytes(text: str, option: str) -> int:
    """A size as nccl-tests' ``-b``/``-e`` read it: a number, perhaps with a fraction, then K, M or
    G (1024-based, either case; a B after the letter changes nothing), rounded down to whole
    bytes: ``"128M"`` → 134217728, ``"1.5k"`` → 1536, ``"8"`` → 8."""
    match = _NCCL_TESTS_BYTES.fullmatch(text)
    if not match:
        raise UsageError(f"{option} {text!r}: expected a size as nccl-tests takes it, such as 8, 64K, 128M or 1G")
    return int(float(match.group(1)) * _BINARY[(match.group(2) or "").lower()])


def sweep_from(args: argparse.Namespace) -> Sweep:
    """The sweep the parsed options ask for: ``--sizes``, or ``-b``/``-e``/``-f`` (a bound not
    given is the default sweep's), or the default; a UsageError when both spellings are given."""
    nccl_tests = [f"{flag} {value}" for flag, value in
                  (("-b", args.minbytes), ("-e", args.maxbytes), ("-f", args.stepfactor)) if value is not None]
    if args.sizes is not None and nccl_tests:
        raise UsageError(f"--sizes {args.sizes} and {' '.join(nccl_tests)} both give the sizes: use --sizes MIN:MAX "
                         f"or nccl-tests' -b MIN -e MAX -f FACTOR")
    if not nccl_tests:
        low, high = parse_sweep(args.sizes or DEFAULT_SIZES)
        return Sweep(low, high, 2, f"--sizes {args.sizes or DEFAULT_SIZES}", "--sizes MAX")
    default_low, default_high = DEFAULT_SIZES.split(":")
    low = parse_nccl_tests_bytes(args.minbytes or default_low, "-b")
    high = parse_nccl_tests_bytes(args.maxbytes or default_high, "-e")
    factor = 2 if args.stepfactor is None else args.stepfactor
    text = " ".join(nccl_tests)
    if not 0 < low <= high:
        raise UsageError(f"-b {low} -e {high} (from {text}): need 0 < -b ≤ -e")
    if not 2 <= factor <= 1024:
        raise UsageError(f"-f {factor}: the factor between sizes must be between 2 and 1,024 "
                         f"(nccl-tests' fixed step, -i, is not offered)")
    return Sweep(low, high, factor, text, "-e")


def ranks_from(args: argparse.Namespace) -> int:
    """The number of ranks: ``--gpus N`` or ``-g N`` (not both), :data:`DEFAULT_RANKS` without either."""
    if args.gpus is not None and args.ngpus is not None:
        raise UsageError(f"--gpus {args.gpus} and -g {args.ngpus} both give the number of ranks: use one")
    if args.ngpus is not None:
        return args.ngpus
    return DEFAULT_RANKS if args.gpus is None else args.gpus
