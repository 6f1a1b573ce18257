"""collviz: real collectives on real ranks, shown live in a terminal.

The code lives in two packages: :mod:`collviz.runtime` (headless: launch, workers, the wire,
observation, scenario programs, reports) and :mod:`collviz.app` (the command line and the Textual
viewer). ``python -m collviz`` is the ``collviz`` command.
"""

__version__ = "0.2.0"
