"""The wire: every event as a typed struct (:mod:`.protocol`), its ZeroMQ frames, signed or not,
and the gate messages (:mod:`.frames`), how events travel between processes (:mod:`.transport`:
emitter, collector, gates) and how they are stored (:mod:`.trace`; :mod:`.scan` and :mod:`.stored`
open an intact trace fast and leave its events in the file until they are read).

May import only :mod:`collviz.runtime.errors` of collviz (an import-linter contract): anything
that speaks the protocol — a worker, a viewer, a converter — can depend on it alone.
"""
