"""specdec: a research framework for speculative decoding.

``specdec.load(target, draft=None, method="sps", **overrides)`` is the one-call Python API
(``specdec.api``): the eval's config, checks and decoding loop behind a ``Decoder`` whose
``generate`` returns or streams tokens with the run's stats. It is imported on first use, so
``import specdec.<module>`` stays as light as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["Decoder", "Output", "load"]

if TYPE_CHECKING:
    from specdec.api import Decoder, Output, load


def __getattr__(name: str) -> Any:
    """``specdec.load`` / ``Decoder`` / ``Output`` from ``specdec.api``, imported on first use."""
    if name in __all__:
        from specdec import api

        return getattr(api, name)
    raise AttributeError(f"module 'specdec' has no attribute {name!r}")
