"""torchrun's own command line, read by torch's own parser, and what ``collviz run`` does with it.

``collviz run [collviz options] [torchrun options] SCRIPT.py|-m MODULE [args…]`` hands everything
after its own options to ``torch.distributed.run.get_args_parser()`` (torch's parser, so every
option torchrun takes is taken, in both spellings, with torchrun's ``PET_*`` environment defaults).
:func:`read_torchrun_line` returns the :class:`TorchrunLine`: the user's option words, kept as
written for torch's launcher, and where this node's ``collviz run`` sends or receives the job's
events.

Node 0 (``--node-rank 0``, torchrun's default; always with ``--standalone`` or one node) collects
the whole job: it listens for every rank's signed events on the rendezvous host, at the rendezvous
port + 1 (and + 2), or on a free loopback port when the job is on this machine alone.
"""

from __future__ import annotations

import argparse
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NoReturn

from ..errors import UsageError

__all__ = ["C10D_DEFAULT_PORT", "LOOPBACK", "MASTER_DEFAULT_PORT", "TorchrunLine", "free_port_pair", "read_torchrun_line"]

LOOPBACK = "127.0.0.1"

MASTER_DEFAULT_PORT = 29500
"""torchrun's ``--master-port`` where none is given (for a job on several nodes)."""

C10D_DEFAULT_PORT = 29400
"""torch's c10d rendezvous port where ``--rdzv-endpoint`` names a host alone."""

_TARGET_FLAGS = ("-m", "--module", "--no-python", "--no_python", "--run-path", "--run_path")
"""torchrun's flags that say what its target is: collviz replaces the target with its own rank
entry (which runs the user's script or module), so these are not passed on."""


@dataclass(frozen=True)
class TorchrunLine:
    """One node's torchrun command line, as ``collviz run`` launches it."""

    options: tuple[str, ...]
    """torchrun's options as the user wrote them, without the target's flags (``-m``, …)."""
    target: str
    """The script's path or the module's name."""
    target_args: tuple[str, ...]
    module: bool
    """Whether :attr:`target` is a module (torchrun's ``-m``)."""
    nnodes: str
    """torchrun's ``--nnodes`` as given (``2`` or ``1:4``)."""
    node_rank: int
    standalone: bool
    rendezvous_host: str
    rendezvous_port: int
    """The rendezvous address the job's nodes share (``--master-addr/--master-port``, or
    ``--rdzv-endpoint`` with a rendezvous backend; torchrun's default ports where none is given)."""
    tee_given: bool
    """Whether the user chose torchrun's ``--tee`` or ``--redirects`` (else collviz asks for ``--tee 3``)."""

    @property
    def one_node(self) -> bool:
        """Whether the whole job runs on this machine (``--standalone`` or ``--nnodes 1``)."""
        return self.standalone or self.nnodes in ("1", "1:1")

    @property
    def collects(self) -> bool:
        """Whether this node's ``collviz run`` collects the whole job (node 0)."""
        return self.one_node or self.node_rank == 0

    def events_address(self) -> tuple[str, int]:
        """Where node 0 listens for every rank's events (the ranks send there): a free loopback
        port (found now) when the job is on this machine alone, else the rendezvous host at its port + 1."""
        if self.one_node:
            return LOOPBACK, free_port_pair()
        return self.rendezvous_host, self.rendezvous_port + 1


def free_port_pair() -> int:
    """A port P with P and P+1 free on loopback now (the listener binds both)."""
    for _ in range(50):
        with socket.socket() as first, socket.socket() as second:
            first.bind((LOOPBACK, 0))
            port = first.getsockname()[1]
            try:
                second.bind((LOOPBACK, port + 1))
            except OSError:
                continue
            return port
    raise UsageError("no two consecutive free ports on 127.0.0.1 for the job's events")


def _raise_usage(message: str) -> NoReturn:
    raise UsageError(f"{message} (torchrun's options: see: collviz run --help)")


def _torch_parser() -> argparse.ArgumentParser:
    """torch's own torchrun parser, its errors one line."""
    from torch.distributed.run import get_args_parser

    parser = get_args_parser()
    parser.error = _raise_usage  # type: ignore[method-assign]
    return parser


def _rendezvous(args: argparse.Namespace) -> tuple[str, int]:
    """The host and port the job's nodes meet at, as torchrun reads them (its default ports where
    none is given: 29400 for a rendezvous endpoint, 29500 for ``--master-port``)."""
    if args.rdzv_backend != "static" and args.rdzv_endpoint:
        host, _, port = args.rdzv_endpoint.rpartition(":")
        if not host:
            return port, C10D_DEFAULT_PORT  # a host alone
        if not port.isdigit():
            raise UsageError(f"--rdzv-endpoint {args.rdzv_endpoint!r}: expected HOST:PORT")
        return host.strip("[]"), int(port)
    return args.master_addr, int(args.master_port) if args.master_port is not None else MASTER_DEFAULT_PORT


def read_torchrun_line(words: Sequence[str]) -> TorchrunLine:
    """The torchrun command line ``words`` (options, then the script or ``-m MODULE``, then its
    arguments), read by torch's parser; a one-line UsageError for what torch's parser refuses,
    and for ``--no-python`` (a program collviz cannot watch from inside)."""
    args = _torch_parser().parse_args(list(words))
    tail = 1 + len(args.training_script_args)
    given = tuple(words[:len(words) - tail])
    if args.no_python:
        raise UsageError("--no-python: collviz watches a Python rank from inside; give a script or -m MODULE "
                         "(or run the program under torchrun itself)")
    host, port = _rendezvous(args)
    return TorchrunLine(
        options=tuple(word for word in given if word not in _TARGET_FLAGS),
        target=args.training_script, target_args=tuple(args.training_script_args), module=args.module,
        nnodes=str(args.nnodes), node_rank=int(args.node_rank), standalone=bool(args.standalone),
        rendezvous_host=host, rendezvous_port=port,
        tee_given=any(word.split("=")[0] in ("--tee", "--redirects") or word[:2] in ("-t", "-r") for word in given))
