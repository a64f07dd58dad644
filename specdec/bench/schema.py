"""Typed schema of the eval config's scalar keys, checked at the start of ``run``.

Hydra accepts any value for a key the config declares: ``limit=abc`` composes, as the string
``"abc"``, and without a check ends in a traceback deep inside the run, or after minutes of model
loading. ``validate`` checks the top-level keys (``EvalKeys``), ``sampling`` (``SamplingKeys``)
and each dataset's ``limit`` / ``max_new_tokens`` / ``chat_template`` / ``template``
(``DatasetKeys``) against their types and ranges before anything loads, and raises ``ValueError``
naming the key, the bad value and what is expected; ``device`` must be one this machine has
(``specdec.models.pair.check_device``: ``device=cuda`` on a CPU-only machine fails here); then
the component groups' keys (``model``, ``drafter``, ``drafter.policy``, ``verifier``) are checked
against their constructors (``specdec.bench.components``).

Types (``specdec.bench.values``): ``int`` (a bool is not an int here), ``float`` (an int is
accepted), ``bool``, ``str``, ``X | None`` and ``Literal[...]``; ranges come from each field's
``metadata`` (``ge``, ``gt``, ``le``).
"""

from __future__ import annotations

import typing
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Literal

from omegaconf import DictConfig, OmegaConf

from specdec.bench.components import check_components
from specdec.bench.values import check_value
from specdec.models.pair import check_device


def _bound(default: object = None, **limits: float) -> typing.Any:
    return field(default=default, metadata=limits)


@dataclass(frozen=True)
class SamplingKeys:
    """``sampling``: applied to target and draft alike (``specdec.sampling.Sampling``)."""

    temperature: float = _bound(0.0, ge=0.0)
    top_k: int = _bound(0, ge=0)
    top_p: float = _bound(1.0, gt=0.0, le=1.0)


@dataclass(frozen=True)
class DatasetKeys:
    """``benchmark.datasets.<name>``: the scalar keys that shape generation."""

    max_new_tokens: int = _bound(1, ge=1)
    limit: int | None = _bound(None, ge=1)
    chat_template: bool = True
    template: str = "{turn}"


@dataclass(frozen=True)
class EvalKeys:
    """The top-level scalar keys of ``conf/eval.yaml``."""

    seed: int = 0
    max_new_tokens: int | None = _bound(None, ge=1)
    limit: int | None = _bound(None, ge=1)
    per_category: int | None = _bound(None, ge=1)
    warmup: int = _bound(1, ge=0)
    resume: bool = True
    on_bad_record: Literal["stop", "skip"] = "stop"
    quality: bool = False
    quality_timeout_s: float = _bound(10.0, gt=0.0)
    cost_model: bool = True
    progress: bool = True
    device: str = "cpu"
    threads: int | None = _bound(None, ge=1)
    rank_timeout_s: float = _bound(1800.0, gt=0.0)
    truncate_prompts: Literal["left"] | None = None
    optimized_metric: str | None = "sweep_objective"
    sampling: SamplingKeys = field(default_factory=SamplingKeys)


def _checked(cls: type, node: DictConfig, prefix: str) -> dict:
    hints = typing.get_type_hints(cls)
    out = {}
    for f in fields(cls):
        if f.name in node and not is_dataclass(hints[f.name]):
            check_value(prefix + f.name, node[f.name], hints[f.name], dict(f.metadata))
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
    check_device(top.get("device", "cpu"))  # this machine must have it: fail before loading
    check_components(cfg)  # model.*, drafter, drafter.policy, verifier: components.py
    return EvalKeys(**top, sampling=SamplingKeys(**sampling))
