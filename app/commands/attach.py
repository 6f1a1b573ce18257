"""``collviz attach TARGET``: a user's running job, live in the viewer, read from torch's worker
servers (each rank's Flight Recorder, and the Python stack of each rank the others wait on); with
``--headless``, one snapshot of it, like ``py-spy dump``.

TARGET is the ranks' worker-server sockets: a folder of them, a glob pattern or one socket path
(``TORCH_WORKER_SERVER_SOCKET`` under ``torch.distributed.elastic.control_plane.worker_main``);
or ``HOST:PORT``, the job's store (``MASTER_ADDR:MASTER_PORT``), where
``torch.distributed.debug.start_debug_server()`` put every rank's worker-server address.
``--pid PID …`` reads a job that prepared nothing instead (:mod:`.attach_pid`: each rank's stack
by py-spy). With ``--relay VIEWER:PORT`` it is one node's relay (TARGET: that node's ranks), sending
only what changed to ``collviz attach --listen VIEWER:PORT``, which shows the whole job as TARGET
would. Headless, the exit status is 0 when every rank is in step, 1 when some wait on others (or a rank
did not answer); 2 on a usage error. Without a terminal, attach is headless.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .attach_pid import pid_reader, print_by_pid
from .options import (
    OneLineParser,
    add_headless_option,
    add_json_option,
    add_record_option,
    check_record_option,
    command_parser,
    no_terminal,
    path_argument,
    print_json,
)

if TYPE_CHECKING:
    from collviz.runtime.live.pace import Pace
    from collviz.runtime.live.reading import Reader
    from collviz.runtime.live.workers import Worker
    from collviz.runtime.sessions.live import LiveSession
    from collviz.runtime.wire.relay_link import RelayListener

__all__ = ["build_parser", "main"]

ATTACH_EPILOG = """\
Each rank of your job opens torch's worker server on a socket named after its rank, e.g.:

  os.environ["TORCH_WORKER_SERVER_SOCKET"] = f"/tmp/job/rank{os.environ['RANK']}.sock"
  with torch.distributed.elastic.control_plane.worker_main():
      main()

  collviz attach /tmp/job                   the job live in the viewer (--record t.cvz keeps it)
  collviz attach --headless /tmp/job        one snapshot, exit 1 where ranks wait on others

or every rank calls torch.distributed.debug.start_debug_server() and TARGET is the job's store,
MASTER_ADDR:MASTER_PORT (each rank's address is read there: ranks on every host are reached):

  collviz attach --headless node0:29500

The viewer shows one step per collective call, as each rank issues and completes it (op, group,
sequence number, sizes; durations only where the recorder keeps them: NCCL with
TORCH_NCCL_ENABLE_TIMING=1), and, where ranks wait in a call for others, who is missing and the
line of their own code they are in. It reads at the pace of --watch (below) and ends when no rank
answers (the job ended) or on q; the job goes on either way. --record FILE writes what it showed
as a trace that replay and export read.

The snapshot says, per rank, the call it last completed and the call it is in now; then, where
ranks wait in a call for others (the same in two readings --interval apart), who is missing and
the line of their own code they are in. Only reads are sent (HTTP POSTs to the handlers
fr_trace_json, dump_nccl_trace_json and dump_traceback), each bounded by --timeout; a rank that
does not answer is named, not waited for.

--watch (headless, as --json is) reads again and again and prints each snapshot that differs
from the last, and when the next reading comes (with --json, one document per line, its
next_reading_s), until Ctrl-C, --count readings or no rank answers (the job ended: said in one
line; exit 1 if ranks waited on others then). Every reading costs each rank the building of its
whole Flight Recorder answer (torch cannot send less), so the pace adapts: every --interval
seconds while ranks wait, else every --slowest seconds (however fast the calls move), and, where
ranks on this host are measured (per thread, from /proc), no reading but the first before their
own CPU has paid for it at 0.4 % (a rank that waits or is stalled holds nothing back).

A job that prepared nothing (no worker server) is read by pid, its ranks' Python stacks read with
py-spy, never pausing them (--native adds C++ frames, pausing each rank for the moment of the read):

  collviz attach --headless --pid 4242      torchrun's pid: its ranks are its child processes
  collviz attach --pid 4250 4251            ranks' own pids, live in the viewer

It says which ranks are inside which collective call (known by the function and the line that
called it: a stack holds no group or call number), which are outside any and where, and names
the ranks the others wait on at the line of their own code; then what would show more next time.

Many nodes: one relay per node reads its own ranks and sends only what changed (each recorder
entry new or changed since it last sent it, every --interval; signed with the shared secret) to
one viewer listening for the relays:

  export COLLVIZ_SECRET=$(openssl rand -hex 16)          # the same value everywhere
  collviz attach --listen 0.0.0.0:5560                  # the viewer (or --headless, --watch)
  srun --ntasks-per-node=1 collviz attach --relay VIEWER:5560 /tmp/job

The worker server has no authentication: anyone who can open its socket or port can read it,
so keep the sockets in a folder only you can read, and the ports inside the cluster's network.
"""


def build_parser() -> OneLineParser:
    """``collviz attach (TARGET | --pid PID [PID …] [--native] | --listen HOST:PORT) [--record FILE
    [--force]] [--headless [--json] [--watch [--count N]]] [--slowest S] [--timeout S] [--interval S]``,
    or ``collviz attach --relay HOST:PORT TARGET [--count N]``; ``--secret-file FILE`` with --relay
    or --listen."""
    parser = command_parser("collviz attach", "Watch a running job's ranks live, read from torch's worker servers "
                            "(or, by --pid, their stacks): "
                            "their calls, who waits on whom, and where.", ATTACH_EPILOG)
    parser.add_argument("target", metavar="TARGET", nargs="?",
                        help="the ranks' worker-server sockets (a folder, a glob pattern or one socket path), or "
                             "HOST:PORT, the job's store holding start_debug_server's addresses")
    parser.add_argument("--pid", type=int, nargs="+", metavar="PID",
                        help="instead of TARGET, a job that prepared nothing: torchrun's pid (its ranks are its "
                             "child processes), a rank's, or several ranks'; every rank's Python stack read with "
                             "py-spy, never pausing it")
    parser.add_argument("--native", action="store_true",
                        help="with --pid: C and C++ frames too (where NCCL waits; py-spy pauses each rank for the "
                             "moment of its read)")
    parser.add_argument("--relay", metavar="HOST:PORT",
                        help="run as this node's relay: read TARGET's ranks every --interval and send only what "
                             "changed to the viewer listening at HOST:PORT (signed with $COLLVIZ_SECRET)")
    parser.add_argument("--listen", metavar="HOST:PORT",
                        help="instead of TARGET, show the job the relays send to HOST:PORT (and PORT+1)")
    parser.add_argument("--secret-file", type=path_argument, metavar="FILE",
                        help="with --relay or --listen: the shared secret (default: $COLLVIZ_SECRET)")
    add_headless_option(parser, "one snapshot and exit")
    add_record_option(parser)
    parser.add_argument("--timeout", type=float, metavar="S",
                        help="each request's deadline: connecting and the whole answer, however slowly a server "
                             "sends it; a server past it is named slow, never waited for (default 2; with --pid, "
                             "each rank's stack read: default 10)")
    parser.add_argument("--interval", type=float, default=1.0, metavar="S",
                        help="the time between the two readings that confirm a wait, and between readings while "
                             "ranks wait (the viewer, --watch; default 1)")
    add_json_option(parser, "the snapshot (per rank: last and current call, the call it waits in or is "
                            "missing from, its stack line)")
    parser.add_argument("--watch", action="store_true",
                        help="read again and again, printing each snapshot that differs from the last")
    parser.add_argument("--count", type=int, metavar="N", help="with --watch: stop after N readings")
    parser.add_argument("--slowest", type=float, default=10.0, metavar="S",
                        help="the viewer and --watch: the longest time between readings while the job is steady "
                             "(default 10)")
    return parser


def main(argv: Sequence[str]) -> int:
    """Show the job at TARGET live in the viewer (with a terminal and without --headless), or print
    one snapshot of it (or, with --watch, each new one); the viewer's exit status, or the last
    snapshot's."""
    args = build_parser().parse_args(argv)
    from collviz.runtime.errors import UsageError
    from collviz.runtime.limits import check_count, check_seconds
    from collviz.runtime.live.pace import Pace
    from collviz.runtime.live.recorder_reader import RecorderReader
    from collviz.runtime.live.relayed_reader import RelayedReader
    from collviz.runtime.live.workers import find_workers
    from collviz.runtime.sessions.access import load_secret

    headless = args.headless or args.json or args.watch or no_terminal() is not None
    if sum(given is not None for given in (args.target, args.pid, args.listen)) != 1:
        raise UsageError("attach reads one of: TARGET (the job's sockets or store), --pid PID … (a job that prepared "
                         "nothing), --listen HOST:PORT (its relays)")
    if args.relay is not None and args.target is None:
        raise UsageError("--relay reads TARGET, this node's ranks")
    if args.native and args.pid is None:
        raise UsageError("--native adds C++ frames to the stacks of --pid")
    timeout_s = check_seconds("--timeout", args.timeout if args.timeout is not None else 10.0 if args.pid else 2.0)
    interval_s = check_seconds("--interval", args.interval)
    if not (args.watch or args.relay) and args.count is not None:
        raise UsageError("--count counts the readings of --watch or --relay")
    if headless and args.record is not None:
        raise UsageError("--record keeps what the viewer shows; drop --headless (or run on a terminal)")
    check_record_option(args)
    pace = Pace(interval_s, max(interval_s, check_seconds("--slowest", args.slowest)))
    count = None if args.count is None else check_count("--count", args.count, 1, 1 << 31)
    if args.pid is not None:
        from collviz.runtime.sessions.live import pid_session

        reader = pid_reader(args.pid, args.native, timeout_s)
        if not headless:
            return _view(pid_session(reader, record=args.record, pace=pace))
        return print_by_pid(reader, as_json=args.json, watch=_watch if args.watch else None, count=count, pace=pace)
    if args.listen is None:
        workers = find_workers(args.target, timeout_s)
        if args.relay is not None:
            return _relay(workers, args.relay, load_secret(args.secret_file), interval_s, timeout_s, count)
        recorders: Reader = RecorderReader(workers, timeout_s, from_first=not headless, target=args.target)
        return _attach(recorders, args, headless, pace, count)
    listener = _listener(args.listen, load_secret(args.secret_file))
    try:
        relayed = RelayedReader(listener, timeout_s, whole_first=headless, target=args.listen, from_first=not headless)
        return _attach(relayed, args, headless, pace, count)
    finally:
        listener.close()


def _attach(reader: Reader, args: argparse.Namespace, headless: bool, pace: Pace, count: int | None) -> int:
    """The job as ``reader`` reads it: in the viewer, or headless (one snapshot, or --watch)."""
    from collviz.runtime.live.recorder_reader import RecorderReader
    from collviz.runtime.live.snapshot import take_snapshot
    from collviz.runtime.reports.warnings import say_warnings, with_warnings

    if not headless:
        from collviz.runtime.live.reading_cost import ReadingCost
        from collviz.runtime.sessions.live import attached_reader_session

        cost = ReadingCost.of(reader.workers) if isinstance(reader, RecorderReader) else None
        relayed = args.listen is not None  # a job of many hosts: each call's ranks as one event a reading
        return _view(attached_reader_session(reader, record=args.record, pace=pace, cost=cost, grouped=relayed))
    if not args.json:
        servers = len(reader.workers) if isinstance(reader, RecorderReader) else 0
        print(f"collviz attach: the worker servers of {servers} rank{'s' if servers > 1 else ''} at {args.target}"
              if servers else f"collviz attach: the job its relays send to {args.listen}")
    if not args.watch:
        snapshot = take_snapshot(reader, pace.fastest_s)
        warnings = say_warnings(_reader_warnings(reader), sys.stderr)
        if args.json:
            print_json(with_warnings(snapshot.document(), warnings))
        else:
            print(snapshot.text(), flush=True)
        return snapshot.exit_status
    return _watch(reader, pace, count, args.json)


def _reader_warnings(reader: Reader) -> list[str]:
    """What ``reader`` has found it could not read right so far, each once (a group's members
    guessed, a rank not read yet); a reader of stacks finds none. Not that the dumps key the default
    group ``''``: every gloo job's do, and it is read right (the warning is for dump files, which
    torch's own analyser fails on)."""
    from collviz.runtime.live.recorder_reader import RecorderReader
    from collviz.runtime.live.relayed_reader import RelayedReader
    from collviz.runtime.sources.flight_recorder import BLANK_KEY_WARNING

    found = reader.warnings if isinstance(reader, (RecorderReader, RelayedReader)) else []
    return [warning for warning in found if BLANK_KEY_WARNING not in warning]


def _listener(address: str, secret: bytes | None) -> RelayListener:
    """The viewer's socket for the relays at ``address``, bound now (a port in use is one line)."""
    from collviz.runtime.errors import UsageError
    from collviz.runtime.sessions.access import SECRET_ENV, parse_listen
    from collviz.runtime.wire.relay_link import RelayListener

    host, port = parse_listen(address)
    if secret is None:
        raise UsageError(f"--listen: the relays sign what they send with the job's shared secret: set ${SECRET_ENV} "
                         "(the same value on every node, e.g. from: openssl rand -hex 16) or give --secret-file")
    try:
        return RelayListener(host, port, secret)
    except Exception as exc:  # zmq.ZMQError: address in use, not ours, …
        raise UsageError(f"--listen {address}: cannot listen there ({exc})") from None


def _relay(workers: list[Worker], viewer: str, secret: bytes | None, every_s: float, timeout_s: float,
           count: int | None) -> int:
    """This node's relay: its ranks' news to the viewer at ``viewer`` until the job ends, Ctrl-C
    or ``count`` readings; one line per reading that changed something."""
    from collviz.runtime.errors import UsageError
    from collviz.runtime.live.relay import run_relay
    from collviz.runtime.sessions.access import SECRET_ENV, parse_listen
    from collviz.runtime.wire.relay_link import RelayLink
    from collviz.runtime.wire.relay_news import RelayNews

    host, port = parse_listen(viewer)
    if secret is None:
        raise UsageError(f"--relay: set ${SECRET_ENV} (the viewer's) or give --secret-file: the viewer accepts only "
                         "signed news")
    print(f"collviz attach: relaying {len(workers)} rank{'s' if len(workers) > 1 else ''} to {viewer} every "
          f"{every_s:g} s", flush=True)

    def report(news: RelayNews, cpu_s: float) -> None:
        """One line for a reading with news: the entries sent, the CPU it cost, the ranks not read."""
        sent = sum(len(recorder.entries) for rank in news.ranks for recorder in rank.recorders)
        unread = [rank.rank for rank in news.ranks if rank.error]
        if sent or unread:
            print(f"reading {news.number}: {sent:,} entries sent, {cpu_s * 1e3:.0f} ms CPU"
                  + (f"; ranks not read: {unread}" if unread else ""), flush=True)

    link = RelayLink(host, port, secret)
    try:
        status = run_relay(workers, link, every_s, timeout_s, count, report)
    except KeyboardInterrupt:
        status = 0
    finally:
        link.close()
    return status


def _watch(reader: Reader, pace: Pace, count: int | None, as_json: bool) -> int:
    """Print each new snapshot until Ctrl-C, ``count`` readings or the job's end (said in one
    line: "the job ended"); the exit status: the last snapshot's, or at the job's end 0, 1 where it
    ended while ranks waited."""
    from collviz.runtime.live.reading_cost import ReadingCost
    from collviz.runtime.live.recorder_reader import RecorderReader
    from collviz.runtime.live.snapshot import Snapshot, watch
    from collviz.runtime.reports.warnings import say_warnings, with_warnings

    shown: list[Snapshot] = []
    said: list[str] = []

    def show(snapshot: Snapshot, next_s: float) -> None:
        """One snapshot of the watch and when the next reading comes (so a slow pace is not taken
        for a frozen view): a JSON document on one line (``next_reading_s``; ``warnings``: those
        said on stderr since the document before), or its text, that line and a blank line."""
        shown.append(snapshot)
        fresh = say_warnings(_reader_warnings(reader)[len(said):], sys.stderr)
        said.extend(fresh)
        if as_json:
            print(json.dumps(with_warnings({**snapshot.document(), "next_reading_s": round(next_s, 1)}, fresh),
                             ensure_ascii=False), flush=True)
        else:
            print(f"{snapshot.text()}\n{_next_reading_line(next_s, pace)}\n", flush=True)

    try:
        cost = ReadingCost.of(reader.workers) if isinstance(reader, RecorderReader) else None  # py-spy: no server
        last, _, end = watch(reader, show, pace, count, cost=cost)
    except KeyboardInterrupt:
        return shown[-1].exit_status if shown else 0
    if end is None:
        return last.exit_status if last is not None else 0
    print(f"collviz attach: {end.detail}", file=sys.stderr if as_json else sys.stdout, flush=True)
    return 0 if end.status == "ok" else 1


def _next_reading_line(next_s: float, pace: Pace) -> str:
    """When the next reading of ``--watch`` comes, ``next_s`` seconds from now, and, where that is
    past the pace's slowest interval, why (the ranks' CPU has not yet paid for it)."""
    from collviz.runtime.live.reading_cost import COST_SHARE

    line = f"next reading in ~{next_s:.0f} s"
    if next_s > pace.slowest_s:
        line += (f" (each reading costs every rank its whole Flight Recorder answer: held until the ranks' own CPU "
                 f"has paid for it at {COST_SHARE:.1%})")
    return line


def _view(session: LiveSession) -> int:
    """The job live in the viewer until it ends or the user quits; how it ended on stderr."""
    from collviz.app.app import run_viewer
    from collviz.runtime.sessions.headless import report_outcome

    session.start()
    exit_code = run_viewer(session=session)
    return report_outcome(session, exit_code, sys.stderr)
