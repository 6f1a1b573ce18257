"""Hostile inputs, counted: ≥700 damaged traces and ≥120 hostile command lines, one outcome each.

Trace mutants are made from a real recorded trace (tests/fixtures/all-gather.cvz, rewritten with
this collviz's checksummed records, and the original 1.0 file): truncations, bit flips, 4-byte
stomps, absurd lengths, garbage inserted, deeply nested and wrongly typed records, out-of-range
ranks and world sizes, negative durations, sequence gaps and duplicates, plus a fifo, a device
and a folder. Each is read, summarised and exported in a forked child with a 2 GiB address-space
limit and a 20 s alarm. Command lines run as real ``python -m collviz`` processes (the same
limits) in a scratch folder. Outcomes:

- clean error — exit 2 and one ``collviz: error:`` line (a trace that cannot be read);
- warning with partial result — read with a warning, summary and export made;
- accepted — read (or run) without a warning;
- traceback / hang / memory — the failures this benchmark exists to find (target: none).

    python benchmarks/fuzz_inputs.py [--seed 1] [--mutants 720] [--lines all] [--quick]

``--quick`` tries 24 mutants and one command line (the test suite runs it so the benchmark cannot
break silently). The devices given (a zero device read as a trace, a full one recorded onto) are
private nodes in the scratch folder, never the machine's own, where this user may make them (root).
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import resource
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import msgspec

from collviz.runtime.reports.export import perfetto_trace
from collviz.runtime.reports.summary import render_summary
from collviz.runtime.wire.protocol import Buffer, Collective, RunStart, encode
from collviz.runtime.wire.trace import TRACE_MAGIC, TraceError, TraceWriter, read_trace

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "all-gather.cvz"
MEMORY_LIMIT = 2 << 30
ALARM_S = 20
OUTCOMES = ("clean error", "warning with partial result", "accepted", "traceback", "hang", "memory")


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


# ----------------------------------------------------------------------------------- trace mutants

def _records(data: bytes) -> tuple[int, list[int]]:
    """Offset of the first record and the start of every record of a checksummed trace."""
    (header,) = struct.unpack_from("<I", data, len(TRACE_MAGIC))
    pos = start = len(TRACE_MAGIC) + 4 + header
    starts = []
    while pos + 8 <= len(data):
        starts.append(pos)
        pos += 8 + struct.unpack_from("<I", data, pos)[0]
    return start, starts


def _rewrite(events: list, path: Path) -> bytes:
    writer = TraceWriter(path)
    writer.write(encode(e) for e in events)
    writer.close()
    return path.read_bytes()


def _event_mutants(events: list, rng: random.Random) -> list[tuple[str, list]]:
    """Well-framed traces whose events lie."""
    out = []
    for world in (0, -1, 10**6, 2**31):
        out.append(("impossible world size", [msgspec.structs.replace(e, world_size=world)
                                              if isinstance(e, RunStart) else e for e in events]))
    for _ in range(20):
        i = rng.randrange(len(events))
        out.append(("out-of-range rank", events[:i] + [msgspec.structs.replace(events[i], rank=rng.choice(
            [-2, 4, 99, 2**40]))] + events[i + 1:]))
        out.append(("duplicate", events[:i] + [events[i]] + events[i:]))
        out.append(("sequence gap", events[:i] + events[i + 1:]))
    collectives = [i for i, e in enumerate(events) if isinstance(e, Collective)]
    for i in rng.sample(collectives, min(10, len(collectives))):
        out.append(("negative duration", events[:i] + [msgspec.structs.replace(events[i], duration_ns=-1)]
                    + events[i + 1:]))
    return out


def _raw_record(payload: bytes) -> bytes:
    import zlib
    return struct.pack("<II", len(payload), zlib.crc32(payload)) + payload


def trace_mutants(folder: Path, count: int, rng: random.Random) -> list[tuple[str, Path]]:
    """(kind, path) of each mutant written into ``folder``."""
    events = read_trace(FIXTURE).events
    clean = _rewrite(events, folder / "clean.cvz")
    start, starts = _records(clean)
    mutants: list[tuple[str, bytes | Path]] = [("original 1.0 trace", FIXTURE.read_bytes())]
    for kind, lying in _event_mutants(events, rng):
        mutants.append((kind, _rewrite(lying, folder / "lying.cvz")))
    odd_payloads = {
        "deeply nested record": b"\x91" * 100_000 + b"\xc0",
        "wrong field types": msgspec.msgpack.encode({"type": "Buffer", "run": 1, "rank": "x", "seq": [], "t_ns": {}}),
        "absurd array length": b"\xdd\xff\xff\xff\xff",
        "huge values list": encode(Buffer(run=events[0].run, rank=0, seq=10**6, t_ns=0, phase=0, name="x",
                                          role="input", moment="before", shape=[200_000], dtype="float32",
                                          values=[1.0] * 200_000)),
    }
    for kind, payload in odd_payloads.items():
        at = rng.choice(starts)
        mutants.append((kind, clean[:at] + _raw_record(payload) + clean[at:]))
    makers = {
        "truncation": lambda d: d[: rng.randrange(len(d))],
        "bit flip": lambda d: _flip(d, rng, start),
        "4-byte stomp": lambda d: _stomp(d, rng, start, os.urandom(4)),
        "absurd length": lambda d: _stomp(d, rng, start, rng.choice([b"\xff\xff\xff\x7f", b"\xff\xff\xff\xff"]),
                                          at=rng.choice(starts)),
        "garbage inserted": lambda d: _insert(d, rng, start, os.urandom(rng.randrange(1, 200))),
        "several stomps": lambda d: _stomp(_stomp(_flip(d, rng, start), rng, start, os.urandom(4)), rng, start,
                                           os.urandom(8)),
    }
    while len(mutants) < count - 3:
        kind = rng.choice(list(makers))
        mutants.append((kind, makers[kind](clean)))
    paths = []
    for i, (kind, blob) in enumerate(mutants):
        path = folder / f"m{i}.cvz"
        path.write_bytes(blob)
        paths.append((kind, path))
    fifo = folder / "fifo.cvz"
    os.mkfifo(fifo)
    paths += [("fifo", fifo), ("device", private_device(folder, "zero")), ("folder", folder)]
    return paths


def private_device(folder: Path, name: str) -> Path:
    """A private copy of the machine's ``/dev/<name>`` node (``zero`` or ``full``) in ``folder``,
    so that nothing this benchmark runs can touch the machine's own; the machine's path where this
    user may not make device nodes (not root: then it could not replace them either)."""
    path = folder / f"dev-{name}"
    if not path.exists():
        try:
            os.mknod(path, stat.S_IFCHR | 0o666, os.stat(f"/dev/{name}").st_rdev)
        except PermissionError:
            return Path(f"/dev/{name}")
    return path


def _flip(data: bytes, rng: random.Random, start: int) -> bytes:
    at = rng.randrange(start, len(data))
    return data[:at] + bytes([data[at] ^ (1 << rng.randrange(8))]) + data[at + 1:]


def _stomp(data: bytes, rng: random.Random, start: int, blob: bytes, at: int | None = None) -> bytes:
    at = rng.randrange(start, len(data) - len(blob)) if at is None else at
    return data[:at] + blob + data[at + len(blob):]


def _insert(data: bytes, rng: random.Random, start: int, blob: bytes) -> bytes:
    at = rng.randrange(start, len(data))
    return data[:at] + blob + data[at:]


def try_trace(path: Path) -> str:
    """Read, summarise and export ``path`` in a forked child under the limits; its outcome."""
    pid = os.fork()
    if pid == 0:
        code = 4
        try:
            _limit()
            signal.alarm(ALARM_S)
            contents = read_trace(path)
            render_summary(contents.events)
            perfetto_trace(contents.events)
            code = 1 if contents.warning else 0
        except TraceError:
            code = 2
        except MemoryError:
            code = 5
        except BaseException:  # noqa: BLE001 — any other exception is what we are looking for
            traceback.print_exc(limit=3)
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return "hang" if os.WTERMSIG(status) == signal.SIGALRM else "memory"
    return {0: "accepted", 1: "warning with partial result", 2: "clean error", 4: "traceback",
            5: "memory"}[os.WEXITSTATUS(status)]


# ------------------------------------------------------------------------------- command lines

def command_lines(rng: random.Random, folder: Path) -> list[list[str]]:
    """Hostile argument lists: the catalogue of the reliability issue, then random combinations."""
    fifo = folder / "cmd-fifo.toml"
    os.mkfifo(fifo)
    zero = private_device(folder, "zero")
    deep = folder / "deep.toml"
    deep.write_text("a = " + "[" * 100_000 + "]" * 100_000 + "\n")
    fixed = [
        ["all-reduce", "--size", "99999999999999999999999GiB", "--headless"],
        ["all-reduce", "--iters", str(10**22), "--headless"],
        ["compare", "--params", "nan"], ["compare", "--params", "inf"], ["compare", "--params", "-1"],
        [str(deep), "--headless"], [str(zero), "--headless"], [str(fifo), "--headless"],
        ["view", "--listen", "127.0.0.1:1", "--secret-file", str(zero), "--headless"],
        ["all-reduce", "--headless", "--record", str(private_device(folder, "full"))],
        ["all-reduce", "--timeout", "nan", "--headless"], ["all-reduce", "--timeout", "inf", "--headless"],
        ["all-reduce", "--timeout", "1e308", "--headless"], ["all-reduce", "--timeout", "1e-9", "--headless"],
        ["all-reduce", "--size", "16GiB", "--gpus", "4", "--headless"],
        ["export", str(FIXTURE), "--perfetto", str(FIXTURE)],
        ["replay", str(zero), "--headless"], ["replay", str(fifo), "--headless"],
        ["bench", "--sizes", "1K:512G"], ["bench", "--sizes", "0:0"], ["bench", "--iters", "-5"],
        ["view", "--listen", "[::1]:99999"], ["worker", "all-reduce", "--viewer", "tcp://[::1]:1"],
    ]
    scenarios = ["all-reduce", "all-gather", "broadcast", "reduce-scatter", "fsdp", "tp", "desync", "nope", "",
                 "../../etc/passwd", "[bold]x[/]"]
    options = {
        "--gpus": ["0", "-1", "65", "1000000", "x", "1e3", "2"],
        "--size": ["0", "-4", "1.5KiB", "4TiB", "99999999999999999999GiB", "lots", "7"],
        "--iters": ["0", "-1", str(10**30), "1e9", "3"],
        "--timeout": ["nan", "-1", "0", "inf", "1e-300", "1e400", "5"],
        "--dtype": ["float8", "int128", "", "int8"],
        "--op": ["xor", "avg", "max"],
        "--root": ["-1", "99", "x"],
        "--record": ["/", "/proc/self/mem", "/nonexistent/t.cvz", str(folder)],
        "--backend": ["nccl", "mpi", ""],
    }
    lines = list(fixed)
    while len(lines) < 130:
        line = [rng.choice(scenarios)]
        for option in rng.sample(list(options), rng.randrange(1, 4)):
            line += [option, rng.choice(options[option])]
        lines.append(line + ["--headless"])
    return lines


def try_command(argv: list[str], folder: Path) -> str:
    try:
        result = subprocess.run([sys.executable, "-m", "collviz", *argv], capture_output=True, text=True, cwd=folder,
                                timeout=60, stdin=subprocess.DEVNULL, preexec_fn=_limit)
    except subprocess.TimeoutExpired:
        return "hang"
    if "MemoryError" in result.stderr:
        return "memory"
    if "Traceback" in result.stderr:
        return "traceback"
    errors = [line for line in result.stderr.splitlines() if line.startswith("collviz: error: ")]
    if result.returncode == 2 and len(errors) == 1:
        return "clean error"
    return "accepted"


def main() -> None:
    """Run both sets and print the tables."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--mutants", type=int, default=720)
    parser.add_argument("--lines", choices=("all", "none"), default="all")
    parser.add_argument("--quick", action="store_true", help="24 mutants, one command line: a fast check that it runs")
    args = parser.parse_args()
    if args.quick:
        args.mutants = 24
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        started = time.monotonic()
        by_kind: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
        for kind, path in trace_mutants(folder, args.mutants, rng):
            by_kind[kind][try_trace(path)] += 1
        _table("trace mutants", by_kind, time.monotonic() - started)
        if args.lines == "all":
            started = time.monotonic()
            outcomes: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
            for argv in command_lines(rng, folder)[: 1 if args.quick else None]:
                outcomes["command lines"][try_command(argv, folder)] += 1
            _table("hostile command lines", outcomes, time.monotonic() - started)


def _table(title: str, rows: dict[str, collections.Counter[str]], seconds: float) -> None:
    total = collections.Counter()
    for counts in rows.values():
        total.update(counts)
    print(f"\n{title}: {total.total()} in {seconds:.0f} s")
    print(f"| {'input':<28} | " + " | ".join(OUTCOMES) + " |")
    print("|" + "---|" * (len(OUTCOMES) + 1))
    for kind, counts in sorted(rows.items()) + [("**all**", total)]:
        print(f"| {kind:<28} | " + " | ".join(str(counts.get(o, 0)) for o in OUTCOMES) + " |")


if __name__ == "__main__":
    main()
