"""The report's output folder (``--out``): checked before anything is read or written."""

from __future__ import annotations

from pathlib import Path

from specdec.errors import BadInput


def check_out_folder(path: str | Path, flag: str = "--out") -> Path:
    """``path`` when it is a folder or can be made one (nothing is made).

    Raises:
        BadInput: naming ``flag`` when ``path`` or a parent of it is a file.
    """
    path = Path(path)
    for part in (path, *path.parents):
        if part.exists():
            if not part.is_dir():
                what = "a file" if part == path else f"below {part}, a file"
                raise BadInput(
                    f"{flag} {path}: {what}, not a folder; give {flag} a folder "
                    "(it is made when missing), or move the file away"
                )
            break
    return path


def out_folder(path: str | Path, flag: str = "--out") -> Path:
    """``path`` as an existing folder (made, with its parents, when missing).

    Raises:
        BadInput: naming ``flag`` when ``path`` or a parent is a file, or it cannot be made.
    """
    path = check_out_folder(path, flag)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise BadInput(
            f"{flag} {path}: cannot make the folder ({err.strerror}); give {flag} "
            "a folder that can be written"
        ) from err
    return path
