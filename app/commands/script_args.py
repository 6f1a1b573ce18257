"""The command line of ``collviz run [options] SCRIPT.py [script args…]``: a user's own script.

As with torchrun, collviz's options come before the script and everything after the script's
name is the script's own; torchrun's options may follow collviz's (:func:`split_own_options`;
read by :mod:`collviz.runtime.sessions.torchrun_line`). ``collviz run`` hands its arguments here
when the first one names a ``.py`` file or is an option (a scenario's name always comes first).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from .options import (
    OneLineParser,
    add_headless_option,
    add_json_option,
    add_record_option,
    command_parser,
    path_argument,
)

__all__ = ["SCRIPT_EPILOG", "is_script_run", "own_options_parser", "script_parser", "split_own_options"]

SCRIPT_EPILOG = """\
Your script runs on N ranks with torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), so its own init_process_group() works unchanged;
it picks its backend and devices itself.

By default, in the viewer and headless, collviz adds nothing to your script's calls: each rank
runs with torch's own Flight Recorder on (TORCH_FR_BUFFER_SIZE=2000 unless you set it) and its
worker server on rank<r>.sock in the run's folder, which collviz reads while the ranks run (each
call shown as the ranks issue and complete it: op, group, sizes, dtype, sequence number; not
timed on gloo); each rank writes its recorder there as it ends, read last. A wait that lasts
--timeout is a hang: the run fails, naming the missing rank and its line of code. A failing or
interrupted run (Ctrl-C) first has every rank still alive dump where it is. --observe runs the
detailed observer instead: per-call completion times on gloo, collviz.step and collviz.watch,
memory, at 43-50 us of CPU per call. No mode captures values or provenance; the observer adds
no copies, waits or extra collectives.

Each rank's stdout and stderr reach the terminal as under torchrun --tee, each line
prefixed with its rank ([rank0]: ...): as they are written when headless (all on stderr with
--json), after the viewer closes otherwise. They are also written to rank<r>.log in the run's
temporary folder, deleted when the run succeeds and named when it fails; --logs DIR keeps them.
With --observe, mark training steps with collviz.step (one viewer step each);
outside a step each collective is a step of its own:

  import collviz
  for index in range(steps):
      with collviz.step(f"train step {index}"):
          ...

  collviz run --nproc 4 examples/fsdp_train.py --steps 3
  collviz run --nproc 4 --headless --record fsdp.cvz examples/fsdp_train.py

After collviz's options, torchrun's own (every one, both spellings, read by torch's parser):
torch's launcher then starts the ranks, under the observer; node 0 shows the whole job:

  collviz run --headless --standalone --nproc_per_node=4 train.py
  collviz run --headless --nnodes 2 --node-rank K --nproc-per-node 4 --master-addr NODE0 \\
      --master-port 29500 -m MODULE          # on each node K (Slurm: srun, once per node)

Or under torchrun itself, streaming to a viewer (collviz view --listen):

  torchrun --nproc-per-node 4 -m collviz.app.cli run --viewer tcp://HOST:5555 train.py
"""


def own_options_parser() -> OneLineParser:
    """collviz's own options of ``collviz run`` (before torchrun's, or before the script)."""
    parser = command_parser("collviz run", "Run your own training script on N ranks and watch its collectives.",
                            SCRIPT_EPILOG)
    parser.add_argument("--nproc", type=int, default=None, metavar="N",
                        help="ranks to start on this machine (default 1); alone, with collviz's own launcher, read "
                             "from each rank's Flight Recorder; with torchrun's options, torchrun's --nproc-per-node")
    add_headless_option(parser, "the summary of every collective, read from each rank's Flight Recorder")
    add_json_option(parser, "the headless summary")
    add_record_option(parser)
    parser.add_argument("--observe", action="store_true",
                        help="run the detailed observer instead of reading Flight Recorder (per-call times on gloo, "
                             "steps, memory; 43-50 us of CPU per call)")
    parser.add_argument("--timeout", type=float, default=30.0, metavar="S",
                        help="a collective some ranks entered and others did not for S seconds is a hang, naming "
                             "who waits where (default 30): read from Flight Recorder, the run then fails, naming the "
                             "missing ranks' lines of code; with --observe it is reported and the run waits for the "
                             "script's own process-group timeout, or Ctrl-C")
    parser.add_argument("--logs", type=path_argument, metavar="DIR",
                        help="also append each rank's stdout and stderr to DIR/rank<r>.log and keep them (DIR is "
                             "created if missing); without it those files are in a temporary folder, deleted when "
                             "the run succeeds (with torchrun's options: torchrun's --log-dir)")
    parser.add_argument("--viewer", metavar="URL",
                        help="under torchrun: run this process's rank and stream its events to collviz view --listen "
                             "at tcp://HOST:PORT")
    parser.add_argument("--secret-file", type=path_argument, metavar="FILE",
                        help="with --viewer, or with torchrun's options: the shared secret (default: $COLLVIZ_SECRET)")
    return parser


def script_parser() -> OneLineParser:
    """``collviz run [--nproc N] [--headless] [--record FILE] … SCRIPT.py [args…]``."""
    parser = own_options_parser()
    parser.add_argument("script", type=path_argument, metavar="SCRIPT.py",
                        help="your script (its name must end in .py)")
    parser.add_argument("script_args", nargs=argparse.REMAINDER, metavar="ARGS",
                        help="the script's own arguments")
    return parser


def split_own_options(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """``argv`` split where collviz's own options end: (collviz's, the rest: torchrun's command
    line, or the script and its arguments)."""
    known = own_options_parser()._option_string_actions
    index = 0
    while index < len(argv) and argv[index].split("=")[0] in known and argv[index] not in ("-h", "--help"):
        action = known[argv[index].split("=")[0]]
        index += 1 if action.nargs == 0 or "=" in argv[index] else 2
    return list(argv[:index]), list(argv[index:])


def is_script_run(argv: Sequence[str]) -> bool:
    """Whether ``collviz run ARGV`` runs a script: its first argument names a ``.py`` file or is
    an option other than ``--help``."""
    if not argv:
        return False
    first = argv[0]
    return first.endswith(".py") or first.startswith("-") and first not in ("-h", "--help")
