"""``collviz view --listen HOST:PORT``: the listener that receives the events of ranks torchrun
started (``collviz worker SCENARIO`` or ``collviz run --viewer URL SCRIPT.py``), in the viewer or
headless. Its help is the listener's: what it binds, whom it accepts, when it ends."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from .options import (
    OneLineParser,
    add_headless_option,
    add_json_option,
    add_record_option,
    add_timeout_option,
    check_record_option,
    command_parser,
    path_argument,
)
from .playing import headless_instead

__all__ = ["build_parser", "main"]

EPILOG = """\
Listens on HOST:PORT (and PORT+1) for the events of ranks that torchrun starts elsewhere, each
running `collviz worker SCENARIO --viewer tcp://HOST:PORT` or `collviz run --viewer tcp://HOST:PORT
SCRIPT.py`, and shows them as a local run is shown (or, --headless, prints the summary at the end).
It accepts only events signed with the shared secret ($COLLVIZ_SECRET or --secret-file), adopts
the run of the first one, drops and counts any other, and ends when every rank has reported its
end. Beyond loopback a secret is required; on loopback without one, a fresh one is made and the
line to give the workers is printed. Start it before the workers:

  export COLLVIZ_SECRET=$(openssl rand -hex 16)                  # the same value everywhere
  collviz view --listen 0.0.0.0:5555 --headless --record t.cvz   # here, on HOST
  torchrun --nnodes 2 --nproc-per-node 2 --node-rank 0 --master-addr NODE0 --master-port 29500 \\
      -m collviz.app.cli worker all-reduce --viewer tcp://HOST:5555   # on each node (its --node-rank)
"""


def build_parser() -> OneLineParser:
    """``collviz view --listen HOST:PORT [--headless] [--record FILE] [--secret-file FILE]``."""
    parser = command_parser("collviz view", "Listen for the events of ranks torchrun started, and show them.", EPILOG)
    parser.add_argument("--listen", required=True, metavar="HOST:PORT",
                        help="address to listen on (PORT and PORT+1); beyond loopback a shared secret is required")
    add_headless_option(parser, "the summary")
    add_json_option(parser, "the headless summary")
    add_record_option(parser)
    parser.add_argument("--secret-file", type=path_argument, metavar="FILE",
                        help="the shared secret the workers sign with (default: $COLLVIZ_SECRET)")
    add_timeout_option(parser, 30.0)
    return parser


def main(argv: Sequence[str]) -> int:
    """Listen for remote workers; show them in the viewer, or headless with a summary."""
    args = build_parser().parse_args(argv)
    from collviz.runtime.limits import check_seconds
    from collviz.runtime.sessions.access import (
        SECRET_ENV,
        check_listen_address,
        generated_secret,
        load_secret,
        parse_listen,
    )
    from collviz.runtime.sessions.listening import RemoteSession

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
    session.start()  # binds now: a port in use is one line, before anything waits
    print(f"collviz: listening on {host}:{port} for torchrun workers (collviz worker … --viewer {url})",
          file=sys.stderr, flush=True)
    if headless_instead(args.headless, args.json):
        from collviz.runtime.sessions.headless import run_headless

        return run_headless(session, as_json=args.json)
    from collviz.app.app import run_viewer
    from collviz.runtime.sessions.headless import report_outcome

    return report_outcome(session, run_viewer(session=session), sys.stderr)
