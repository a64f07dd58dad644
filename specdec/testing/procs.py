"""Process states for tests of killed runs (Linux ``/proc``)."""

from __future__ import annotations

from pathlib import Path


def gone(pid: int) -> bool:
    """The process has exited (a zombie waiting for a parent to reap it counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")
