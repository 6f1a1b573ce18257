"""``collviz worker SCENARIO --viewer tcp://HOST:PORT``: one rank of a torchrun job, streaming
signed events to ``collviz view --listen`` (the start-up itself is :mod:`collviz.runtime.torchrun_rank`'s)."""

from __future__ import annotations

from collections.abc import Sequence

from collviz.runtime.errors import UsageError

from .options import OneLineParser, make_output_folder, path_argument
from .scenario_args import memory_need, run_options, run_parser

__all__ = ["build_parser", "main", "WORKER_EPILOG"]

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


def build_parser(name: str = "SCENARIO") -> OneLineParser:
    """A scenario run's parser, plus where the viewer listens and the shared secret."""
    parser = run_parser(name)
    parser.prog = f"collviz worker {name}"
    parser.epilog = WORKER_EPILOG
    parser.add_argument("--viewer", required=True, metavar="URL", help="where the viewer listens: tcp://HOST:PORT")
    parser.add_argument("--secret-file", type=path_argument, metavar="FILE",
                        help="shared secret (default: $COLLVIZ_SECRET)")
    return parser


def main(argv: Sequence[str]) -> int:
    """Run this process's rank of SCENARIO (it never returns: the rank's process exits)."""
    if not argv or argv[0].startswith("-"):
        if argv and argv[0] in ("-h", "--help"):
            build_parser().print_help()
            return 0
        raise UsageError("usage: collviz worker SCENARIO --viewer tcp://HOST:PORT [options] (under torchrun)")
    name, rest = argv[0], argv[1:]
    args = build_parser(name).parse_args(rest)
    if args.step or args.headless or args.json or args.record or args.gpus is not None:
        raise UsageError("collviz worker takes no --step, --headless, --json, --record or --gpus: torchrun sets "
                         "the ranks, the viewer records")
    if not args.viewer.startswith("tcp://"):
        raise UsageError(f"--viewer {args.viewer!r}: expected tcp://HOST:PORT")
    from collviz.runtime.scenario_files.loading import find_scenario
    from collviz.runtime.sessions.access import load_secret
    from collviz.runtime.torchrun_rank import run_torchrun_worker, torchrun_rank

    world_size = torchrun_rank().world_size
    scenario = find_scenario(name)
    if args.memory_viz is not None:
        make_output_folder(args.memory_viz, "--memory-viz")
    run_torchrun_worker(scenario, run_options(args), backend=args.backend, timeout_s=args.timeout,
                        viewer=args.viewer, secret=load_secret(args.secret_file),
                        memory=memory_need(args, scenario.collective, world_size), memory_viz=args.memory_viz)
