"""The sandbox's total caps: a cgroup of its own for memory and processes, where one can be made.

``RLIMIT_AS`` and ``RLIMIT_NPROC`` cap one process and the number of processes, not their sum:
64 processes of 2 GiB each are still 128 GiB. A cgroup caps the whole sandbox: ``memory``
(every process's pages and its tmpfs files together, no swap) and ``pids``. It is made as a
child of the caller's own cgroup, cgroup v1 (one hierarchy per controller) or v2 (where the
caller's cgroup delegates the controller), joined by the host before the sandbox's program
starts, and removed after its processes are killed. Where the hierarchy is not writable (no
root, no delegation) no cgroup is made, ``layers`` says so by leaving them out, and the host
logs the fallback (``fallbacks``).
"""

from __future__ import annotations

import os
import secrets
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

V1_FILES = {
    "memory": ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes"),
    "pids": ("pids.max",),
}
V2_FILES = {"memory": ("memory.max", "memory.swap.max"), "pids": ("pids.max",)}
REMOVE_WAIT_S = 2.0


@dataclass
class SandboxCgroups:
    """The cgroup folders made for one sandboxed run (empty where none could be)."""

    dirs: list[Path] = field(default_factory=list)
    layers: list[str] = field(default_factory=list)


def _mounts() -> list[tuple[str, str, set[str]]]:
    """(mount point, fstype, options) of the cgroup hierarchies."""
    found = []
    try:
        text = Path("/proc/self/mounts").read_text(encoding="utf-8")
    except OSError:
        return found
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[2] in ("cgroup", "cgroup2"):
            found.append((parts[1], parts[2], set(parts[3].split(","))))
    return found


def _own_paths() -> dict[str, str]:
    """This process's cgroup path per v1 controller, and under ``""`` its v2 path."""
    paths: dict[str, str] = {}
    try:
        text = Path("/proc/self/cgroup").read_text(encoding="utf-8")
    except OSError:
        return paths
    for line in text.splitlines():
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else [""]:
            paths[name] = path
    return paths


def _make(parent: Path, name: str, settings: dict[str, tuple[str, bool]]) -> Path | None:
    """A child cgroup of ``parent`` with ``settings`` (file: (value, required)) written."""
    child = parent / name
    try:
        child.mkdir()
        for file, (value, required) in settings.items():
            if required or (child / file).exists():
                (child / file).write_text(value)
    except OSError:
        _rmdir(child)
        return None
    return child


def _settings(
    files: dict[str, tuple[str, ...]], values: dict[str, int], controllers: list[str]
) -> dict[str, tuple[str, bool]]:
    """The files to write: the cap (required), then no swap where the kernel has the file."""
    out = {}
    for c in controllers:
        cap, *rest = files[c]
        out[cap] = (str(values[c]), True)
        out.update(
            {f: (str(values[c]) if f.startswith("memory.memsw") else "0", False) for f in rest}
        )
    return out


def create(*, memory_bytes: int, pids: int) -> SandboxCgroups:
    """Make the sandbox's cgroups (memory total ``memory_bytes``, at most ``pids`` tasks)."""
    cg = SandboxCgroups()
    name = f"specdec-sandbox-{secrets.token_hex(6)}"
    own, values = _own_paths(), {"memory": memory_bytes, "pids": pids}
    for point, fstype, options in _mounts():
        if fstype == "cgroup":  # v1: one hierarchy per controller
            groups = [(point + own[c], V1_FILES, [c]) for c in values if c in options and c in own]
        elif "" in own:  # v2: the controllers the caller's cgroup delegates
            parent = point + own[""]
            try:
                delegated = Path(parent, "cgroup.subtree_control").read_text().split()
            except OSError:
                continue
            groups = [(parent, V2_FILES, [c for c in values if c in delegated])]
        else:
            continue
        for parent, files, controllers in groups:
            controllers = [c for c in controllers if f"cgroup-{c}" not in cg.layers]
            child = (
                _make(Path(parent), name, _settings(files, values, controllers))
                if controllers
                else None
            )
            if child is not None:
                cg.dirs.append(child)
                cg.layers += [f"cgroup-{c}" for c in controllers]
    return cg


def join(cg: SandboxCgroups, pid: int) -> bool:
    """Move ``pid`` into every cgroup made; False (and the layers dropped) where one refused."""
    for d in cg.dirs:
        try:
            (d / "cgroup.procs").write_text(str(pid))
        except OSError:
            cg.layers.clear()
            return False
    return True


def kill_and_remove(cg: SandboxCgroups) -> None:
    """SIGKILL whatever is left in the cgroups (a process that left the process group too)."""
    deadline = time.monotonic() + REMOVE_WAIT_S
    for d in cg.dirs:
        while True:
            pids = _members(d)
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if (not pids and _rmdir(d)) or time.monotonic() > deadline:
                break
            time.sleep(0.01)
    cg.dirs = [d for d in cg.dirs if d.exists()]  # a second call finds only what is left


def _members(d: Path) -> list[int]:
    try:
        return [int(x) for x in (d / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def _rmdir(d: Path) -> bool:
    try:
        d.rmdir()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True
