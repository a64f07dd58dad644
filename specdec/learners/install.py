"""Where ``python -m specdec.train`` exports a trained part, and the guard on shipped files.

Every experiment's ``export`` node carries four keys that every ``export_*`` function takes and
hands to ``export_folder``:

* ``folder``: null (default) exports under the run folder, ``<run dir>/export/``; a path writes
  there instead;
* ``install``: ``true`` writes into ``asset`` instead, the folder the method's config reads
  (``specdec/assets/...``): the trained part replaces the shipped one;
* ``asset``: that folder (each experiment names its own);
* ``force``: consent to replace files already there.

A destination outside the run folder that already holds files is never written without
``export.force=true``: a help example or a test run cannot silently replace the tracked, shipped
weights, and the refusal names the file. Inside the run folder a rerun replaces its own export
(resuming a finished run re-exports). ``train.py`` calls ``export_folder`` once before ``fit`` as
well, so a refusal comes before the training, not after it: also that of a destination no export
can write (a file, a path through a file, a folder this process may not create files in). That
first call also finishes a swap of the destination that a killed export left half done
(``models/folder_swap.py``), so the check sees the files really there and the export carries them
over.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from specdec.errors import BadInput
from specdec.models.folder_swap import recover_folder

EXPORT_SUBDIR = "export"  # <run dir>/export/: the default destination


def _inside(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


def _key(install: bool, folder: str | Path | None) -> str:
    """The config key that chose the destination, for messages."""
    return "export.asset" if install else "export.folder" if folder else "the run folder"


def check_writable(dest: Path, key: str) -> None:
    """Refuse (``BadInput``, naming ``key``) a destination no export can write: a file, a path
    through a file, or one whose nearest existing folder refuses a new entry (the export's
    temporary sibling goes there). Probed by creating and removing an empty folder, so a
    read-only file system or missing permission is found whoever runs it."""
    fix = (
        f"pass {key}=<a folder you can write>"
        if key != "the run folder"
        else "pass export.folder=<a folder you can write> or another paths.output_dir"
    )
    if dest.exists() and not dest.is_dir():
        raise BadInput(
            f"the export folder {dest} ({key}) is a file, not a folder; {fix} or remove the file"
        )
    parent = dest.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise BadInput(
            f"the export folder {dest} ({key}) cannot be created: {parent} is a file; {fix}"
        )
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".specdec-export-probe-", dir=parent))
    except OSError as err:
        raise BadInput(
            f"the export folder {dest} ({key}) cannot be written: {parent} refuses "
            f"new files ({err.strerror or err}); {fix}"
        ) from err


def export_folder(
    out_dir: str | Path,
    *,
    folder: str | Path | None = None,
    install: bool = False,
    asset: str | Path | None = None,
    force: bool = False,
) -> Path:
    """The folder an export writes to, after checking it may be written.

    Args:
        out_dir: the run folder (``paths.output_dir``).
        folder: an explicit destination; None: ``<out_dir>/export`` (or ``asset`` when
            ``install``).
        install: write into ``asset``, the shipped folder the method's config reads.
        asset: the shipped folder of this experiment.
        force: replace files already in a destination outside the run folder.

    Raises:
        BadInput: ``install`` without an ``asset``, or with an explicit ``folder`` too; a
            destination no export can write (``check_writable``); or a destination outside
            ``out_dir`` that holds files, without ``force`` (names a file and the fix).
    """
    run = Path(out_dir).resolve()
    if install and folder is not None:
        raise BadInput(
            f"export.install=true and export.folder={folder} name two destinations; "
            "drop export.folder (install writes to export.asset) or export.install"
        )
    if install and not asset:
        raise BadInput(
            "export.install=true but this experiment names no export.asset (the "
            "shipped folder); set export.asset=DIR or export.folder=DIR"
        )
    dest = Path(asset if install else folder) if (install or folder) else run / EXPORT_SUBDIR
    dest = dest.resolve()
    check_writable(dest, _key(install, folder))
    recover_folder(dest)  # a kill between the swap's renames: the folder (and its files) back
    if not force and not _inside(dest, run) and dest.is_dir():
        existing = sorted(p for p in dest.iterdir() if not p.name.startswith("."))
        if existing:
            more = f" (and {len(existing) - 1} more)" if len(existing) > 1 else ""
            raise BadInput(
                f"the export would overwrite {existing[0]}{more}, which this run did not write; "
                "pass export.force=true to replace it, or leave export.install/export.folder "
                f"unset to export under the run folder ({run / EXPORT_SUBDIR})"
            )
    return dest
