"""The storage tracker: exact live bytes, categories, suspension, a real training step."""

from __future__ import annotations

import threading

import pytest
import torch

from collviz.runtime.wire import protocol
from collviz.runtime.observation.memory import StorageTracker, memory_figures

MIB = 1024 * 1024
FLOAT32 = 4


def test_a_16_mib_tensor_is_counted_exactly_and_freed_exactly() -> None:
    tracker = StorageTracker()
    with tracker:
        before = tracker.live_bytes
        big = torch.empty(4 * 1024 * 1024, dtype=torch.float32)
        assert tracker.live_bytes - before == 16 * MIB
        del big
        assert tracker.live_bytes == before
    assert tracker.peak_bytes == before + 16 * MIB


def test_views_and_in_place_ops_share_one_count() -> None:
    tracker = StorageTracker()
    with tracker:
        base = torch.zeros(1000, dtype=torch.float32)
        views = [base[10:], base.view(10, 100), base[::2], base.view(10, 100).t()]
        base.add_(1).mul_(3)
        torch.add(base, 1, out=base)
        assert tracker.live_bytes == 1000 * FLOAT32
        del base, views
        assert tracker.live_bytes == 0


def test_an_existing_tensor_tracked_twice_counts_once() -> None:
    tensor = torch.ones(256, dtype=torch.float64)
    tracker = StorageTracker()
    tracker.track(tensor, "inputs")
    tracker.track([tensor, tensor[1:]], "inputs")
    assert tracker.by_category() == {"inputs": 256 * 8}
    del tensor
    assert tracker.live_bytes == 0


def test_categories_attribute_first_sightings_and_nesting_restores() -> None:
    tracker = StorageTracker()
    with tracker:
        outer = torch.empty(10, dtype=torch.float32)
        with tracker.category("activations"):
            act = torch.empty(20, dtype=torch.float32)
            with tracker.category("comm"):
                buf = torch.empty(30, dtype=torch.float32)
            act2 = torch.empty(40, dtype=torch.float32)
            outer.add_(1)  # already tracked: stays "other"
        last = torch.empty(50, dtype=torch.float32)
        assert tracker.by_category() == {
            "other": (10 + 50) * FLOAT32,
            "activations": (20 + 40) * FLOAT32,
            "comm": 30 * FLOAT32,
        }
        del buf
        assert "comm" not in tracker.by_category()
    del outer, act, act2, last


def test_retag_moves_a_tracked_storage() -> None:
    tracker = StorageTracker()
    with tracker, tracker.category("activations"):
        tensor = torch.empty(100, dtype=torch.float32)
    tracker.retag(tensor[5:], "grads")
    assert tracker.by_category() == {"grads": 100 * FLOAT32}
    assert tracker.live_bytes == 100 * FLOAT32


def test_suspended_allocations_are_not_counted() -> None:
    tracker = StorageTracker()
    with tracker:
        kept = torch.empty(64, dtype=torch.float32)
        with tracker.suspended():
            hidden = torch.empty(1024, dtype=torch.float32)
            hidden.add_(1)
            del kept  # a tracked storage dying inside still leaves the count
        assert tracker.live_bytes == 0
        after = torch.empty(8, dtype=torch.float32)
        assert tracker.live_bytes == 8 * FLOAT32
    assert tracker.peak_bytes == 64 * FLOAT32
    del hidden, after


def test_reset_peak_starts_from_live_bytes() -> None:
    tracker = StorageTracker()
    with tracker:
        small = torch.empty(10, dtype=torch.float32)
        big = torch.empty(1000, dtype=torch.float32)
        del big
        tracker.reset_peak()
        assert tracker.peak_bytes == 10 * FLOAT32
    del small


def test_storage_resize_outside_dispatch_is_followed() -> None:
    """FSDP frees and re-allocates unsharded parameters with ``UntypedStorage.resize_``."""
    original = torch.UntypedStorage.resize_
    param = torch.empty(1000, dtype=torch.float32)
    param.untyped_storage().resize_(0)
    tracker = StorageTracker()
    with tracker:
        with tracker.category("unsharded"):
            param.untyped_storage().resize_(1000 * FLOAT32)
        assert tracker.by_category() == {"unsharded": 1000 * FLOAT32}
        param.untyped_storage().resize_(0)
        assert tracker.live_bytes == 0
    assert tracker.peak_bytes == 1000 * FLOAT32
    assert torch.UntypedStorage.resize_ is original


def test_a_storage_dying_in_another_thread_is_subtracted() -> None:
    tracker = StorageTracker()
    with tracker:
        holder = [torch.empty(256, dtype=torch.float32)]
    worker = threading.Thread(target=holder.clear)
    worker.start()
    worker.join()
    assert tracker.live_bytes == 0
    assert tracker.peak_bytes == 256 * FLOAT32


def test_device_filter_and_meta_storages() -> None:
    cuda_only = StorageTracker(device="cuda")
    cuda_only.track(torch.empty(10), "params")
    assert cuda_only.live_bytes == 0
    anywhere = StorageTracker()
    anywhere.track(torch.empty(10, device="meta"), "params")
    assert anywhere.live_bytes == 0


@pytest.mark.parametrize("optimizer_name", ["sgd-momentum", "adam"])
def test_a_linear_training_step_is_accounted_by_category(optimizer_name: str) -> None:
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 32)
    params_bytes = (64 * 32 + 32) * FLOAT32
    if optimizer_name == "adam":
        optimizer: torch.optim.Optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        state_bytes = 2 * params_bytes + 2 * FLOAT32  # exp_avg, exp_avg_sq, a float32 step each
    else:
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        state_bytes = params_bytes  # one momentum buffer per parameter
    inputs = torch.randn(8, 64)

    tracker = StorageTracker()
    tracker.track(model.parameters(), "params")
    tracker.track(model.parameters(), "params")
    assert tracker.by_category() == {"params": params_bytes}
    with tracker:
        with tracker.category("activations"):
            loss = model(inputs).square().mean()
        assert tracker.by_category()["activations"] > 0
        with tracker.category("grads"):
            loss.backward()
        del loss
        assert tracker.by_category() == {"params": params_bytes, "grads": params_bytes}
        with tracker.category("optimizer"):
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        assert tracker.by_category() == {"params": params_bytes, "optimizer": state_bytes}


def test_memory_figures_on_cpu_build_a_memory_event() -> None:
    tracker = StorageTracker()
    with tracker, tracker.category("comm"):
        buffer = torch.empty(100, dtype=torch.float32)
    figures = memory_figures(tracker, torch.device("cpu"))
    assert figures["cuda"] is None and figures["nvml"] is None
    assert figures["source"] == "tracker"
    event = protocol.Memory(run="r", rank=0, seq=0, t_ns=0, phase=0, label="after", **figures)
    decoded = protocol.decode(protocol.encode(event))
    assert decoded.live_bytes == decoded.peak_bytes == 100 * FLOAT32
    assert decoded.by_category == {"comm": 100 * FLOAT32}
    del buffer
