"""One config value against a type hint and a range: the check behind every config schema.

``check_value(key, value, hint, limits)`` raises ``BadInput`` naming the key, the bad value and
what is expected. Hints: ``int`` (a bool is not an int here), ``float`` (an int is accepted),
``bool``, ``str``, ``X | None``, ``Literal[...]`` and a list of one of these
(``list[int]``, ``Sequence[int]``, ``tuple[int, ...]``); ranges (``ge``, ``gt``, ``le``) apply to
a number and to each element of a list. ``checkable(hint)`` says whether a hint is one of these
(other hints, e.g. a class or a mapping, are left to the code that takes the value).

Users: ``specdec.bench.run.schema`` (the eval's own keys) and ``specdec.bench.run.components`` (the
keys of the component groups, typed by their constructors' signatures).
"""

from __future__ import annotations

import collections.abc
import math
import types
import typing
from typing import Literal

from specdec.errors import BadInput

SCALARS = (int, float, bool, str, type(None))
SEQUENCES = (list, tuple, collections.abc.Sequence)


def _options(hint: object) -> list[object]:
    """The alternatives of a union (``int | None``) or the hint itself."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return list(typing.get_args(hint))
    return [hint]


def _element(hint: object) -> object | None:
    """The element hint of ``list[X]`` / ``Sequence[X]`` / ``tuple[X, ...]`` (else None)."""
    if typing.get_origin(hint) not in SEQUENCES:
        return None
    args = [a for a in typing.get_args(hint) if a is not Ellipsis]
    return args[0] if len(args) == 1 else None


def checkable(hint: object) -> bool:
    """Whether ``check_value`` knows every alternative of ``hint``."""

    def known(option: object) -> bool:
        element = _element(option)
        if element is not None:
            return element in SCALARS[:-1] or typing.get_origin(element) is Literal
        return option in SCALARS or typing.get_origin(option) is Literal

    return all(known(option) for option in _options(hint))


def _matches(value: object, hint: object) -> bool:
    if hint is type(None):
        return value is None
    if typing.get_origin(hint) is Literal:
        return value in typing.get_args(hint)
    element = _element(hint)
    if element is not None:
        return isinstance(value, list | tuple) and all(_matches(v, element) for v in value)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)  # bool, str


def _describe(hint: object, limits: dict) -> str:
    words = []
    for option in _options(hint):
        element = _element(option)
        if option is type(None):
            words.append("null")
        elif typing.get_origin(option) is Literal:
            words.append(" or ".join(repr(v) for v in typing.get_args(option)))
        elif element is not None:
            words.append(f"a list of ({_describe(element, limits)})")
        else:
            name = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}[
                option
            ]
            ops = {"ge": ">=", "gt": ">", "le": "<="}
            bounds = " and ".join(f"{ops[k]} {v}" for k, v in limits.items())
            words.append(f"{name} {bounds}" if bounds else name)
    return " or ".join(words)


def _in_range(value: object, limits: dict) -> bool:
    if isinstance(value, list | tuple):
        return all(_in_range(v, limits) for v in value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return (
            math.isfinite(value)
            and value >= limits.get("ge", -math.inf)
            and value > limits.get("gt", -math.inf)
            and value <= limits.get("le", math.inf)
        )
    return True


def check_value(key: str, value: object, hint: object, limits: dict | None = None) -> None:
    """Raise ``BadInput`` naming ``key`` unless ``value`` fits ``hint`` and ``limits``."""
    limits = limits or {}
    ok = any(_matches(value, option) for option in _options(hint)) and _in_range(value, limits)
    if not ok:
        raise BadInput(f"{key}={value!r} is not valid: expected {_describe(hint, limits)}")
