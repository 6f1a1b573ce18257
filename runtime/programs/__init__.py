"""The programs every rank runs: one collective, desync, bench, the algorithms hop by hop, training.

:mod:`.program` (the interface and the run options), :mod:`.registry` (kind → builder),
:mod:`.collectives` (one collective on real tensors, and the memory a call takes),
:mod:`.patterns` (exact generated inputs), :mod:`.transfers` (logical transfers from provenance),
:mod:`.desync`, :mod:`.bench`, :mod:`.algorithms` and :mod:`.training` (ring, DDP, FSDP2, TP, MoE,
PP); every tensor they hand a collective is made on the rank's device by :mod:`.devices`.

A program reads its :class:`~collviz.runtime.scenario_files.schema.Scenario` from
:mod:`~collviz.runtime.scenario_files` and may import :mod:`collviz.runtime.context`,
:mod:`~collviz.runtime.observation`, :mod:`~collviz.runtime.wire`, :mod:`~collviz.runtime.reports`
(shared formats) and :mod:`~collviz.runtime.errors`; never a session
(:mod:`~collviz.runtime.sessions`) nor the worker: programs run inside a worker and never start
processes.
"""
