"""Typed schema of the eval config's scalar keys, checked at the start of ``run``.

Hydra accepts any value for a key the config declares: ``limit=abc`` composes, as the string
``"abc"``, and without a check ends in a traceback deep inside the run, or after minutes of model
loading. ``validate`` checks the top-level keys (``EvalKeys``), ``sampling`` (``SamplingKeys``)
and each dataset's ``limit`` / ``max_new_tokens`` / ``chat_template`` / ``template``
(``DatasetKeys``) against their types and ranges before anything loads, and raises ``ValueError``
naming the key, the bad value and what is expected; then the component groups' keys (``model``
and its ``placement:`` node, ``drafter``, ``drafter.policy``, ``verifier``) are checked against
their constructors (``specdec.bench.run.components``). Whether this machine has the devices they
name (``device=cuda`` on a CPU-only machine) is the preflight's one device check
(``specdec.bench.run.preflight``: ``specdec.models.placement.check_before_loading``).

Types (``specdec.bench.run.values``): ``int`` (a bool is not an int here), ``float`` (an int is
accepted), ``bool``, ``str``, ``X | None`` and ``Literal[...]``; ranges come from each field's
``metadata`` (``ge``, ``gt``, ``le``). The keys themselves are declared once, in
``specdec.bench.eval_keys`` (re-exported here).
"""

from __future__ import annotations

import typing
from dataclasses import fields, is_dataclass

from omegaconf import DictConfig, OmegaConf

from specdec.bench.eval_keys import DatasetKeys, EvalKeys, SamplingKeys, bounds
from specdec.bench.run.components import check_components
from specdec.bench.run.values import check_value

__all__ = ["DatasetKeys", "EvalKeys", "SamplingKeys", "validate"]


def _checked(cls: type, node: DictConfig, prefix: str) -> dict:
    hints = typing.get_type_hints(cls)
    out = {}
    for f in fields(cls):
        if f.name in node and not is_dataclass(hints[f.name]):
            check_value(prefix + f.name, node[f.name], hints[f.name], bounds(f))
            out[f.name] = node[f.name]
    return out


def validate(cfg: DictConfig) -> EvalKeys:
    """Check the eval config's scalar keys; returns them typed.

    Raises:
        ValueError: naming the first bad key, its value and the expected type and range.
    """
    top = _checked(EvalKeys, cfg, "")
    sampling = _checked(SamplingKeys, cfg.get("sampling") or OmegaConf.create(), "sampling.")
    for name, ds in (cfg.get("benchmark", {}).get("datasets") or {}).items():
        _checked(DatasetKeys, ds, f"benchmark.datasets.{name}.")
    check_components(cfg)  # model.*, drafter, drafter.policy, verifier: components.py
    return EvalKeys(**top, sampling=SamplingKeys(**sampling))
