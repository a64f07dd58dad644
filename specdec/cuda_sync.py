"""One process-wide lock between CUDA-graph captures and device-wide synchronisations.

A stream capture (``torch.cuda.graph``, ``specdec.graphs``) fails, and poisons the capture, when
any thread synchronises the whole device meanwhile: ``cudaDeviceSynchronize`` would wait on the
capturing stream, which CUDA forbids ("operation not permitted when stream is capturing"). With a
drafter's background job (``drafters.ahead``: PEARL, SpecBranch, SSD) two threads decode at once,
each with its own models' graph runners, and ``torch.cuda.graph`` itself synchronises the device
when a capture begins: one thread's capture met the other's on an H200 (2026-11-28), and
``pearl``, ``specbranch`` and ``ssd`` raised there. So every capture and every device-wide sync the
decoding makes (a timed forward's, ``lm_base.LMBase._clock``; a prompt's, ``bench.run.method``)
holds ``CAPTURE_LOCK``: they never overlap. Kernel launches, graph replays and stream syncs do not
take it (a capture runs on a non-blocking stream of its own, which they do not wait on).
"""

from __future__ import annotations

import threading

import torch

CAPTURE_LOCK = threading.Lock()  # held by a capture, and by a device-wide synchronisation


def synchronize(device: torch.device | int | None = None) -> None:
    """``torch.cuda.synchronize(device)``, never while another thread captures a graph."""
    with CAPTURE_LOCK:
        torch.cuda.synchronize(device)
