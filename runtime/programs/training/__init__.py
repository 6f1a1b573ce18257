"""Training scenarios: a ring all-reduce hop by hop, DDP, FSDP2 and a tensor-parallel MLP.

One module per scenario kind (:mod:`.ring`, :mod:`.ddp`, :mod:`.fsdp`, :mod:`.tp`), each with a
``build`` function registered in :data:`collviz.runtime.scenarios.registry.BUILDERS`; shared pieces are
:mod:`.kinds` (settings and narration keys, read by the scenario loader), :mod:`.common` (the
program base and phase sequencing), :mod:`.model` (the tiny GPT and MLP), :mod:`.observer`
(collectives seen through a dispatch mode), :mod:`.estimate` and :mod:`.compare` (``collviz
compare``). Submodules are imported where used, not here: the scenario loader imports
:mod:`.kinds` and must not pull in the programs (torch). The programs take the
:class:`~collviz.runtime.scenarios.schema.Scenario` from where it is defined, never from the loader.
"""

__all__: list[str] = []
