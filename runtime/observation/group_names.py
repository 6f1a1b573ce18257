"""How a process group is named wherever torch's own name for it is known: ``0 (default_pg)``,
``1 (mesh_dp)``, or ``1`` when torch gave it no description. torch's Flight Recorder and profiler
write a group as its name and description, and a user's script observed live (``collviz run
--observe``) names its groups the same way, so one job's groups read alike whichever way it is
read. Imports nothing: the importers, which never import torch, use it too."""

from __future__ import annotations

__all__ = ["group_label"]


def group_label(name: str, description: str = "") -> str:
    """Group ``name`` (torch's ``group_name``) with its ``description`` (``group_desc``) in
    parentheses; the name alone where there is none, or torch's ``undefined``."""
    return f"{name} ({description})" if description and description != "undefined" else name
