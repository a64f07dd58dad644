"""Replacing an asset folder atomically, and finishing a replacement that a kill interrupted.

An export writes its files into a temporary sibling ``.<name>.<pid>.<hex>.tmp`` of the folder
``<name>``. When they are complete (flushed to disk, and the entries of the old folder that were
not rewritten, such as a model card or the user's own files, carried over), two renames swap it
in: ``<name>`` to ``.<name>.<pid>.<hex>.old``, then the ``.tmp`` to ``<name>``; the ``.old`` is
deleted last. A process killed on the way leaves one of three states:

* before the first rename: the old folder and a ``.tmp`` (half written or not);
* between the renames: no ``<name>``, a complete ``.tmp`` and the ``.old``;
* after the second: the new folder and a stale ``.old``.

``recover_folder`` finishes what a dead process began, at the next start (every export calls it,
and ``python -m specdec.train`` before it trains): a ``.old`` beside a missing folder is completed
with its ``.tmp`` or, without one, restored; a ``.old`` beside a present folder hands it the
entries only it has (weights never: a stale weights file would shadow or mix with the new ones)
and is deleted; then the ``.tmp`` folders of dead processes are deleted. Files of a live process
(the pid in the name) are its own to finish and are left alone.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from specdec.errors import BadInput

WEIGHTS = "model.safetensors"
INDEX = "model.safetensors.index.json"  # models/shards.py


def is_weights(name: str) -> bool:
    """A weights file of either layout (one file, or shards and their index)."""
    return name in (WEIGHTS, INDEX) or (name.startswith("model-") and ".safetensors" in name)


def carry_over(old: Path, new: Path) -> None:
    """Link (else copy) into ``new`` the entries of ``old`` that ``new`` lacks (a model card, the
    user's own files), weights files left out (``is_weights``)."""
    for entry in old.iterdir():
        dest = new / entry.name
        if dest.exists() or dest.is_symlink() or is_weights(entry.name):
            continue
        if entry.is_symlink():
            shutil.copy2(entry, dest, follow_symlinks=False)  # the link itself
        elif entry.is_dir():
            shutil.copytree(entry, dest, symlinks=True)
        else:
            try:
                os.link(entry, dest)
            except OSError:  # no hard links here
                shutil.copy2(entry, dest)


def _fsync_files(folder: Path) -> None:
    """Flush the files written into ``folder`` to disk before the rename publishes them."""
    for file in folder.iterdir():
        if file.is_file() and not file.is_symlink():
            fd = os.open(file, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _owner_alive(folder: Path, sibling: Path) -> bool:
    """Whether the process named in ``.<name>.<pid>.<hex>.<kind>`` still runs (this one
    included): a name without a pid counts as a dead process's."""
    pid = sibling.name[len(folder.name) + 2 :].split(".")[0]
    return pid.isdigit() and _alive(int(pid))


def target(folder: str | Path) -> Path:
    """The absolute folder an export of ``folder`` writes (through a symlink: where it points)."""
    path = Path(os.path.abspath(folder))  # a name even for "."
    return path.resolve() if path.is_symlink() else path


def recover_folder(folder: str | Path) -> None:
    """Finish the swaps of ``folder`` that killed processes left half done (module docstring),
    then delete their temporary folders."""
    folder = target(folder)
    if not folder.parent.is_dir():
        return
    for old in sorted(folder.parent.glob(f".{folder.name}.*.old")):
        if _owner_alive(folder, old):
            continue
        # 1. killed between the renames: the .tmp of the same tag is complete (the first rename
        #    comes after its last write), so it takes the folder's place; without one, the old
        #    folder comes back
        tmp = old.with_name(old.name[: -len(".old")] + ".tmp")
        if not folder.exists():
            if tmp.is_dir():
                os.rename(tmp, folder)
            else:
                os.rename(old, folder)
                continue
        # 2. the folder is there: keep what only the old one had, then drop it
        if folder.is_dir():
            carry_over(old, folder)
        shutil.rmtree(old, ignore_errors=True)
    for stale in folder.parent.glob(f".{folder.name}.*.tmp"):
        if not _owner_alive(folder, stale):
            shutil.rmtree(stale, ignore_errors=True)


@contextmanager
def replace_folder(folder: str | Path) -> Iterator[Path]:
    """Yield an empty temporary sibling of ``folder`` to write an asset into.

    First ``recover_folder``. On a clean exit the entries of the old ``folder`` that were not
    rewritten are carried over and the temporary folder takes ``folder``'s place; on an exception
    (a ``KeyboardInterrupt`` between the two renames included) ``folder`` is left as it was.
    Usage::

        with replace_folder(dest) as tmp:
            save_file(state, str(tmp / WEIGHTS))
    """
    folder = target(folder)
    if folder.exists() and not folder.is_dir():
        raise BadInput(
            f"cannot export into {folder}: it is a file, not a folder; choose another "
            "export folder or remove the file"
        )
    folder.parent.mkdir(parents=True, exist_ok=True)
    recover_folder(folder)
    tag = f"{os.getpid()}.{uuid.uuid4().hex[:8]}"
    tmp = folder.with_name(f".{folder.name}.{tag}.tmp")  # same file system: rename is atomic
    tmp.mkdir()
    try:
        if folder.is_dir():
            shutil.copymode(folder, tmp)
        yield tmp
        if folder.is_dir():
            carry_over(folder, tmp)
        _fsync_files(tmp)
        if folder.is_dir():
            old = folder.with_name(f".{folder.name}.{tag}.old")
            aside = False
            try:
                os.rename(folder, old)
                aside = True
                os.rename(tmp, folder)  # a kill just before this: recover_folder completes it
            except BaseException:
                if aside and not folder.exists():
                    os.rename(old, folder)
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # gone after a rename; the half asset otherwise
