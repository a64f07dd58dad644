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
well, so a refusal comes before the training, not after it.
"""

from __future__ import annotations

from pathlib import Path

from specdec.errors import BadInput

EXPORT_SUBDIR = "export"  # <run dir>/export/: the default destination


def _inside(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


def export_folder(out_dir: str | Path, *, folder: str | Path | None = None,
                  install: bool = False, asset: str | Path | None = None,
                  force: bool = False) -> Path:
    """The folder an export writes to, after checking it may be written.

    Args:
        out_dir: the run folder (``paths.output_dir``).
        folder: an explicit destination; None: ``<out_dir>/export`` (or ``asset`` when
            ``install``).
        install: write into ``asset``, the shipped folder the method's config reads.
        asset: the shipped folder of this experiment.
        force: replace files already in a destination outside the run folder.

    Raises:
        BadInput: ``install`` without an ``asset``, or with an explicit ``folder`` too; or a
            destination outside ``out_dir`` that holds files, without ``force`` (names a file
            and the fix).
    """
    run = Path(out_dir).resolve()
    if install and folder is not None:
        raise BadInput(f"export.install=true and export.folder={folder} name two destinations; "
                       "drop export.folder (install writes to export.asset) or export.install")
    if install and not asset:
        raise BadInput("export.install=true but this experiment names no export.asset (the "
                       "shipped folder); set export.asset=DIR or export.folder=DIR")
    dest = Path(asset if install else folder) if (install or folder) else run / EXPORT_SUBDIR
    dest = dest.resolve()
    if not force and not _inside(dest, run) and dest.is_dir():
        existing = sorted(p for p in dest.iterdir() if not p.name.startswith("."))
        if existing:
            more = f" (and {len(existing) - 1} more)" if len(existing) > 1 else ""
            raise BadInput(
                f"the export would overwrite {existing[0]}{more}, which this run did not write; "
                "pass export.force=true to replace it, or leave export.install/export.folder "
                f"unset to export under the run folder ({run / EXPORT_SUBDIR})")
    return dest
