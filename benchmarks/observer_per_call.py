"""What one observed collective costs the script's thread, and how much of it is the dispatcher's.

In one process, on a gloo group of one rank (so no peer's timing enters), a loop of small
``dist.all_reduce`` calls runs in three variants, alternated round by round so machine noise hits
them alike:

- ``plain``: nothing observes the calls;
- ``bare kernel``: a Python kernel at the ``BackendSelect`` key of ``c10d::allreduce_`` that only
  hands the call on (``op.redispatch``): what any Python observer of the dispatcher pays before it
  records anything;
- ``observer``: collviz's own (:class:`collviz.runtime.userjob.observer.ScriptObserver`, emitting
  to a local socket nobody reads).

Printed per round, then as medians: the script thread's CPU per call (µs), and each variant's
extra over ``plain``. The observer's extra minus the bare kernel's is what collviz's recording
adds; the rest is the dispatcher calling into Python and back, which only a compiled kernel would
avoid.

    python benchmarks/observer_per_call.py [--rounds 7] [--calls 3000] [--quick]
"""

from __future__ import annotations

import argparse
import gc
import os
import socket
import statistics
import sys
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

VARIANTS = ("plain", "bare kernel", "observer")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class BareKernel(AbstractContextManager):
    """A Python kernel for ``c10d::allreduce_`` at ``BackendSelect`` that only hands the call on."""

    def __enter__(self) -> BareKernel:
        import torch

        op = torch.ops.c10d.allreduce_.default
        after = torch._C._dispatch_keyset_full_after(torch._C.DispatchKey.BackendSelect)
        self._library = torch.library.Library("c10d", "IMPL")
        self._library.impl("allreduce_", lambda keyset, *args, **kwargs: op.redispatch(keyset & after, *args, **kwargs),
                           "BackendSelect", with_keyset=True)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._library._destroy()


def per_call_us(call: Callable[[], object], calls: int) -> float:
    """The calling thread's CPU per call of ``call`` (µs), over ``calls`` calls."""
    started = time.thread_time_ns()
    for _ in range(calls):
        call()
    return (time.thread_time_ns() - started) / calls / 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=3000, help="calls per variant and round")
    parser.add_argument("--quick", action="store_true", help="one round of 200 calls")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.calls = 1, 200
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
    import torch
    import torch.distributed as dist
    import zmq

    from collviz.runtime.userjob.observer import ScriptObserver
    from collviz.runtime.wire.transport import EventEmitter

    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        sink = zmq.Context().socket(zmq.PULL)
        port = sink.bind_to_random_port("tcp://127.0.0.1")
        observer = ScriptObserver(EventEmitter(f"tcp://127.0.0.1:{port}", "observer-per-call", 0))
        contexts: dict[str, Callable[[], AbstractContextManager]] = {
            "plain": nullcontext, "bare kernel": BareKernel, "observer": lambda: observer}
        tensor = torch.ones(64)
        print(f"all_reduce of {tensor.numel()} float32 on a 1-rank gloo group, {args.calls} calls per variant and round; "
              "the script thread's CPU per call, µs")
        print("round  " + "  ".join(f"{name:>12}" for name in VARIANTS))
        found: dict[str, list[float]] = {name: [] for name in VARIANTS}
        for index in range(args.rounds):
            order = VARIANTS if index % 2 == 0 else VARIANTS[::-1]
            row = {}
            for name in order:
                with contexts[name]():
                    per_call_us(lambda: dist.all_reduce(tensor), max(1, args.calls // 10))  # warm
                    gc.collect()  # a full collection of torch's heap (~0.1 s) lands in no variant's loop by chance
                    row[name] = per_call_us(lambda: dist.all_reduce(tensor), args.calls)
                found[name].append(row[name])
            print(f"{index:>5}  " + "  ".join(f"{row[name]:>12.1f}" for name in VARIANTS), flush=True)
        median = {name: statistics.median(values) for name, values in found.items()}
        plain = median["plain"]
        print()
        print(f"median: plain {plain:.1f} µs; bare kernel +{median['bare kernel'] - plain:.1f} µs; "
              f"observer +{median['observer'] - plain:.1f} µs "
              f"(of which collviz's recording +{median['observer'] - median['bare kernel']:.1f} µs)")
    finally:
        dist.destroy_process_group()
    sys.stdout.flush()
    os._exit(0)  # no C++ teardown at exit (it can abort after the observer's kernel is gone)


if __name__ == "__main__":
    main()
