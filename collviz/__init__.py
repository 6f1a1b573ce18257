"""collviz: real collectives on real ranks, shown live in a terminal.

The code lives in two packages: :mod:`collviz.runtime` (headless: launch, workers, protocol,
traces) and :mod:`collviz.app` (the command line and the Textual viewer).
"""

__version__ = "0.1.0"
