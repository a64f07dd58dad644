"""The sandbox's fallbacks, logged: each layer the OS refused is named once per process.

A run lists the layers it obtained (``SandboxResult.layers``); where the OS refuses one the
sandbox still runs without it. ``warn_missing`` logs a warning the first time a run of this
process lacks a layer of ``EXPECTED`` (a HumanEval pass runs the sandbox 164 times: one warning
per fallback, not one per task), saying what is then left unguarded.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)

#: layer -> what the program can do without it
EXPECTED = {
    "cgroup-memory": "no writable memory cgroup: memory is capped per process only (RLIMIT_AS), "
    "so the sandbox's processes together may hold up to nproc x memory_bytes",
    "cgroup-pids": "no writable pids cgroup: processes are capped by RLIMIT_NPROC only, which "
    "counts every process of the sandbox's uid",
    "netns": "no network namespace: the program reaches the network (Landlock refuses TCP only "
    "where the kernel has Landlock ABI 4)",
    "private-proc": "no PID namespace with its own /proc: the program can read every host "
    "process's command line in /proc",
}
_warned: set[str] = set()


def warn_missing(layers: tuple[str, ...]) -> list[str]:
    """Log a warning for each ``EXPECTED`` layer missing from ``layers`` not warned of yet.

    Returns:
        The layers warned of by this call.
    """
    new = [name for name in EXPECTED if name not in layers and name not in _warned]
    for name in new:
        _warned.add(name)
        log.warning(
            "sandbox: %s (layer %s not obtained; this run's layers: %s)",
            EXPECTED[name],
            name,
            ", ".join(layers) or "none",
        )
    return new
