"""The user's script (or module, torchrun's ``-m``) and its arguments, checked in the launcher
before any process starts."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError
from ..wire.files import read_regular_file, write_error_text

__all__ = ["MAX_SCRIPT_BYTES", "UserScript", "check_module", "check_script"]

MAX_SCRIPT_BYTES = 16 << 20
"""A script larger than this is refused unread (no training script is 16 MiB of source)."""


@dataclass(frozen=True)
class UserScript:
    """A Python script every rank runs as ``__main__``, with the arguments after its name; or,
    where ``module`` is set, that module (``python -m MODULE``), found at ``path``."""

    path: Path
    """Absolute path of the script (of the module's file, for a module)."""
    args: tuple[str, ...] = ()
    module: str = ""
    """The module's name, as torchrun's ``-m MODULE`` gives it; empty for a script."""

    @property
    def name(self) -> str:
        """The script's file name or the module's name (how the run is called: ``fsdp_train.py``)."""
        return self.module or self.path.name

    @property
    def command(self) -> str:
        """The script (or ``-m MODULE``) and its arguments, for the banner and RunStart."""
        return " ".join([f"-m {self.module}" if self.module else str(self.path), *self.args])


def check_script(path: str | Path, args: tuple[str, ...] | list[str] = ()) -> UserScript:
    """The script at ``path`` with ``args``; a one-line UsageError when it is not a ``.py`` file,
    does not exist, is not a regular readable file, or is not Python that compiles."""
    given = Path(path)
    if given.suffix != ".py":
        raise UsageError(f"{path}: not a Python script (its name must end in .py)")
    try:
        source = read_regular_file(given, MAX_SCRIPT_BYTES, "script")
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except OSError as exc:
        raise UsageError(f"{path}: {write_error_text(exc)}") from None
    try:
        compile(source, str(given), "exec", dont_inherit=True)
    except SyntaxError as exc:
        where = f"{path}:{exc.lineno}" if exc.lineno else str(path)
        raise UsageError(f"{where}: not Python that compiles ({exc.msg})") from None
    except ValueError as exc:  # null bytes, on Pythons that raise ValueError for them
        raise UsageError(f"{path}: not Python source ({exc})") from None
    return UserScript(given.resolve(), tuple(args))


def check_module(name: str, args: tuple[str, ...] | list[str] = ()) -> UserScript:
    """The module ``name`` (found from the current folder, as ``python -m`` finds it) with
    ``args``; a one-line UsageError when no such module exists."""
    from importlib.util import find_spec

    sys.path.insert(0, os.getcwd())
    try:
        spec = find_spec(name)
    except (ImportError, ValueError) as exc:
        raise UsageError(f"-m {name}: {exc}") from None
    finally:
        sys.path.pop(0)
    if spec is None or spec.origin is None:
        raise UsageError(f"-m {name}: no module named {name!r} (from {os.getcwd()})")
    return UserScript(Path(spec.origin).resolve(), tuple(args), module=name)
