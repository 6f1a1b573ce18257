"""Scenario names the tests sweep, and the torch a scenario needs."""

from __future__ import annotations

import pytest

from collviz.runtime.compat import DDP_BUCKET_CAP_MB_LIST, PIPELINE_FIRST_STEP

DDP_REFUSAL = DDP_BUCKET_CAP_MB_LIST.refusal("scenario ddp")
"""Why this torch cannot run the ddp scenario (collviz refuses it), or None where it can."""


needs_ddp = pytest.mark.skipif(DDP_REFUSAL is not None, reason=str(DDP_REFUSAL))
"""A test that runs the ddp scenario itself: skipped on a torch collviz refuses it on."""


PP_REFUSAL = PIPELINE_FIRST_STEP.refusal("scenario pp")
"""Why this torch cannot run the pp scenario (torch 2.9's pipelining bug), or None where it can."""


needs_pp = pytest.mark.skipif(PP_REFUSAL is not None, reason=str(PP_REFUSAL))
"""A test that runs the pp scenario itself: skipped on a torch collviz refuses it on."""


COLLECTIVE_SCENARIOS = (
    "broadcast", "reduce", "all-reduce", "gather", "all-gather", "scatter", "reduce-scatter", "all-to-all",
)
