"""collviz: real collectives on real ranks, shown live in a terminal.

The code lives in two packages: :mod:`collviz.runtime` (headless: launch, workers, the wire,
observation, scenario programs, reports) and :mod:`collviz.app` (the command line and the Textual
viewer). ``python -m collviz`` is the ``collviz`` command.

A script run by ``collviz run --nproc N train.py`` may mark its steps with ``collviz.step(name)``
and name what to account memory for with ``collviz.watch(model, optimizer)``; both are no-ops
when collviz is not running the script (:mod:`collviz.marks`).
"""

from .marks import step, watch

__version__ = "0.2.0"

__all__ = ["__version__", "step", "watch"]
