"""``python -m collviz …``: the same command line as the ``collviz`` console script."""

from collviz.app.cli import entry

entry()
