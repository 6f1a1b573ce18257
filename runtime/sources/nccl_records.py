"""One physical line of an NCCL log split into the records NCCL printed on it, in time linear in the line.

NCCL prints a record as ``host:pid:tid [dev] NCCL INFO message``; a warning as ``host:pid:tid
[dev] file.cc:line NCCL WARN message`` (the source location since 2.x, absent in some builds);
both after whatever a launcher put first (``[1,0]<stdout>:``, ``[rank0]:``, ``0: ``, a Ray or a
CloudWatch prefix). Records are found by their level marker (``NCCL INFO``, ``NCCL WARN``,
``NCCL ERROR``), then the prefix is read backwards from the marker, once, within a bounded
window: so a line of any length, with or without colons and spaces, is read once (a pattern
tried from every character took 83 s on an 80 KB line without a colon), and records a terminal or a
paste glued on one line (six ranks' init records on one line) come apart, each message ending
where the next record's prefix begins. A ``WARN`` or ``ERROR`` record whose prefix is not
NCCL's (``[0] transport/net_ib.cc:1075 NCCL WARN …`` with the host cut off) is still a record,
of an unknown host; an ``INFO`` one is not (its text is some other program's).
"""

from __future__ import annotations

import re
from typing import NamedTuple

__all__ = ["Record", "device_number", "records"]

_MARKER = re.compile(r"NCCL (INFO|WARN|ERROR)\b ?")
_PREFIX_WINDOW = 600
"""The most characters a record's prefix takes before its marker (a host name is at most 255)."""
_REVERSED_PREFIX = re.compile(r" ?(?:(?P<where>\d{1,9}:[^\s\[\]]{1,250}) )?\](?P<dev>[^\[\]]{0,32})\["
                              r"(?: (?P<tid>\d{1,12}):(?P<pid>\d{1,12}):(?P<host>[^\s:\[\]|()<>`'\"]{1,255}))?")
"""``host:pid:tid [dev] where `` spelled backwards: matched once, anchored at the marker."""


class Record(NamedTuple):
    """One record NCCL printed: who printed it (``host`` None: its prefix is cut off), its level
    (``INFO``, ``WARN``, ``ERROR``), the source location of a warning (``""`` if not printed) and
    its message."""

    host: str | None
    pid: int
    tid: int
    dev: str
    level: str
    where: str
    message: str

    @property
    def device(self) -> int | None:
        """The device number its prefix names (None: none, or not a number)."""
        return device_number(self.dev)


def device_number(text: str) -> int | None:
    """A device as NCCL prints it (``3``), or None for anything else."""
    return int(text) if text.isdigit() and len(text) <= 6 else None


def records(line: str) -> list[Record]:
    """The records on ``line``, in order (none for a line without NCCL's markers)."""
    marker = _MARKER.search(line) if "NCCL" in line else None
    if marker is None:
        return []
    if line.find("NCCL", marker.end()) < 0:  # one record, as nearly every line is
        prefix = _prefix(line, 0, marker)
        return [_record(line, marker.end(), len(line), prefix, marker[1])] if _starts_record(prefix, marker) else []
    found: list[tuple[int, int, re.Match[str] | None, str]] = []  # (record start, message start, prefix, level)
    floor = 0
    for marker in _MARKER.finditer(line):
        prefix = _prefix(line, floor, marker)
        floor = marker.end()  # a prefix holds no marker: no window reaches back past one
        if _starts_record(prefix, marker):
            found.append((marker.start() - (prefix.end() if prefix else 0), floor, prefix, marker[1]))
    return [_record(line, start, found[number + 1][0] if number + 1 < len(found) else len(line), prefix, level)
            for number, (_, start, prefix, level) in enumerate(found)]


def _prefix(line: str, floor: int, marker: re.Match[str]) -> re.Match[str] | None:
    """The prefix before ``marker``, read backwards, not reaching before ``floor``."""
    return _REVERSED_PREFIX.match(line[max(floor, marker.start() - _PREFIX_WINDOW):marker.start()][::-1])


def _starts_record(prefix: re.Match[str] | None, marker: re.Match[str]) -> bool:
    """Whether ``marker`` begins a record: a warning always; ``NCCL INFO`` only after NCCL's own
    prefix (else it is inside another record's message, or another program's line)."""
    return marker[1] != "INFO" or (prefix is not None and prefix["host"] is not None)


def _record(line: str, start: int, end: int, prefix: re.Match[str] | None, level: str) -> Record:
    """The record whose message is ``line[start:end]``, printed with ``prefix`` (read backwards)."""
    message = line[start:end].strip()
    if prefix is None:
        return Record(None, 0, 0, "", level, "", message)
    host, pid, tid, dev, where = prefix.group("host", "pid", "tid", "dev", "where")
    if not host:
        return Record(None, 0, 0, dev[::-1].strip(), level, (where or "")[::-1], message)
    return Record(host[::-1], int(pid[::-1]), int(tid[::-1]), dev[::-1].strip(), level, (where or "")[::-1], message)
