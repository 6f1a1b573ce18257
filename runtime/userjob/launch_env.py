"""What ``collviz run`` tells the ranks torch's launcher starts for it, through their environment
(the agent's, which its ranks inherit): read in each rank by
:func:`~collviz.runtime.torchrun_rank.launched_main`, set by :mod:`collviz.runtime.sessions.agent`."""

from __future__ import annotations

__all__ = ["JOB_SECRET_ENV", "SECRET_KEY", "SHARE_SECRET_ENV", "TIMEOUT_ENV", "VIEWER_ENV"]

VIEWER_ENV = "COLLVIZ_VIEWER"
"""Set by ``collviz run`` for the ranks torch's launcher starts: node 0's ``tcp://HOST:PORT``."""

TIMEOUT_ENV = "COLLVIZ_TIMEOUT"
"""Set by ``collviz run`` for the ranks torch's launcher starts: its ``--timeout`` in seconds."""

JOB_SECRET_ENV = "COLLVIZ_JOB_SECRET"
"""Set by ``collviz run`` for the ranks torch's launcher starts, where it knows the shared secret
(node 0's, or one the user gave every node)."""

SHARE_SECRET_ENV = "COLLVIZ_SHARE_SECRET"
"""Set by node 0's ``collviz run`` of a job on several nodes: its ranks put the shared secret in
the job's store (:data:`SECRET_KEY`), where the ranks of the other nodes, started without it,
read it. Whoever reaches the job's store can join the job itself: the secret is no more exposed
than the job is."""

SECRET_KEY = "collviz/secret"
"""The key of the shared secret in the job's store (torchrun's MASTER_ADDR:MASTER_PORT)."""
