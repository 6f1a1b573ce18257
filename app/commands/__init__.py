"""The command line: one module per command, each with ``build_parser()`` and ``main(argv)``.

``collviz.app.cli`` holds the command table and dispatches to these modules; nothing imports it
back. What several commands share is in modules that are not commands: ``options`` (the parser
with one-line errors and the option groups declared once), ``scenario_args`` (a scenario run's
options) and ``playing`` (running a scenario or replaying a trace, viewer or headless). A command
never imports another command (an import-linter contract holds it); one that needs another's work
starts it as ``python -m collviz …`` (a lesson's comparison, serve's recordings).

May import: the runtime, and the viewer (``collviz.app.app``, ``compare_view``, ``notice``) inside
functions, when a command opens it.
"""
