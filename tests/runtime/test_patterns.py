"""Generated inputs stay exact in every dtype: the values follow the rule the inputs line states, and
every result of the reduction is an integer the dtype holds."""

from __future__ import annotations

import re

import pytest
import torch

from collviz.runtime.programs.collectives import make_input, resolve_spec
from collviz.runtime.scenario_files.loading import find_scenario

# the largest integer each dtype holds exactly, written out here rather than read from collviz
LIMITS = {"int8": 127, "uint8": 255, "float16": 2048, "bfloat16": 256, "float32": 2**24, "int32": 2**31 - 1}


@pytest.mark.parametrize("dtype", sorted(LIMITS))
@pytest.mark.parametrize(("name", "op"), [("all-reduce", "sum"), ("all-reduce", "max"), ("all-reduce", "product"),
                                          ("all-gather", None)])
@pytest.mark.parametrize("world", [2, 5, 8])
def test_generated_inputs_follow_the_stated_rule_and_reduce_exactly(dtype, name, op, world):
    spec = resolve_spec(find_scenario(name), world, reduce_op=op, dtype=dtype, size_bytes=4096)
    rule = re.search(r"\(i \+ r\) mod (\d+) \+ 1", spec.source)
    count = spec.count
    expected = []
    for rank in range(world):
        if rule:
            values = [(i + rank) % int(rule.group(1)) + 1 for i in range(count)]
        else:
            assert f"r·{count} + i + 1" in spec.source
            values = [rank * count + i + 1 for i in range(count)]
        got = make_input(spec, rank, world, torch.device("cpu"))
        assert got.dtype == getattr(torch, dtype)
        assert [int(v) for v in got.tolist()] == values, f"rank {rank}"
        expected.append(values)
    combine = {"sum": sum, "max": max, "product": lambda xs: eval("*".join(map(str, xs))), None: max}[op]
    largest = max(combine(column) for column in zip(*expected))
    assert largest <= LIMITS[dtype], f"{op} reaches {largest}, beyond what {dtype} holds exactly"
    distinct = {tuple(values[:64]) for values in expected}
    period = int(rule.group(1)) if rule else count * world
    assert len(distinct) == min(world, period), "ranks should get different inputs wherever the period allows"
