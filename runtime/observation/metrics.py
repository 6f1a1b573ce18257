"""Bandwidth figures with the nccl-tests definitions (nccl-tests doc/PERFORMANCE.md).

``algbw = S / t`` where S is the "algorithm size" of the operation, and ``busbw = algbw × factor``,
the factor making busbw comparable to the hardware's link bandwidth whatever the operation:

=====================================================  ==========================  ============
operation                                              S                           factor
=====================================================  ==========================  ============
all_reduce                                             buffer bytes                2(n−1)/n
all_gather, gather                                     per-rank input × n          (n−1)/n
reduce_scatter, scatter                                per-rank output × n         (n−1)/n
all_to_all                                             per-rank buffer (= chunk×n) (n−1)/n
broadcast, reduce                                      buffer bytes                1
=====================================================  ==========================  ============
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

__all__ = ["BUS_FACTOR_OPS", "bus_factor", "bus_factor_text", "algo_bytes", "Bandwidth", "bandwidth", "human_bytes", "human_rate"]

_TWO_WAY = {"all_reduce"}
_ONE_WAY = {"all_gather", "gather", "reduce_scatter", "scatter", "all_to_all"}
_ROOTED_WHOLE = {"broadcast", "reduce"}
BUS_FACTOR_OPS = frozenset(_TWO_WAY | _ONE_WAY | _ROOTED_WHOLE)
"""The operations nccl-tests gives a bus factor (and collviz algbw/busbw)."""


@lru_cache(maxsize=256)
def bus_factor(op: str, world_size: int) -> Fraction:
    """The nccl-tests busbw/algbw factor of ``op`` on ``world_size`` ranks (made once per pair: a
    frame asks it three times a call shown, and a Fraction is slow to make)."""
    n = world_size
    if op in _TWO_WAY:
        return Fraction(2 * (n - 1), n)
    if op in _ONE_WAY:
        return Fraction(n - 1, n)
    if op in _ROOTED_WHOLE:
        return Fraction(1)
    raise ValueError(f"no bus factor for operation {op!r}")


def bus_factor_text(op: str, world_size: int) -> str:
    """The factor as the formula and its value, e.g. ``2(n−1)/n = 2·3/4 = 1.5``."""
    n = world_size
    value = float(bus_factor(op, n))
    if op in _TWO_WAY:
        return f"2(n−1)/n = 2·{n - 1}/{n} = {value:g}"
    if op in _ONE_WAY:
        return f"(n−1)/n = {n - 1}/{n} = {value:g}"
    return "1"


def algo_bytes(op: str, world_size: int, bytes_in: int, bytes_out: int) -> int:
    """S for ``op``, from one rank's input and output buffer sizes (in bytes).

    For rooted operations pass the root's view (the root's input for scatter, its output for
    gather); ``runtime.collectives`` does this for every rank so all ranks report the same S.
    """
    if op in ("all_reduce", "broadcast", "reduce", "all_to_all"):
        return bytes_in
    if op in ("all_gather", "gather"):
        return bytes_in * world_size
    if op in ("reduce_scatter", "scatter"):
        return bytes_out * world_size
    raise ValueError(f"no algorithm size for operation {op!r}")


@dataclass(frozen=True)
class Bandwidth:
    """algbw and busbw in bytes per second, with the formula text that produced them."""

    algbw: float
    busbw: float
    formula: str


def bandwidth(op: str, world_size: int, algo_size: int, seconds: float) -> Bandwidth:
    """algbw = S/t and busbw = algbw × factor, with a one-line explanation."""
    if seconds <= 0:
        raise ValueError("duration must be positive")
    algbw = algo_size / seconds
    busbw = algbw * float(bus_factor(op, world_size))
    formula = (
        f"algbw = S/t = {human_bytes(algo_size)} / {seconds * 1e3:.3f} ms = {human_rate(algbw)}; "
        f"busbw = algbw × {bus_factor_text(op, world_size)} = {human_rate(busbw)}"
    )
    return Bandwidth(algbw=algbw, busbw=busbw, formula=formula)


def human_rate(bytes_per_second: float) -> str:
    """A bandwidth in decimal units, as bandwidths are quoted: ``1.23 GB/s``, ``746 kB/s``."""
    for unit, scale in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if bytes_per_second >= scale:
            return f"{bytes_per_second / scale:.3g} {unit}"
    return f"{bytes_per_second:.3g} B/s"


def human_bytes(n: int | float) -> str:
    """Bytes in binary units: ``16 MiB``, ``1.5 KiB``, ``4 B``."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{int(value)} {unit}" if value == int(value) else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")
