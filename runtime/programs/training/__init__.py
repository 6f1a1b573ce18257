"""Training programs: a ring all-reduce hop by hop, DDP, FSDP2 (and HSDP, FSDP+TP), TP, MoE, PP.

One module per scenario kind (:mod:`.ring`, :mod:`.ddp`, :mod:`.fsdp`, :mod:`.tp`, :mod:`.moe`,
:mod:`.pp`), each with a ``build`` function registered in
:data:`collviz.runtime.programs.registry.BUILDERS`; shared pieces are :mod:`.common` (the program
base and phase sequencing), :mod:`.model` (the tiny GPT and MLP), :mod:`.observer` (collectives
seen through a dispatch mode) and :mod:`.fsdp_checks`. The kinds' settings and narration keys are
data, in :mod:`collviz.runtime.scenario_files.training_kinds`. Submodules are imported where used,
not here.
"""

__all__: list[str] = []
