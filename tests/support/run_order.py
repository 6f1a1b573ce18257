"""Run the collected tests in another order, to show that none depends on another having run first.

Opt-in options (the default order is pytest's own):

- ``--reverse-order``: the collected tests, last first;
- ``--shuffle-seed N``: the collected tests shuffled with seed ``N`` (the seed printed in the
  header, so a failing order can be run again).

Session-scoped fixtures (the recorded runs of ``tests/conftest.py``) are still made once: only
the order the tests ask for them changes. Registered from ``tests/conftest.py``.
"""

from __future__ import annotations

import random

import pytest

__all__ = ["pytest_addoption", "pytest_collection_modifyitems", "pytest_report_header"]


def pytest_addoption(parser: pytest.Parser) -> None:
    """The two order options."""
    group = parser.getgroup("collviz test order")
    group.addoption("--reverse-order", action="store_true", default=False,
                    help="run the collected tests in reverse order")
    group.addoption("--shuffle-seed", type=int, default=None, metavar="N",
                    help="run the collected tests shuffled with seed N")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Reverse or shuffle ``items`` in place, as the options ask (both: shuffled, then reversed)."""
    seed = config.getoption("--shuffle-seed")
    if seed is not None:
        random.Random(seed).shuffle(items)
    if config.getoption("--reverse-order"):
        items.reverse()


def pytest_report_header(config: pytest.Config) -> str | None:
    """The order the tests run in, where it is not pytest's own."""
    seed, reverse = config.getoption("--shuffle-seed"), config.getoption("--reverse-order")
    if seed is None and not reverse:
        return None
    return "test order: " + ", then ".join(
        part for part in (f"shuffled with seed {seed}" if seed is not None else "", "reversed" if reverse else "") if part)
