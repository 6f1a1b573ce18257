"""Where the repository's files are, for tests in any room."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The repository root."""

FIXTURES = ROOT / "tests" / "fixtures"
"""Recorded traces, NCCL logs and other committed test data."""

SCENARIOS = ROOT / "scenarios"
"""The shipped scenario files."""
