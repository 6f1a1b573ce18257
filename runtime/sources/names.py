"""Element types and collective operations as artifacts spell them, in collviz's names.

Types: Flight Recorder and ``record_param_comms`` write c10's scalar type names (``Float``,
``BFloat16``), the profiler's ``Input type`` C++ names (``float``, ``c10::BFloat16``), NCCL's debug
log the number of its ``ncclDataType_t``. Each becomes the name collviz uses (``float32``,
``bfloat16``), with its size; a name not known here is kept as written, with no size (its byte
counts are then absent).

Operations: ``gloo:all_reduce``, ``nccl:_allgather_base``, ``allgather_into_tensor_coalesced``,
``all_to_allv`` … become collviz's op names (``all_reduce``, ``all_gather``, ``all_to_all``), the
names the bandwidth formulas and the checks know.
"""

from __future__ import annotations

import msgspec

__all__ = ["DTYPE_BYTES", "dtype_name", "itemsize", "nccl_dtype_name", "P2P_OPS", "op_name", "parse_ranks"]

DTYPE_BYTES = {
    "float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int8": 1, "uint8": 1, "int16": 2,
    "uint16": 2, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "bool": 1, "complex64": 8,
    "complex128": 16, "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1,
}
"""Bytes per element of every type this module names."""

_SPELLINGS = {
    # c10::toString(ScalarType): Flight Recorder's dtypes, record_param_comms' "dtype"
    "Float": "float32", "Double": "float64", "Half": "float16", "BFloat16": "bfloat16", "Char": "int8",
    "Byte": "uint8", "Short": "int16", "Int": "int32", "Long": "int64", "Bool": "bool",
    "UInt16": "uint16", "UInt32": "uint32", "UInt64": "uint64", "ComplexFloat": "complex64",
    "ComplexDouble": "complex128", "Float8_e4m3fn": "float8_e4m3fn", "Float8_e5m2": "float8_e5m2",
    "Float8_e4m3fnuz": "float8_e4m3fnuz", "Float8_e5m2fnuz": "float8_e5m2fnuz",
    # the profiler's "Input type": C++ type names
    "float": "float32", "double": "float64", "c10::Half": "float16", "c10::BFloat16": "bfloat16",
    "signed char": "int8", "unsigned char": "uint8", "short int": "int16", "short": "int16", "int": "int32",
    "long int": "int64", "long": "int64", "long long": "int64", "bool": "bool",
    "c10::complex<float>": "complex64", "c10::complex<double>": "complex128",
    "c10::Float8_e4m3fn": "float8_e4m3fn", "c10::Float8_e5m2": "float8_e5m2",
}

_NCCL_TYPES = ("int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64",
               "bfloat16", "float8_e4m3fn", "float8_e5m2")
"""``ncclDataType_t`` by number (nccl.h: ncclInt8 = 0 … ncclBfloat16 = 9, ncclFloat8e4m3 = 10,
ncclFloat8e5m2 = 11)."""


def dtype_name(spelling: str) -> str:
    """collviz's name for a type as an artifact spells it (``Float`` → ``float32``); collviz's own
    names pass unchanged, and an unknown spelling is returned as it is."""
    return spelling if spelling in DTYPE_BYTES else _SPELLINGS.get(spelling, spelling)


def itemsize(name: str) -> int | None:
    """Bytes per element of ``name`` (a collviz name), or None where unknown."""
    return DTYPE_BYTES.get(name)


def nccl_dtype_name(number: int) -> str:
    """collviz's name for NCCL's ``datatype`` number in its debug log, or ``nccl type N``."""
    return _NCCL_TYPES[number] if 0 <= number < len(_NCCL_TYPES) else f"nccl type {number}"


_OP_SPELLINGS = {
    "allreduce": "all_reduce", "allreduce_coalesced": "all_reduce", "all_reduce_coalesced": "all_reduce",
    "allgather": "all_gather", "_allgather_base": "all_gather", "allgather_base": "all_gather",
    "allgather_into_tensor_coalesced": "all_gather", "all_gather_into_tensor": "all_gather",
    "allgather_coalesced": "all_gather", "all_gather_into_tensor_coalesced": "all_gather",
    "_all_gather_base": "all_gather", "all_gather_base": "all_gather",
    "_reduce_scatter_base": "reduce_scatter", "reduce_scatter_base": "reduce_scatter",
    "reduce_scatter_tensor": "reduce_scatter", "reduce_scatter_tensor_coalesced": "reduce_scatter",
    "reducescatter": "reduce_scatter", "alltoall": "all_to_all", "alltoall_base": "all_to_all",
    "all_to_allv": "all_to_all", "all_to_all_single": "all_to_all", "alltoallv": "all_to_all",
    "recv_anysource": "recv",
}

P2P_OPS = frozenset({"send", "recv"})
"""Point-to-point operations (not collective calls: sources count them and leave them out)."""


def op_name(spelling: str) -> str:
    """collviz's name for an operation as an artifact spells it: the backend prefix and any
    trailing words go (``gloo:all_reduce`` → ``all_reduce``, ``nccl:send 0->1`` → ``send``), and
    aliases become one name (``_allgather_base`` → ``all_gather``)."""
    name = spelling.strip()
    if name.startswith("c10d::"):  # the profiler's dispatcher op: c10d::allreduce_
        name = name.removeprefix("c10d::").removesuffix("_")
    name = name.split(":", 1)[-1].strip().split(" ", 1)[0].lower()
    return _OP_SPELLINGS.get(name, name)


def parse_ranks(value: object) -> tuple[int, ...] | None:
    """A group's ranks as artifacts write them — ``"[0, 1, 2, 3]"`` (a Flight Recorder JSON dump,
    ``record_param_comms``) or a list — sorted; None if empty, malformed or cut short
    (``record_param_comms`` writes ``[0, 1, ..., 63]`` past 30 ranks)."""
    if isinstance(value, str):
        text = value
        try:  # "[0, 1, 2, 3]" is JSON: decoded in C (a pg_config of 10⁶ ranks took 4.5 s split by hand)
            value = msgspec.json.decode(text)
        except (msgspec.DecodeError, RecursionError, ValueError):
            parts = [p.strip() for p in text.strip().strip("[]").split(",") if p.strip()]
            if not all(p.isdigit() for p in parts):
                return None
            value = [int(p) for p in parts]
    if not isinstance(value, (list, tuple)) or not all(
            isinstance(r, int) and not isinstance(r, bool) and r >= 0 for r in value):
        return None
    return tuple(sorted(value)) or None
