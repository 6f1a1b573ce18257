"""A scenario run's command line (``collviz SCENARIO``, ``collviz worker SCENARIO``).

A run's ``--help`` is written for that scenario: its description, its real defaults (ranks,
dtype, reduce op, root, the settings of a training scenario's file), and only the options it
takes; options it does not take are still parsed (hidden), so giving one is the usual one-line
"does not apply" error rather than argparse's.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from collviz.runtime.errors import UsageError

from .options import (
    OneLineParser,
    add_backend_option,
    add_gpus_option,
    add_headless_option,
    add_json_option,
    add_memory_viz_option,
    add_record_option,
    add_timeout_option,
    add_viewer_options,
    parse_size,
    path_argument,
)

if TYPE_CHECKING:
    from collviz.runtime.plan import MemoryNeed
    from collviz.runtime.scenario_files.loading import Scenario
    from collviz.runtime.programs.program import RunOptions

__all__ = ["run_parser", "run_options", "memory_need"]


def _examples(name: str, collective: bool, fsdp: bool, pipeline: bool = False) -> str:
    """The epilog's examples, for scenario ``name``."""
    lines = [f"collviz {name} --gpus 4                 watch it live on 4 ranks (q quits, ? keys)",
             f"collviz {name} --gpus 4 --step          space releases every rank into the next step",
             f"collviz {name} --headless --record {name}.cvz   a text summary, and a trace to replay"]
    if collective:
        lines.append(f"collviz {name} --size 16MiB --iters 20 --headless   time a big one (median of 20)")
    if fsdp:
        lines.append(f"collviz {name} --gpus 4 --prefetch      the next unit's all-gather issued early")
    if pipeline:
        lines.append(f"collviz {name} --gpus 4 --schedule 1f1b --microbatches 8   the other schedule, a smaller bubble")
    return "examples:\n" + "".join(f"  {line}\n" for line in lines)


_INPUTS = """
Without --size the scenario's worked example is used when one exists for that many ranks;
otherwise inputs are generated (element i of rank r is r*count + i + 1, or cycling with the
largest period that keeps every value and result exact in the dtype; the inputs line says which).
"""

_BACKEND = ("With a GPU visible the backend is NCCL (ranks share GPUs when there are fewer than ranks, over NCCL's\n"
            "socket transport); otherwise gloo on CPU. A banner says which, and why.\n")


def _algo_help(collective: str | None) -> str:
    """``--algo``'s help: the algorithms this collective has."""
    from collviz.runtime.programs.algorithms.plans import ALGORITHMS

    names = ", ".join(("library", *ALGORITHMS.get(collective or "", ())))
    return f"run it hop by hop with real send/recv: {names} (default library: the backend's own call)"


def _find(name: str) -> Scenario | None:
    from collviz.runtime.scenario_files.loading import find_scenario

    try:
        return find_scenario(name)
    except UsageError:
        return None  # the run reports it, after parsing


def _settings_text(scenario: Scenario) -> str:
    """``settings (from fsdp.toml): seed 0, vocab 64, …`` for a scenario that has settings."""
    if not scenario.settings:
        return ""
    listed = ", ".join(f"{key} {value}" for key, value in scenario.settings.items())
    return f"\nsettings (from {scenario.path.name}; edit a copy and run `collviz FILE`): {listed}\n"


def _note_keys_text(scenario: Scenario) -> str:
    """The phase keys a teacher's ``--notes`` may use for this scenario (and its units, if any)."""
    from collviz.runtime.scenario_files.notes import note_units

    text = f"\nphase keys for --notes: {', '.join(scenario.narration)}\n"
    units = note_units(scenario)
    if units:
        text += (f"one unit's phase only: UNIT.KEY, UNIT one of {', '.join(units)} "
                 f"(e.g. {units[1]}.forward_all_gather)\n")
    return text


def run_parser(name: str) -> OneLineParser:
    """The parser of ``collviz NAME``: every run option, described for scenario NAME."""
    from collviz.runtime.scenario_files.loading import DTYPES, REDUCE_OPS, REDUCING, ROOTED

    scenario = _find(name)
    collective = scenario.collective if scenario is not None and scenario.kind == "collective" else None
    training = scenario is not None and scenario.kind != "collective"

    def shown(applies: bool, text: str) -> str:
        return text if applies or scenario is None else argparse.SUPPRESS

    fsdp = scenario is not None and scenario.kind in ("fsdp", "hsdp")
    epilog = (_examples(name, not training, fsdp, scenario is not None and scenario.kind == "pp") + ("" if training else _INPUTS)
              + (_settings_text(scenario) + _note_keys_text(scenario) if scenario else "") + _BACKEND)
    parser = OneLineParser(prog=f"collviz {name}", allow_abbrev=False, epilog=epilog,
                           description=scenario.description if scenario else "Run a scenario on real worker processes.",
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    add_gpus_option(parser, f"default {scenario.default_gpus}" if scenario else "default: the scenario's")
    add_backend_option(parser)
    add_headless_option(parser)
    add_json_option(parser, "the headless summary")
    parser.add_argument("--step", action="store_true", help="ranks wait at a gate before each phase (viewer: space)")
    add_viewer_options(parser, "step-through whose gates open by themselves every S seconds; space pauses and "
                               "resumes, ← browses back while the run goes on")
    add_record_option(parser)
    add_memory_viz_option(parser)
    parser.add_argument("--notes", type=path_argument, metavar="FILE",
                        help="a teacher's notes (TOML or Markdown, keyed by scenario and phase key) added to the narration")
    op_default = f" (default {scenario.reduce_op})" if scenario and collective in REDUCING and scenario.reduce_op else ""
    parser.add_argument("--op", choices=REDUCE_OPS,
                        help=shown(collective in REDUCING, f"reduce op{op_default}; a worked example may set its own"))
    dtype_default = f"default {scenario.dtype}" if scenario and collective else "default: the scenario's"
    parser.add_argument("--dtype", choices=DTYPES, help=shown(collective is not None, f"element type ({dtype_default})"))
    parser.add_argument("--size", metavar="BYTES",
                        help=shown(collective is not None, "bytes of each rank's input, e.g. 64KiB, 16MiB (generated inputs)"))
    root_default = f" (default {scenario.root})" if scenario and collective in ROOTED else ""
    parser.add_argument("--root", type=int, metavar="R", help=shown(collective in ROOTED, f"root rank{root_default}"))
    parser.add_argument("--iters", type=int, default=1, metavar="N",
                        help=shown(collective is not None, "run the collective N times, timing each (default 1)"))
    parser.add_argument("--algo", metavar="NAME", help=shown(collective is not None, _algo_help(collective)))
    parser.add_argument("--prefetch", action=argparse.BooleanOptionalAction,
                        help=shown(fsdp, "fsdp: issue the next unit's all-gather early (default: off)"))
    parser.add_argument("--reshard-after-forward", action=argparse.BooleanOptionalAction,
                        help=shown(fsdp, "fsdp: free gathered parameters after each unit's forward (default: on)"))
    moe = scenario is not None and scenario.kind == "moe"
    parser.add_argument("--top-k", type=int, metavar="K", help=shown(moe, "moe: experts per token (default: the scenario's)"))
    parser.add_argument("--capacity-factor", type=float, metavar="C",
                        help=shown(moe, "moe: slots per expert = ⌈C · tokens · k / n⌉; beyond, tokens are dropped"))
    pp = scenario is not None and scenario.kind == "pp"
    parser.add_argument("--schedule", choices=("gpipe", "1f1b"),
                        help=shown(pp, "pp: gpipe (all forwards, then all backwards; the default) or 1f1b "
                                       "(a backward as soon as it can: fewer activations kept)"))
    parser.add_argument("--microbatches", type=int, metavar="M",
                        help=shown(pp, "pp: microbatches the batch is cut into (default: the scenario's; "
                                       "a divisor of its batch)"))
    add_timeout_option(parser, float(scenario.settings.get("timeout", 30)) if scenario else 30.0)
    return parser


def run_options(args: argparse.Namespace) -> RunOptions:
    """The scenario overrides given on a run's command line."""
    from collviz.runtime.programs.program import RunOptions

    return RunOptions(reduce_op=args.op, dtype=args.dtype, root=args.root, iters=args.iters,
                      size_bytes=None if args.size is None else parse_size(args.size),
                      prefetch=getattr(args, "prefetch", None),
                      reshard_after_forward=getattr(args, "reshard_after_forward", None),
                      algo=getattr(args, "algo", None), top_k=getattr(args, "top_k", None),
                      capacity_factor=getattr(args, "capacity_factor", None),
                      schedule=getattr(args, "schedule", None), microbatches=getattr(args, "microbatches", None))


def memory_need(args: argparse.Namespace, collective: str, world_size: int) -> MemoryNeed | None:
    """``--iters`` and ``--size`` checked within their bounds; what the run's buffers take per rank
    when ``--size`` is given (for the plan's memory check), else None."""
    from collviz.runtime.limits import MAX_ITERS, check_count, check_size
    from collviz.runtime.plan import MemoryNeed

    check_count("--iters", args.iters, 1, MAX_ITERS)
    if args.size is None:
        return None
    size = check_size("--size", parse_size(args.size))
    from collviz.runtime.programs.collectives import buffers_per_rank

    return MemoryNeed(f"--size {args.size} on {world_size} ranks", size, buffers_per_rank(collective, world_size))
