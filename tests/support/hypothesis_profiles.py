"""Hypothesis's two profiles for this suite, and how many examples a property test draws under each.

- ``repeatable``, the default (what the README's test command and ``.ci/run`` get): every run
  draws the same examples, derived from each test function, and replays nothing from a local
  database, so the test command is red only for a reason in the code and green the same way on
  every machine.
- ``explore`` (``--hypothesis-profile=explore``, or :data:`PROFILE_ENV` ``=explore``): ten times
  the examples from a random seed each run, printed at the end of a failure (repeat it with
  ``--hypothesis-seed=N``), to hunt failures the repeatable draw never reaches. Each one found is
  fixed in the code and pinned in its test with ``@example``.
"""

from __future__ import annotations

import os

from hypothesis import settings

__all__ = ["REPEATABLE", "EXPLORE", "PROFILE_ENV", "EXPLORE_FACTOR", "load_profile", "examples"]

REPEATABLE = "repeatable"
"""The default profile: derandomized, no example database."""

EXPLORE = "explore"
"""The exploring profile: random seeds, :data:`EXPLORE_FACTOR` times the examples."""

PROFILE_ENV = "COLLVIZ_HYPOTHESIS_PROFILE"
"""The environment variable naming the profile to load (``--hypothesis-profile`` overrides it)."""

EXPLORE_FACTOR = 10
"""How many times more examples a test draws while exploring."""

_REPEATABLE_EXAMPLES = 100
"""Examples a test draws in the repeatable profile, unless it asks for its own count."""

settings.register_profile(REPEATABLE, derandomize=True, database=None, deadline=None,
                          max_examples=_REPEATABLE_EXAMPLES)
settings.register_profile(EXPLORE, derandomize=False, deadline=None, print_blob=True,
                          max_examples=_REPEATABLE_EXAMPLES * EXPLORE_FACTOR)


def load_profile() -> None:
    """Load the profile :data:`PROFILE_ENV` names, :data:`REPEATABLE` when it names none."""
    settings.load_profile(os.environ.get(PROFILE_ENV) or REPEATABLE)


def examples(count: int) -> int:
    """``max_examples`` for a test that draws ``count`` examples in the repeatable profile: the
    loaded profile's scale applied (:data:`EXPLORE_FACTOR` × ``count`` while exploring). A count
    given to ``@settings`` outright would hold under every profile, exploring included."""
    return count * settings.default.max_examples // _REPEATABLE_EXAMPLES
