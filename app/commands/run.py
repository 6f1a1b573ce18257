"""``collviz SCENARIO [options]`` (or ``collviz run SCENARIO``): run a scenario, live in the
viewer or headless. ``SCENARIO`` is a shipped scenario's name or a scenario file (``.toml``).

``collviz run [options] SCRIPT.py [args…]`` runs the user's own script on N ranks instead (its
command line: :mod:`.script_args`), or, with ``--viewer``, this torchrun process's rank of it.
With torchrun's own options after collviz's (``collviz run --headless --standalone
--nproc_per_node=2 train.py``, ``… --nnodes 2 --node-rank K … -m MODULE``), torch's own launcher
starts the ranks (:mod:`collviz.runtime.sessions.agent`).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from collviz.runtime.errors import UsageError

from .options import OneLineParser, check_record_option, make_output_folder
from .playing import headless_instead, play_plan, run_scenario
from .scenario_args import run_parser
from .script_args import is_script_run, own_options_parser, script_parser, split_own_options

if TYPE_CHECKING:
    from collviz.runtime.sessions.agent import AgentSession
    from collviz.runtime.userjob.script import UserScript

__all__ = ["build_parser", "main"]


def build_parser(name: str = "SCENARIO") -> OneLineParser:
    """The parser of a run of scenario ``name`` (its options, described for that scenario)."""
    return run_parser(name)


def main(argv: Sequence[str]) -> int:
    """Run the scenario ``argv`` names with the options that follow it, or a script (see above)."""
    if is_script_run(argv):
        own, torchrun_words = split_own_options(argv)
        if torchrun_words and torchrun_words[0].startswith("-") and torchrun_words[0] not in ("-h", "--help"):
            return _run_through_torchrun(own_options_parser().parse_args(own), torchrun_words)
        return _run_script(script_parser().parse_args(argv))
    if not argv or argv[0].startswith("-"):
        if argv and argv[0] in ("-h", "--help"):
            build_parser().print_help()
            print(f"\nOr your own script:\n\n{script_parser().format_help()}")
            return 0
        raise UsageError("give a scenario to run first (collviz list shows them; see: collviz SCENARIO --help)")
    name, rest = argv[0], argv[1:]
    return run_scenario(name, run_parser(name).parse_args(rest))


def _run_script(args: argparse.Namespace) -> int:
    """Run the user's script on ``--nproc`` ranks (viewer or headless), or under torchrun (``--viewer``)."""
    from collviz.runtime.userjob.script import check_script

    script = check_script(args.script, args.script_args)
    if args.viewer is not None:
        _run_under_torchrun(args, script)
    from collviz.runtime.plan import plan_script

    if args.secret_file is not None:
        raise UsageError("--secret-file goes with --viewer (a rank under torchrun streaming to a viewer)")
    check_record_option(args)
    if args.logs is not None:
        make_output_folder(args.logs, "--logs")
    plan = plan_script(script, 1 if args.nproc is None else args.nproc, record=args.record, timeout_s=args.timeout,
                       logs=args.logs, observe=args.observe)
    return play_plan(plan, headless=headless_instead(args.headless, args.json), json_output=args.json)


def _run_under_torchrun(args: argparse.Namespace, script: UserScript) -> None:
    """This torchrun process's rank of ``script``, streaming to ``--viewer`` (never returns)."""
    if args.nproc is not None or args.headless or args.json or args.record is not None or args.logs is not None:
        raise UsageError("with --viewer, torchrun starts the ranks, collects their output and the viewer records: "
                         "drop --nproc, --headless, --json, --record and --logs")
    if not args.viewer.startswith("tcp://"):
        raise UsageError(f"--viewer {args.viewer!r}: expected tcp://HOST:PORT")
    if "RANK" not in os.environ:
        raise UsageError("--viewer runs under torchrun, which sets RANK and WORLD_SIZE: torchrun --nproc-per-node N "
                         "-m collviz.app.cli run --viewer tcp://HOST:PORT SCRIPT.py")
    from collviz.runtime.limits import check_seconds
    from collviz.runtime.sessions.access import SECRET_ENV, load_secret
    from collviz.runtime.torchrun_rank import run_torchrun_script

    check_seconds("--timeout", args.timeout)
    secret = load_secret(args.secret_file)
    if secret is None:
        raise UsageError(f"--viewer needs the viewer's shared secret: ${SECRET_ENV} or --secret-file")
    run_torchrun_script(script, viewer=args.viewer, secret=secret, timeout_s=args.timeout)


def _run_through_torchrun(args: argparse.Namespace, words: list[str]) -> int:
    """Run the job torchrun's command line ``words`` describes through torch's own launcher; on
    node 0, collect the whole job's events (viewer or headless)."""
    from collviz.runtime.limits import check_seconds
    from collviz.runtime.sessions.access import generated_secret, load_secret
    from collviz.runtime.sessions.agent import AgentSession, agent_command, agent_environment, run_agent
    from collviz.runtime.sessions.listening import RemoteSession
    from collviz.runtime.sessions.torchrun_line import read_torchrun_line
    from collviz.runtime.userjob.script import check_module, check_script

    for given, instead in ((args.observe, "--observe: the ranks torchrun starts always run under the observer"),
                           (args.logs, "--logs: give torchrun's --log-dir DIR instead"),
                           (args.viewer, "--viewer: with torchrun's options, collviz run starts torchrun itself")):
        if given:
            raise UsageError(instead)
    check_seconds("--timeout", args.timeout)
    line = read_torchrun_line(["--nproc-per-node", str(args.nproc), *words] if args.nproc is not None else words)
    check = check_module if line.module else check_script
    script = check(line.target, line.target_args)
    secret = load_secret(args.secret_file)
    host, port = line.events_address()
    viewer = f"tcp://[{host}]:{port}" if ":" in host else f"tcp://{host}:{port}"
    command = agent_command(line, script)
    if not line.collects:
        if args.record is not None or args.json:
            raise UsageError("--record and --json belong to node 0's collviz run (--node-rank 0), which has the "
                             "whole job")
        print(f"collviz: node {line.node_rank}: torchrun starts this node's ranks; their events go to node 0's "
              f"collviz run at {viewer}", file=sys.stderr, flush=True)
        return run_agent(command, agent_environment(viewer, args.timeout, secret, share=False))
    check_record_option(args)
    headless = headless_instead(args.headless, args.json)
    shared = secret or generated_secret()
    listen = host if line.one_node else "0.0.0.0"  # the ranks of every node reach it
    listening = RemoteSession(host=listen, port=port, secret=shared, record=args.record, timeout_s=args.timeout)
    env = agent_environment(viewer, args.timeout, shared, share=secret is None and not line.one_node)
    session = AgentSession(listening, command, env)
    if not headless:
        return _view_torchrun_job(session)
    from collviz.runtime.sessions.headless import run_headless

    session.output = sys.stderr.fileno() if args.json else None  # --json: stdout holds the document alone
    session.start()  # listens now (a port in use is one line), then starts torchrun
    return run_headless(session, as_json=args.json)


def _view_torchrun_job(session: AgentSession) -> int:
    """The viewer on node 0's ``session``; torchrun's output (its ranks' lines among them) waits in
    a temporary file meanwhile, and follows on stderr once the viewer has closed."""
    from collviz.app.app import run_viewer
    from collviz.runtime.sessions.headless import report_outcome

    with tempfile.TemporaryFile() as output:
        session.output = output
        session.start()
        status = run_viewer(session=session)
        output.seek(0)
        sys.stderr.flush()
        shutil.copyfileobj(output, sys.stderr.buffer)
        sys.stderr.buffer.flush()
    return report_outcome(session, status, sys.stderr)
