"""The wire: every event as a typed struct (:mod:`.protocol`), its ZeroMQ frames, signed or not,
and the gate messages (:mod:`.frames`), how events travel between processes (:mod:`.transport`:
emitter, collector, gates) and how they are stored (:mod:`.trace`).

May import only :mod:`collviz.runtime.errors` of collviz (an import-linter contract): anything
that speaks the protocol — a worker, a viewer, a converter — can depend on it alone.
"""
