"""NVML degrades to "unavailable" and reads CUDA_VISIBLE_DEVICES the way CUDA does."""

from __future__ import annotations

import os
import sys
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from collviz.runtime.observation import nvml
from collviz.runtime.wire.protocol import NvmlMemory

UUIDS = [
    "GPU-aa11-0000",
    "GPU-aa22-1111",
    "GPU-bb33-2222",
    "GPU-cc44-3333",
]
"""The fake machine: four GPUs; device i has ``used = i GiB`` of 80 GiB."""

GIB = 1024**3


class FakeNvml:
    """Stands in for :func:`nvml.nvml_call` on a machine with the GPUs in ``UUIDS``."""

    def __init__(self, utilization: bool = True) -> None:
        self.utilization = utilization
        self.calls: list[str] = []

    def __call__(self, name: str, *args: Any) -> Any:
        self.calls.append(name)
        if name == "nvmlDeviceGetCount":
            return len(UUIDS)
        if name == "nvmlDeviceGetHandleByIndex":
            (index,) = args
            return ("handle", index) if 0 <= index < len(UUIDS) else None
        if name == "nvmlDeviceGetHandleByUUID":
            return None  # no MIG slices on this machine
        if name == "nvmlDeviceGetUUID":
            return UUIDS[args[0][1]].encode()  # old nvidia-ml-py returns bytes
        if name == "nvmlDeviceGetMemoryInfo":
            return SimpleNamespace(used=args[0][1] * GIB, total=80 * GIB, free=0)
        if name == "nvmlDeviceGetUtilizationRates":
            return SimpleNamespace(gpu=10 * args[0][1], memory=0) if self.utilization else None
        raise AssertionError(f"unexpected NVML call {name}")


@pytest.fixture
def fake_machine(monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    fake = FakeNvml()
    monkeypatch.setattr(nvml, "nvml_call", fake)
    monkeypatch.setattr(nvml, "_visible", {}, raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return fake


def test_without_a_driver_everything_is_unavailable_and_nothing_raises() -> None:
    reason = nvml.nvml_unavailable_reason()
    if reason is None:
        pytest.skip("NVML works on this machine")
    assert isinstance(reason, str) and reason
    assert nvml.nvml_call("nvmlDeviceGetCount") is None
    assert nvml.gpu_count() == 0
    assert nvml.device_memory(0) is None


@pytest.mark.parametrize(
    ("visible", "count"),
    [
        (None, 4),
        ("", 0),
        ("-1", 0),
        ("1,3", 2),
        (" 2 , 0 ", 2),
        ("0,7,1", 1),  # an index past the last device ends the list
        ("0,-1,1", 1),  # so does any invalid entry
        ("1,1", 0),  # a repeated device empties it
        ("2gpu,1", 2),  # indices are read like strtoul
        ("GPU-bb", 1),  # a UUID prefix naming one device
        ("GPU-aa", 0),  # an ambiguous prefix is invalid
        ("GPU-cc44-3333,GPU-aa11,GPU-zz", 2),
        ("GPU-cc44,GPU-cc44-3333", 0),
        ("0,GPU-aa11", 1),  # a UUID after indices is invalid
        ("MIG-0000", 0),  # a MIG slice NVML does not know
    ],
)
def test_gpu_count_honours_cuda_visible_devices(
    fake_machine: FakeNvml, monkeypatch: pytest.MonkeyPatch, visible: str | None, count: int
) -> None:
    if visible is not None:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert nvml.gpu_count() == count


def test_device_memory_maps_the_cuda_index_to_the_nvml_device(
    fake_machine: FakeNvml, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,0")
    assert nvml.device_memory(0) == NvmlMemory(used=2 * GIB, total=80 * GIB, utilization_pct=20)
    assert nvml.device_memory(1) == NvmlMemory(used=0, total=80 * GIB, utilization_pct=0)
    assert nvml.device_memory(2) is None
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-cc")
    assert nvml.device_memory(0) == NvmlMemory(used=3 * GIB, total=80 * GIB, utilization_pct=30)


def test_device_memory_without_utilisation(fake_machine: FakeNvml) -> None:
    fake_machine.utilization = False
    assert nvml.device_memory(1) == NvmlMemory(used=GIB, total=80 * GIB, utilization_pct=None)


def _fake_pynvml(library_missing: bool = False) -> ModuleType:
    """A pynvml stand-in counting its ``nvmlInit`` calls; without the shared library if asked."""
    module = ModuleType("pynvml")

    class NVMLError(Exception):
        pass

    class NVMLError_LibraryNotFound(NVMLError):  # noqa: N801 (pynvml's naming)
        pass

    class NVMLError_DriverNotLoaded(NVMLError):  # noqa: N801
        pass

    module.NVMLError = NVMLError
    module.NVMLError_LibraryNotFound = NVMLError_LibraryNotFound
    module.NVMLError_DriverNotLoaded = NVMLError_DriverNotLoaded
    module.init_calls = 0
    module.shutdown_calls = 0

    def nvmlInit() -> None:  # noqa: N802
        module.init_calls += 1
        if library_missing:
            raise NVMLError_LibraryNotFound()

    def nvmlDeviceGetCount() -> int:  # noqa: N802
        return 2

    def nvmlDeviceGetPowerUsage(handle: Any) -> int:  # noqa: N802
        raise NVMLError("Not Supported")

    def nvmlShutdown() -> None:  # noqa: N802
        module.shutdown_calls += 1

    module.nvmlInit = nvmlInit
    module.nvmlShutdown = nvmlShutdown
    module.nvmlDeviceGetCount = nvmlDeviceGetCount
    module.nvmlDeviceGetPowerUsage = nvmlDeviceGetPowerUsage
    return module


@pytest.fixture
def fresh_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forget whatever initialisation this process already attempted."""
    monkeypatch.setattr(nvml, "_initialised", False)
    monkeypatch.setattr(nvml, "_library", None)
    monkeypatch.setattr(nvml, "_reason", None)
    monkeypatch.setattr(nvml, "_visible", {}, raising=False)


def test_a_failed_initialisation_is_tried_once_and_explained(
    fresh_nvml: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = _fake_pynvml(library_missing=True)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    assert nvml.nvml_call("nvmlDeviceGetCount") is None
    assert nvml.nvml_call("nvmlDeviceGetCount") is None
    assert fake.init_calls == 1
    assert "no NVIDIA driver" in (nvml.nvml_unavailable_reason() or "")


def test_a_missing_package_is_explained(fresh_nvml: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise ImportError
    assert nvml.gpu_count() == 0
    assert "nvidia-ml-py" in (nvml.nvml_unavailable_reason() or "")


def test_working_nvml_answers_and_a_failing_call_degrades(
    fresh_nvml: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = _fake_pynvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    assert nvml.nvml_call("nvmlDeviceGetCount") == 2
    assert nvml.nvml_call("nvmlDeviceGetPowerUsage", object()) is None
    assert nvml.nvml_call("nvmlFunctionFromTheFuture") is None
    assert nvml.nvml_unavailable_reason() is None
    assert fake.init_calls == 1


def test_each_memory_reading_reads_memory_without_enumerating_the_devices_again(fake_machine: FakeNvml) -> None:
    for _ in range(3):
        assert nvml.device_memory(1) == NvmlMemory(used=GIB, total=80 * GIB, utilization_pct=10)
    assert fake_machine.calls.count("nvmlDeviceGetCount") == 1
    assert fake_machine.calls.count("nvmlDeviceGetHandleByIndex") == len(UUIDS)
    assert fake_machine.calls.count("nvmlDeviceGetMemoryInfo") == 3


def test_nvml_state_never_crosses_a_fork(fresh_nvml: None, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _fake_pynvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    assert nvml.nvml_call("nvmlDeviceGetCount") == 2 and fake.init_calls == 1
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the worker: nothing of the parent's NVML, its own initialisation when asked
        fresh = not nvml._initialised and nvml._library is None
        answered = nvml.nvml_call("nvmlDeviceGetCount") == 2
        os.write(write, f"{fresh} {answered} {fake.init_calls}".encode())
        os._exit(0)
    os.close(write)
    child = os.read(read, 100).decode()
    os.close(read)
    os.waitpid(pid, 0)
    assert child == "True True 2"  # the parent's one initialisation, then the child's own
    assert fake.shutdown_calls == 1  # the parent shut NVML down before forking
    assert nvml.nvml_call("nvmlDeviceGetCount") == 2 and fake.init_calls == 2  # and initialises again when asked
