"""Errors in what the user gave: a config value, a data or record file, an asset, a machine.

A bad input is not a bug, so its traceback helps nobody: the message already names the input and
the fix. Code that checks input raises ``BadInput`` (a ``ValueError``) or ``MissingInput`` (a
``FileNotFoundError``); both are ``InputError``. The entry points (``python -m specdec.eval``,
``python -m specdec.train``) run inside ``exit_on_input_error()``, which prints such an error as
one ``error: ...`` line on stderr and exits with status 2. Any other exception keeps its
traceback, and ``HYDRA_FULL_ERROR=1`` (Hydra's switch for full tracebacks) shows it for input
errors too.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

EXIT_STATUS = 2  # what argparse and most CLIs return for a usage error


class InputError(Exception):
    """Base of the errors that name a bad input and its fix (caught by the entry points)."""


class BadInput(InputError, ValueError):
    """A value, file row or asset that is present but wrong."""


class MissingInput(InputError, FileNotFoundError):
    """A file, asset or package the config asks for that is not there."""


def input_error(err: BaseException | None) -> InputError | None:
    """``err`` or the first error of its ``__cause__`` chain that is an ``InputError`` (Hydra's
    ``instantiate`` re-raises a target's error as ``InstantiationException(...) from err``)."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, InputError):
            return err
        seen.add(id(err))
        err = err.__cause__
    return None


@contextmanager
def exit_on_input_error() -> Iterator[None]:
    """Turn an ``InputError`` raised inside (or wrapped by Hydra) into ``error: <message>`` on
    stderr and exit 2; every other exception passes through with its traceback."""
    try:
        yield
    except Exception as err:
        cause = input_error(err)
        if cause is None or os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        print(f"error: {cause}", file=sys.stderr, flush=True)
        raise SystemExit(EXIT_STATUS) from None
