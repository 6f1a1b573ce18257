"""The torch releases collviz is verified on, and the one the whole suite and the type check pin.

Kept free of imports so that ``.ci/run`` reads it before any torch is installed
(``runpy.run_path("runtime/compat/verified.py")``): CI runs the full suite on :data:`PINNED_TORCH`
and ``.ci/floor`` on every other release of :data:`VERIFIED_TORCH`, and ``collviz doctor`` reports
the same tuple, so what doctor calls verified is what CI runs.
"""

from __future__ import annotations

__all__ = ["PINNED_TORCH", "VERIFIED_TORCH"]

PINNED_TORCH = "2.13.0"
"""The torch the whole test suite runs on, the type check included (its stubs are the ones mypy reads)."""

VERIFIED_TORCH = ("2.8.0", "2.9.1", "2.10.0", "2.11.0", PINNED_TORCH)
"""Every torch release CI checks: the pinned one (the whole suite), the others by ``.ci/floor``
(every scenario headless and the runtime's gloo tests). The first is the supported floor; each
release between it and the pinned one is checked at its last patch (2.9.1); 2.11.0 is the torch
of the lent GPU machines' image."""
