"""Exact live tensor bytes on any device, following storages with weak references (DESIGN.md §6).

CPU has no allocator statistics and RSS does not follow frees, so :class:`StorageTracker` watches
every op's outputs through a ``TorchDispatchMode``: each storage seen for the first time is
counted once (views and in-place results share it) under the current category, and a weak
reference subtracts it when the storage dies. ``UntypedStorage.resize_`` is not an op, so while a
tracker is active it is wrapped to keep sizes exact (FSDP frees and re-allocates parameters that
way). :func:`memory_figures` turns a tracker and a device into the fields of a ``Memory`` event.
"""

from __future__ import annotations

import threading
import weakref
from collections import deque
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any, NamedTuple, Union

import torch
from torch.utils._python_dispatch import (
    TorchDispatchMode,
    _disable_current_modes,
    _get_current_dispatch_mode_stack,
    is_traceable_wrapper_subclass,
    is_traceable_wrapper_subclass_type,
)

from ..wire.protocol import CudaMemory
from . import nvml

__all__ = ["DEFAULT_CATEGORY", "MemorySnapshot", "StorageTracker", "memory_figures", "storages_of"]

DEFAULT_CATEGORY = "other"
"""Category of storages allocated outside any :meth:`StorageTracker.category` block."""

Tensors = Union[torch.Tensor, Iterable[torch.Tensor]]
"""One tensor, or any iterable of them (a list, ``module.parameters()``)."""


class MemorySnapshot(NamedTuple):
    """A tracker's figures read together under its lock."""

    live_bytes: int
    peak_bytes: int
    by_category: dict[str, int]


class _Entry(weakref.ref):
    """A weak reference to one tracked storage, with what it was counted as.

    Its callback hands the entry itself to the tracker's queue of dead storages.
    """

    __slots__ = ("key", "nbytes", "category")

    def __new__(cls, storage: torch.UntypedStorage, callback: Any, category: str) -> _Entry:
        return super().__new__(cls, storage, callback)

    def __init__(self, storage: torch.UntypedStorage, callback: Any, category: str) -> None:
        # typeshed's weakref.ref declares no __init__; CPython's takes (object, callback), and the
        # weakref docs' own subclass example calls it so
        super().__init__(storage, callback)  # type: ignore[call-arg]
        self.key = id(storage)
        self.nbytes = storage.nbytes()
        self.category = category


class StorageTracker(TorchDispatchMode):
    """A dispatch mode counting the bytes of live tensor storages, per category, with a peak.

    While the mode is entered (``with tracker:``) the outputs of every op run by this thread, and
    by autograd on its behalf, are inspected. Storages that existed before (module parameters,
    tensors from ``from_numpy``) are added with :meth:`track`. Only storages on ``device`` are
    counted when one is given (an index-less device matches every index); meta storages never are.

    Weak-reference callbacks may run in any thread: they only queue the dead entry, and the queue
    is drained under the lock before every read or update, so figures are exact when read.
    """

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        """Keep torch from wrapping ``__torch_dispatch__`` in ``torch._disable_dynamo``.

        That wrapper imports torch's compiler on the first tracked op (about 1.1 s per process);
        collviz never compiles under the tracker, so there is nothing for it to guard.
        """
        return False

    def __init__(self, device: torch.device | str | None = None) -> None:
        super().__init__()
        self._device = torch.device(device) if device is not None else None
        self._lock = threading.Lock()
        self._entries: dict[int, _Entry] = {}
        self._dead: deque[_Entry] = deque()
        self._live = 0
        self._peak = 0
        self._by_category: dict[str, int] = {}
        self._category = DEFAULT_CATEGORY
        self._depth = 0

    # ---- figures -------------------------------------------------------------------------------

    def snapshot(self) -> MemorySnapshot:
        """Live bytes, peak bytes and live bytes per category (zero categories omitted), at once."""
        with self._lock:
            self._drain()
            categories = {name: n for name, n in self._by_category.items() if n}
            return MemorySnapshot(self._live, self._peak, categories)

    @property
    def live_bytes(self) -> int:
        """Bytes of tracked storages alive now."""
        return self.snapshot().live_bytes

    @property
    def peak_bytes(self) -> int:
        """Highest ``live_bytes`` since construction or the last :meth:`reset_peak`."""
        return self.snapshot().peak_bytes

    def by_category(self) -> dict[str, int]:
        """Live bytes per category; categories with no live bytes are omitted."""
        return self.snapshot().by_category

    def reset_peak(self) -> None:
        """Start a new peak from the current live bytes."""
        with self._lock:
            self._drain()
            self._peak = self._live

    # ---- attribution ---------------------------------------------------------------------------

    @contextmanager
    def category(self, name: str) -> Iterator[None]:
        """Attribute storages first seen inside the block to ``name``; nesting restores the outer.

        The category is the tracker's, not the thread's, so autograd threads working for the
        block are attributed to it too.
        """
        previous, self._category = self._category, name
        try:
            yield
        finally:
            self._category = previous

    def track(self, tensors: Tensors, category: str) -> None:
        """Count the storages of tensors that already exist under ``category``.

        Storages already tracked keep their category, so calling it twice changes nothing.
        Tensor subclasses such as DTensor count their local storages.
        """
        self._record(tensors, category, retag=False)

    def retag(self, tensors: Tensors, category: str) -> None:
        """Move the storages of ``tensors`` to ``category``, tracking any not yet tracked."""
        self._record(tensors, category, retag=True)

    @contextmanager
    def suspended(self) -> Iterator[None]:
        """Run the block untracked and without dispatch overhead (timed regions, observation code).

        The dispatch modes of this thread are popped for the block and pushed back after it, so
        ops inside pay nothing. Tracked storages resized or freed inside are still accounted.
        """
        active = any(mode is self for mode in _get_current_dispatch_mode_stack())
        with _disable_current_modes() if active else nullcontext():
            yield

    # ---- the mode ------------------------------------------------------------------------------

    def __enter__(self) -> StorageTracker:
        super().__enter__()
        if self._depth == 0:
            _watch_resizes(self)
        self._depth += 1
        return self

    def __exit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> None:
        self._depth -= 1
        if self._depth == 0:
            _unwatch_resizes(self)
        super().__exit__(exc_type, exc_val, exc_tb)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        """Run ``func`` and count any storage among its outputs not yet tracked."""
        if any(is_traceable_wrapper_subclass_type(t) for t in types):
            return NotImplemented  # let DTensor & co. unwrap; their local ops come back here
        out = func(*args, **(kwargs or {}))
        if type(out) is torch.Tensor and out.layout is torch.strided:  # the common case, fast
            storages: Any = (out.untyped_storage(),)
        else:
            storages = list(storages_of(out))
        if storages:
            with self._lock:
                self._drain()
                for storage in storages:
                    self._count(storage, self._category, retag=False)
        return out

    # ---- bookkeeping (callers hold the lock) ---------------------------------------------------

    def _record(self, tensors: Tensors, category: str, *, retag: bool) -> None:
        storages = list(storages_of(tensors if isinstance(tensors, torch.Tensor) else list(tensors)))
        with self._lock:
            self._drain()
            for storage in storages:
                self._count(storage, category, retag=retag)

    def _resized(self, storage: torch.UntypedStorage) -> None:
        """``storage`` was resized outside dispatch: follow it, or count it if it grew here."""
        active = any(mode is self for mode in _get_current_dispatch_mode_stack())
        with self._lock:
            self._drain()
            if self._lookup(storage) is not None or active:
                self._count(storage, self._category, retag=False)

    def _lookup(self, storage: torch.UntypedStorage) -> _Entry | None:
        entry = self._entries.get(id(storage))
        if entry is not None and entry() is not storage:  # id reused before the death was drained
            self._forget(entry)
            return None
        return entry

    def _count(self, storage: torch.UntypedStorage, category: str, *, retag: bool) -> None:
        entry = self._lookup(storage)
        if entry is None:
            if not self._accepts(storage.device):
                return
            entry = _Entry(storage, self._dead.append, category)
            self._entries[entry.key] = entry
            self._add(category, entry.nbytes)
            return
        nbytes = storage.nbytes()
        if nbytes != entry.nbytes:
            self._add(entry.category, nbytes - entry.nbytes)
            entry.nbytes = nbytes
        if retag and entry.category != category:
            self._add(entry.category, -entry.nbytes)
            entry.category = category
            self._add(category, entry.nbytes)

    def _accepts(self, device: torch.device) -> bool:
        wanted = self._device
        if wanted is None:
            return device.type != "meta"
        return device.type == wanted.type and (wanted.index is None or device.index == wanted.index)

    def _add(self, category: str, nbytes: int) -> None:
        self._by_category[category] = self._by_category.get(category, 0) + nbytes
        self._live += nbytes
        if self._live > self._peak:
            self._peak = self._live

    def _forget(self, entry: _Entry) -> None:
        if self._entries.get(entry.key) is entry:
            del self._entries[entry.key]
            self._add(entry.category, -entry.nbytes)

    def _drain(self) -> None:
        while self._dead:
            self._forget(self._dead.popleft())


def storages_of(obj: Any) -> Iterator[torch.UntypedStorage]:
    """The storages of every tensor in ``obj`` (a tensor or nested lists/tuples of outputs)."""
    if isinstance(obj, torch.Tensor):
        if is_traceable_wrapper_subclass(obj):
            names, _ = obj.__tensor_flatten__()
            for name in names:
                yield from storages_of(getattr(obj, name))
            return
        try:
            yield obj.untyped_storage()
        except (RuntimeError, NotImplementedError):  # sparse and other storage-less layouts
            return
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            yield from storages_of(item)


# ---- UntypedStorage.resize_ is not dispatched: wrap it while any tracker is active --------------

_original_resize = torch.UntypedStorage.resize_
_resize_watchers: list[StorageTracker] = []
_resize_lock = threading.Lock()


def _resize_and_notify(storage: torch.UntypedStorage, size: int) -> torch.UntypedStorage:
    result = _original_resize(storage, size)
    for tracker in list(_resize_watchers):
        tracker._resized(storage)
    return result


def _watch_resizes(tracker: StorageTracker) -> None:
    with _resize_lock:
        if not _resize_watchers:
            # a patch (method-assign); torch declares resize_ on _StorageBase, but patched here on
            # UntypedStorage its self is always an UntypedStorage (assignment)
            torch.UntypedStorage.resize_ = _resize_and_notify  # type: ignore[method-assign, assignment]
        _resize_watchers.append(tracker)


def _unwatch_resizes(tracker: StorageTracker) -> None:
    with _resize_lock:
        _resize_watchers.remove(tracker)
        if not _resize_watchers:
            torch.UntypedStorage.resize_ = _original_resize  # type: ignore[method-assign]


def memory_figures(tracker: StorageTracker, device: torch.device) -> dict[str, Any]:
    """The figure fields of a ``protocol.Memory`` event for this rank's ``device``.

    ``cuda`` (the caching allocator) and ``nvml`` (device totals) are filled only on a CUDA
    device; on any other device torch.cuda is never touched.
    """
    live, peak, categories = tracker.snapshot()
    figures: dict[str, Any] = {
        "live_bytes": live,
        "peak_bytes": peak,
        "by_category": categories,
        "source": "tracker",
        "cuda": None,
        "nvml": None,
    }
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        figures["cuda"] = CudaMemory(
            allocated=torch.cuda.memory_allocated(index),
            reserved=torch.cuda.memory_reserved(index),
            max_allocated=torch.cuda.max_memory_allocated(index),
        )
        figures["nvml"] = nvml.device_memory(index)
    return figures
