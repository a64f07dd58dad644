"""``cuda_sync``: a graph capture and a device-wide synchronisation never overlap across threads.

The capture itself needs CUDA (``tests/core/test_graphs.py -m gpu``, ``scripts/gpu_check.sh``);
here the lock is checked to be held where it must be, with the CUDA calls replaced.
Deterministic: no false failures.
"""

from __future__ import annotations

import threading

import torch

from specdec import cuda_sync
from specdec.cuda_sync import CAPTURE_LOCK
from specdec.graphs import GraphRunner


def test_a_device_sync_holds_the_capture_lock(monkeypatch):
    held = []
    monkeypatch.setattr(
        torch.cuda, "synchronize", lambda device=None: held.append(CAPTURE_LOCK.locked())
    )
    cuda_sync.synchronize(0)
    assert held == [True] and not CAPTURE_LOCK.locked()


def test_a_capture_holds_the_lock_and_waits_for_a_sync_in_another_thread(monkeypatch):
    order: list[str] = []
    runner = GraphRunner.__new__(GraphRunner)  # only _record's locking is exercised
    monkeypatch.setattr(
        GraphRunner,
        "_record_locked",
        lambda self, *a: order.append(f"capture {CAPTURE_LOCK.locked()}"),
    )
    release, locked = threading.Event(), threading.Event()

    def syncing() -> None:  # another thread's device-wide sync, in progress
        with CAPTURE_LOCK:
            order.append("sync")
            locked.set()
            release.wait(5)

    other = threading.Thread(target=syncing)
    other.start()
    assert locked.wait(5)  # the sync holds the lock first
    capture = threading.Thread(target=runner._record, args=(None, 1, False))
    capture.start()
    capture.join(0.2)
    assert capture.is_alive() and order == ["sync"]  # the capture waits for the sync to end
    release.set()
    other.join()
    capture.join(5)
    assert order == ["sync", "capture True"]
