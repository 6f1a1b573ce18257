"""Programs the checks start as scripts, kept in a folder of their own: a script's folder is first
on its ``sys.path``, where the check's own modules (``report``, ``context``, …) would shadow any
library module of the same name."""
