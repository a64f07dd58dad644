"""The run directory's shared files: strict JSON written atomically, and the lock on the folder.

JSON has no NaN or infinity: Python's ``json`` writes the literals ``NaN``/``Infinity`` by default,
which other readers (``jq``, JavaScript, pandas with a strict parser) reject. ``dumps`` writes
``null`` for every non-finite float (an AR run's acceptance rate is 0/0) and refuses anything else
that is not JSON (``allow_nan=False``); readers treat ``null`` as "not defined", as they treated
NaN. ``write_json`` writes a temporary file in the same folder and ``os.replace``-s it over the
target, so a run killed while writing leaves the previous file or the new one, never a 0-byte or
half-written file. The temporary file of a writer killed mid-write (``.<name>.<pid>.tmp``) is
removed by the next write of the same file, once its pid is no longer running.

``RunLock`` holds ``fcntl.flock`` on ``<run dir>/.lock`` for the whole run: two runs of the same
folder would both see the same prompts as unrecorded and record each of them twice. The second
run fails at once with ``RunDirInUse`` (an input error: one ``error:`` line, exit 2), naming the
folder, the holder's pid and the fix. The kernel drops the lock when the
holder exits, however it exits (SIGKILL included), so a stale lock file never blocks a rerun.
In a data-parallel eval (``specdec.bench.run.ranks``) rank 0 holds ``.lock`` and rank ``r`` > 0
holds ``.lock.rank<r>`` (each rank appends to its own record file): a second launch, or a
single-process run, of a folder in use fails the same way.

``run_folder_name`` is the last part of an eval run folder (``${specdec_run_name:...}`` in
``conf/eval.yaml``, around Hydra's ``override_dirname``): the overrides as Hydra writes them, as
one folder name. A name without ``/`` is kept as it is, so the folders of existing runs (and their
records) stay where they are; a placement override (``model.placement.dtype=bfloat16``) is
written as the flat key it replaced (``model.dtype=bfloat16``, ``flat_placement``), for the same
reason; a path or hub id in a value (``model.target=/models/x``) would nest
folders, so each ``/`` becomes ``--`` (a hub id's ``org--name``, as asset folders write it), a
leading one is dropped, and a name past 255 bytes keeps its first ``MAX_NAME`` characters and a
digest.
"""

from __future__ import annotations

import fcntl
import glob
import hashlib
import json
import math
import os
import re
from pathlib import Path
from types import TracebackType
from typing import IO

from specdec.errors import InputError
from specdec.models.placement_config import KEYS, NODE

MAX_NAME = 200  # characters of a rewritten run folder's name (file systems allow 255 bytes)


#: where Hydra's ``override_dirname`` starts an override (``,`` before ``key=``)
OVERRIDE_START = re.compile(r",(?=[+~]*[A-Za-z_][\w.@/-]*=)")
PLACEMENT_KEY = re.compile(rf"^([+~]*)model\.{NODE}\.({'|'.join(KEYS)})=")


def flat_placement(dirname: str) -> str:
    """``override_dirname`` with each ``model.placement.<key>=`` override written as the flat
    ``model.<key>=`` it replaced, in Hydra's order (sorted): the folder the run had before the
    node (``specdec.models.placement_config``)."""
    if f"model.{NODE}." not in dirname:
        return dirname
    lines = [PLACEMENT_KEY.sub(r"\1model.\2=", line) for line in OVERRIDE_START.split(dirname)]
    return ",".join(sorted(lines))


def run_folder_name(dirname: str) -> str:
    """One safe folder name for Hydra's ``override_dirname`` (see the module docstring)."""
    dirname = flat_placement(dirname)
    if "/" not in dirname and len(dirname.encode()) <= 255:
        return dirname
    name = re.sub(r"(^|[=,])/+", r"\1", dirname).replace("/", "--")
    if len(name) > MAX_NAME:
        digest = hashlib.sha256(dirname.encode()).hexdigest()[:12]
        name = f"{name[: MAX_NAME - 13]}-{digest}"
    return name


def register_run_name() -> None:
    """Register ``${specdec_run_name:<override_dirname>}`` (``run_folder_name``) for the eval's
    run folder."""
    from omegaconf import OmegaConf

    if not OmegaConf.has_resolver("specdec_run_name"):
        OmegaConf.register_new_resolver("specdec_run_name", run_folder_name)


def json_safe(obj: object) -> object:
    """``obj`` with every non-finite float (NaN, ±inf) inside dicts, lists and tuples as None."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_safe(v) for v in obj]
    return obj


def dumps(obj: object, *, indent: int | None = None) -> str:
    """Strict JSON text of ``obj`` (non-finite floats as ``null``)."""
    return json.dumps(json_safe(obj), indent=indent, allow_nan=False)


def write_json(path: str | Path, obj: object) -> None:
    """Write ``obj`` as indented strict JSON to ``path`` atomically (temp file, ``os.replace``)."""
    path = Path(path)
    _remove_stale_tmps(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("w", encoding="utf-8") as f:
            f.write(dumps(obj, indent=2))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)  # only left when the write or the replace failed


def _remove_stale_tmps(path: Path) -> None:
    """Remove ``write_json``'s temporary files of ``path`` left by writers no longer running."""
    stem = f".{path.name}."
    for tmp in path.parent.glob(f"{glob.escape(stem)}*.tmp"):
        pid = tmp.name[len(stem) : -len(".tmp")]
        if pid.isdigit() and int(pid) != os.getpid() and not pid_running(int(pid)):
            tmp.unlink(missing_ok=True)


def pid_running(pid: int) -> bool:
    """Whether a process ``pid`` exists (another user's process counts too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class RunDirInUse(InputError, RuntimeError):
    """Another process holds the run directory's lock (a ``RuntimeError`` as before, and an
    input error: the fix is to wait or to pick another folder)."""


class RunLock:
    """Exclusive, non-blocking lock on a run directory, held inside ``with``.

    Raises:
        RunDirInUse: on entry, when another process holds the folder's lock.
    """

    def __init__(self, run_dir: str | Path, name: str = ".lock") -> None:
        self.path = Path(run_dir) / name
        self._file: IO[str] | None = None

    def __enter__(self) -> RunLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        f = self.path.open("a+", encoding="utf-8")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "unknown"
            f.close()
            raise RunDirInUse(
                f"run directory {self.path.parent} is in use by another eval (pid {holder}); "
                "wait for it to finish, or give this run another folder (other overrides or "
                "hydra.run.dir=...)"
            ) from None
        f.seek(0)
        f.truncate()
        f.write(str(os.getpid()))
        f.flush()
        self._file = f
        return self

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._file is not None:
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None
