"""The sandbox's private /proc, and its fallbacks logged where the OS refuses a layer.

The program must not see the host's processes: it reads the command line of the pytest process
(a host process it did not start) and lists ``/proc``. Where this machine allows a PID and a
mount namespace (``unshare --pid --mount-proc``, in a user namespace or as root) the sandbox
must have obtained its own procfs; elsewhere the result must not claim it. A refused cgroup is
simulated by hiding the cgroup hierarchies from ``specdec.bench.sandbox.cgroup``.
"""

from __future__ import annotations

import ast
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specdec.bench.sandbox import cgroup, fallbacks, run_sandboxed

LINUX = sys.platform.startswith("linux")
LOGGER = "specdec.bench.sandbox.fallbacks"


def _unshare_ok(*flags: str) -> bool:
    """Whether ``unshare FLAGS true`` works here (the util-linux tool, not the sandbox's code)."""
    exe = "/usr/bin/unshare" if Path("/usr/bin/unshare").exists() else None
    if not LINUX or exe is None:
        return False
    return subprocess.run([exe, *flags, "true"], capture_output=True, check=False).returncode == 0


def _private_proc_possible() -> bool:
    """A PID namespace with a fresh procfs: unprivileged (user namespace), or as root."""
    return _unshare_ok("--user", "--map-root-user", "--pid", "--mount-proc", "--fork") or (
        os.geteuid() == 0 and _unshare_ok("--pid", "--mount-proc", "--fork")
    )


@pytest.mark.skipif(not LINUX, reason="/proc is Linux's")
def test_the_program_cannot_read_host_processes():
    me = os.getpid()
    cmdline = Path(f"/proc/{me}/cmdline").read_bytes()
    assert b"pytest" in cmdline  # the control: the host reads its own command line
    res = run_sandboxed(
        "import os\n"
        f"try:\n    print(open('/proc/{me}/cmdline', 'rb').read())\n"
        "except OSError as e:\n    print('refused', e.errno)\n"
        "print(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))\n",
        timeout_s=5,
    )
    if not _private_proc_possible():
        assert "private-proc" not in res.layers
        pytest.skip(
            "this kernel refuses a PID namespace with its own /proc (unshare --pid "
            "--mount-proc fails): the host's /proc stays visible, and the result says so"
        )
    assert res.passed and "private-proc" in res.layers and "pidns" in res.layers, res
    first, pids = res.output.splitlines()
    assert first == "refused 2" and b"pytest" not in res.output.encode()
    assert ast.literal_eval(pids) == [1]  # only itself: PID 1 of its namespace


def test_without_a_writable_cgroup_the_fallback_is_logged(monkeypatch, caplog):
    monkeypatch.setattr(fallbacks, "_warned", set())
    monkeypatch.setattr(cgroup, "_mounts", list)  # no cgroup hierarchy: none can be made
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        res = run_sandboxed("print('ran')\n", timeout_s=5)
        again = run_sandboxed("print('ran')\n", timeout_s=5)
    assert res.passed and again.passed
    assert not {"cgroup-memory", "cgroup-pids"} & {*res.layers, *again.layers}
    memory = [r for r in caplog.records if "cgroup-memory" in r.getMessage()]
    pids = [r for r in caplog.records if "layer cgroup-pids" in r.getMessage()]
    assert len(memory) == len(pids) == 1  # once per process, not once per run
    assert memory[0].levelno == logging.WARNING and "RLIMIT_AS" in memory[0].getMessage()


def test_obtained_layers_are_not_warned_of(monkeypatch, caplog):
    monkeypatch.setattr(fallbacks, "_warned", set())
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        res = run_sandboxed("print('ran')\n", timeout_s=5)
    warned = {
        name
        for name in fallbacks.EXPECTED
        if any(f"layer {name} " in r.getMessage() for r in caplog.records)
    }
    assert res.passed and warned == set(fallbacks.EXPECTED) - set(res.layers)
