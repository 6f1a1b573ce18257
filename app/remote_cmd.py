"""``collviz worker`` (a torchrun entry point) and ``collviz view --listen`` (its viewer)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Sequence

from collviz.runtime.errors import UsageError

__all__ = ["cmd_worker", "cmd_view"]

WORKER_EPILOG = """\
Runs as torchrun's entry point; RANK, WORLD_SIZE, LOCAL_RANK and MASTER_ADDR/PORT come from it.
Two nodes, 2 ranks each, streaming to a viewer on HOST (give every process the same secret):

  export COLLVIZ_SECRET=$(openssl rand -hex 16)          # the same value everywhere
  collviz view --listen 0.0.0.0:5555                     # on HOST (or --headless --record t.cvz)
  torchrun --nnodes 2 --nproc-per-node 2 --node-rank 0 --master-addr NODE0 --master-port 29500 \\
      -m collviz.app.cli worker all-reduce --viewer tcp://HOST:5555     # on node 0
  torchrun --nnodes 2 --nproc-per-node 2 --node-rank 1 --master-addr NODE0 --master-port 29500 \\
      -m collviz.app.cli worker all-reduce --viewer tcp://HOST:5555     # on node 1
"""


def _env_int(name: str) -> int:
    value = os.environ.get(name)
    if value is None or not value.isdigit():
        raise UsageError(f"${name} is not set: collviz worker runs under torchrun (see: collviz worker SCENARIO --help)")
    return int(value)


def cmd_worker(argv: Sequence[str]) -> int:
    """Run this process's rank of SCENARIO, streaming signed events to ``--viewer``."""
    from collviz.app.cli import check_run_numbers
    from collviz.app.parsing import run_options, run_parser

    if not argv or argv[0].startswith("-"):
        raise UsageError("usage: collviz worker SCENARIO --viewer tcp://HOST:PORT [options] (under torchrun)")
    name, rest = argv[0], argv[1:]
    parser = run_parser(name)
    parser.prog = f"collviz worker {name}"
    parser.epilog = WORKER_EPILOG
    parser.add_argument("--viewer", required=True, metavar="URL", help="where the viewer listens: tcp://HOST:PORT")
    parser.add_argument("--secret-file", type=Path, metavar="FILE", help="shared secret (default: $COLLVIZ_SECRET)")
    args = parser.parse_args(rest)
    if args.step or args.headless or args.record or args.gpus is not None:
        raise UsageError("collviz worker takes no --step, --headless, --record or --gpus: torchrun sets the ranks, the viewer records")
    if not args.viewer.startswith("tcp://"):
        raise UsageError(f"--viewer {args.viewer!r}: expected tcp://HOST:PORT")
    rank, world_size, local_rank = _env_int("RANK"), _env_int("WORLD_SIZE"), _env_int("LOCAL_RANK")
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world_size))

    import torch

    from collviz.runtime.launch import PROCESS_GROUP_GRACE_S, BackendChoice, RunPlan, run_start_fields
    from collviz.runtime.scenarios.registry import build_program
    from collviz.runtime.remote import load_secret
    from collviz.runtime.scenarios.loading import find_scenario
    from collviz.runtime.wire.transport import Endpoints
    from collviz.runtime.worker import WorkerConfig, worker_main

    scenario = find_scenario(name)
    check_run_numbers(args, scenario.collective, world_size)
    program = build_program(scenario, world_size, run_options(args))
    gpus = torch.cuda.device_count()  # a torchrun worker is not a forking parent: CUDA is fine here
    if args.backend == "nccl" or (args.backend == "auto" and gpus >= local_world):
        if gpus < local_world:
            raise UsageError(f"--backend nccl needs {local_world} GPUs on this node, {gpus} visible")
        backend = BackendChoice("nccl", "cuda", f"NCCL under torchrun, {local_world} GPUs per node")
    else:
        backend = BackendChoice("gloo", "cpu", "gloo on CPU under torchrun" + ("" if args.backend == "gloo" else ": not enough GPUs"))
    plan = RunPlan(scenario=scenario, world_size=world_size, backend=backend, program=program, timeout_s=args.timeout)
    run = os.environ.get("TORCHELASTIC_RUN_ID", "")
    run = f"{run}-{os.environ.get('MASTER_ADDR', '')}-{os.environ.get('MASTER_PORT', '')}".strip("-")
    config = WorkerConfig(
        run=run, world_size=world_size, backend=backend.backend, device_kind=backend.device_kind,
        init_method="env://", endpoints=Endpoints(events=args.viewer, control=""), step=False,
        timeout_s=args.timeout + PROCESS_GROUP_GRACE_S, program=program, narration=dict(scenario.narration),
        log_dir=None, local_world_size=local_world, secret=load_secret(args.secret_file),
        run_start=run_start_fields(plan, os.getpid()),
    )
    worker_main(config, rank, local_rank)


def cmd_view(argv: Sequence[str]) -> int:
    """Listen for remote workers; show them in the viewer, or headless with a summary."""
    from collviz.app.cli import check_record_option
    from collviz.app.parsing import OneLineParser, add_record_option

    parser = OneLineParser(prog="collviz view", description="Receive the events of workers started by torchrun.",
                     epilog=WORKER_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    parser.add_argument("--listen", required=True, metavar="HOST:PORT",
                        help="address to listen on (PORT and PORT+1); beyond loopback a shared secret is required")
    parser.add_argument("--headless", action="store_true", help="print the summary instead of opening the viewer")
    add_record_option(parser)
    parser.add_argument("--secret-file", type=Path, metavar="FILE", help="shared secret (default: $COLLVIZ_SECRET)")
    parser.add_argument("--timeout", type=float, default=30.0, metavar="S", help="hang report threshold (default 30)")
    args = parser.parse_args(argv)
    from collviz.app.limits import check_seconds
    from collviz.runtime.remote import (
        SECRET_ENV,
        RemoteSession,
        check_listen_address,
        generated_secret,
        load_secret,
        parse_listen,
    )

    host, port = parse_listen(args.listen)
    check_seconds("--timeout", args.timeout)
    check_record_option(args)
    secret = load_secret(args.secret_file)
    check_listen_address(host, secret)
    if secret is None:  # loopback: a secret all the same, so that no other local process can claim the viewer
        secret = generated_secret()
        print(f"collviz: no shared secret given; start the workers with this in their environment:\n"
              f"export {SECRET_ENV}={secret.decode()}", file=sys.stderr, flush=True)
    session = RemoteSession(host=host, port=port, secret=secret, record=args.record, timeout_s=args.timeout)
    url = f"tcp://[{host}]:{port}" if ":" in host else f"tcp://{host}:{port}"
    print(f"collviz: listening on {host}:{port} for torchrun workers (collviz worker … --viewer {url})",
          file=sys.stderr, flush=True)
    if args.headless:
        from collviz.runtime.headless import run_headless

        return run_headless(session)
    from collviz.app.app import run_viewer

    session.start()
    from collviz.runtime.headless import report_recording

    return report_recording(session, run_viewer(session=session), sys.stderr)
