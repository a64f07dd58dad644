"""The keyword under which a transformers model's ``forward`` takes its KV cache.

transformers 5.x renamed the argument (and the output field) ``past_key_values`` to ``cache``; the
old name still works where the new one exists, but warns on every run and is to be removed in
5.40. The project supports both sides of the rename (``pyproject.toml``'s transformers range), so
callers ask the model which name its ``forward`` takes instead of pinning one.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable


@functools.cache
def _takes_cache(forward: Callable) -> bool:
    return "cache" in inspect.signature(forward).parameters


def cache_kwarg(module: object) -> str:
    """``"cache"`` when ``module.forward`` takes it (transformers >= the rename), else
    ``"past_key_values"``. Looked up once per class."""
    forward = type(module).forward
    return "cache" if _takes_cache(forward) else "past_key_values"


def output_cache_field(output_cls: type) -> str:
    """The name of a transformers ``ModelOutput`` class's cache field (``cache`` or
    ``past_key_values``)."""
    fields = getattr(output_cls, "__dataclass_fields__", {})
    return "cache" if "cache" in fields else "past_key_values"
