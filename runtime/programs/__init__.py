"""Scenarios: the files that describe them and the programs every rank runs.

Loading and validation: :mod:`.loading` (find, list, load ``scenarios/*.toml``), :mod:`.schema`
(names and the validated dataclasses), :mod:`.documents` (the files' keys as msgspec Structs, and
their JSON Schema), :mod:`.decoding` (TOML to a document, with collviz's messages), :mod:`.kinds`
(one reader per kind), :mod:`.arrays` (the worked examples' numbers), :mod:`.lessons`.
Programs: :mod:`.program` (the interface and the run options), :mod:`.registry` (kind → builder),
:mod:`.collectives`, :mod:`.desync`, :mod:`.bench` and :mod:`.training` (ring, DDP, FSDP2, TP); every
tensor they hand a collective is made on the rank's device by :mod:`.devices`.

May import :mod:`collviz.runtime.context`, :mod:`~collviz.runtime.observation`,
:mod:`~collviz.runtime.wire`, :mod:`~collviz.runtime.reports` (shared formats) and
:mod:`~collviz.runtime.errors`; never a session (launch, remote, headless, worker): programs run
inside a worker and never start processes.
"""
