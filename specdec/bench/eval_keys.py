"""The keys of ``conf/eval.yaml``, declared once: type, default, range, hashed, in the run folder.

Each scalar key is a field of ``EvalKeys`` (``sampling``: ``SamplingKeys``, i.e. ``Sampling``;
each dataset's keys that shape generation: ``DatasetKeys``); the other top-level nodes (config
groups, ``paths``, ``hydra``) are ``GROUPS``. A field's ``metadata`` holds

- ``ge`` / ``gt`` / ``le``: its range (``bounds``; checked by
``specdec.bench.run.schema.validate``);
- ``hashed``: part of the records' config hash (``specdec.bench.records.config_hash``) or not: what
  only selects or reports (``limit``, ``warmup``, ...) is not, so raising ``limit`` resumes a run;
- ``in_run_dir``: an override of it names the run folder (Hydra's ``override_dirname``) or not.

``UNHASHED_KEYS`` / ``UNHASHED_DATASET_KEYS`` derive from these. Hydra reads
``hydra.job.config.override_dirname.exclude_keys`` before any Python runs, so that list stays
literal in ``eval.yaml``; ``tests/bench/test_eval_keys.py`` proves it equals
``RUN_DIR_EXCLUDED_KEYS``, and that every scalar key of ``eval.yaml`` is a field here and every
field a key there.
"""

from __future__ import annotations

import typing
from dataclasses import Field, dataclass, field, fields
from typing import Literal

from specdec.sampling_params import Sampling

_BOUND_NAMES = ("ge", "gt", "le")


def _key(
    default: object = None, *, hashed: bool = True, in_run_dir: bool = True, **limits: float
) -> typing.Any:
    return field(default=default, metadata={"hashed": hashed, "in_run_dir": in_run_dir, **limits})


def bounds(f: Field) -> dict[str, float]:
    """The range of a key (``ge``, ``gt``, ``le``), without its hash and run-folder flags."""
    return {k: v for k, v in f.metadata.items() if k in _BOUND_NAMES}


#: ``sampling``: applied to target and draft alike; its keys, defaults and ranges are the fields
#: of ``Sampling`` (declared once, in ``specdec.sampling_params``)
SamplingKeys = Sampling


@dataclass(frozen=True)
class DatasetKeys:
    """``benchmark.datasets.<name>``: the scalar keys that shape generation."""

    max_new_tokens: int = _key(1, ge=1)
    limit: int | None = _key(None, hashed=False, ge=1)  # raising it resumes the same records
    chat_template: bool = _key(True)
    template: str = _key("{turn}")


@dataclass(frozen=True)
class EvalKeys:
    """The top-level scalar keys of ``conf/eval.yaml`` (comments there say what each does)."""

    method_name: str | None = _key(None)  # ??? in eval.yaml: set by the method preset
    seed: int = _key(0)
    max_new_tokens: int | None = _key(None, ge=1)
    limit: int | None = _key(None, hashed=False, in_run_dir=False, ge=1)
    per_category: int | None = _key(None, hashed=False, ge=1)
    warmup: int = _key(1, hashed=False, in_run_dir=False, ge=0)
    resume: bool = _key(True, hashed=False, in_run_dir=False)
    on_bad_record: Literal["stop", "skip"] = _key("stop", hashed=False, in_run_dir=False)
    quality: bool = _key(False)
    quality_timeout_s: float = _key(10.0, gt=0.0)
    confirm_run_unsafe_code: bool = _key(False, hashed=False, in_run_dir=False)
    cost_model: bool = _key(True)
    progress: bool = _key(True, hashed=False, in_run_dir=False)
    device: str = _key("cpu")
    threads: int | None = _key(None, ge=1)
    rank_timeout_s: float = _key(1800.0, hashed=False, in_run_dir=False, gt=0.0)
    truncate_prompts: Literal["left"] | None = _key(None)
    optimized_metric: str | None = _key("sweep_objective", hashed=False, in_run_dir=False)
    sampling: SamplingKeys = field(
        default_factory=SamplingKeys, metadata={"hashed": True, "in_run_dir": True}
    )


@dataclass(frozen=True)
class Group:
    """A top-level node of the eval config that is not a scalar key (a config group, ``paths``).

    Attributes:
        hashed: part of the records' config hash.
        run_dir_excluded: the override keys of this node left out of the run folder's name (the
            choices of model, benchmark and method are folders of the run path already).
    """

    hashed: bool
    run_dir_excluded: tuple[str, ...] = ()


GROUPS: dict[str, Group] = {
    "model": Group(True, ("model",)),
    "benchmark": Group(True, ("benchmark",)),
    "method": Group(True, ("method",)),  # a preset (_global_): sets method_name, drafter, verifier
    "drafter": Group(True),
    "verifier": Group(True),
    "paths": Group(False, ("paths.data_dir", "paths.log_dir", "paths.cache_dir")),
    "logger": Group(False, ("logger",)),
    "hydra": Group(False),
    "hparams_search": Group(False, ("hparams_search",)),  # a search (_global_), after _self_
}


def _unhashed(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls) if not f.metadata.get("hashed", True))


UNHASHED_KEYS: tuple[str, ...] = _unhashed(EvalKeys) + tuple(
    name for name, g in GROUPS.items() if not g.hashed
)
# ``benchmark.datasets.<name>.source``: where the prompts come from (``specdec.data.registry``:
# prepare recipe, raw eval files, training split); the hash covers the prepared file's digest
DATASET_SOURCE_KEY = "source"
UNHASHED_DATASET_KEYS: tuple[str, ...] = _unhashed(DatasetKeys) + (DATASET_SOURCE_KEY,)
RUN_DIR_EXCLUDED_KEYS: tuple[str, ...] = tuple(
    f.name for f in fields(EvalKeys) if not f.metadata.get("in_run_dir", True)
) + tuple(key for g in GROUPS.values() for key in g.run_dir_excluded)
