"""The per-model experiments (``eagle3_tiny``, ``hrad_smollm2``, ...) are deltas over the generic
any-pair ones (``conf/experiment/eagle3.yaml``, ...) and still resolve to what they did before.

``fixtures/experiment_configs_before.yaml`` is the resolved config of every preset experiment
taken before they became deltas (``paths.cache_dir=/CACHE``, the repository root as ``<root>``,
``SPECDEC_SHARED_DATA`` unset). What trains and exports must match it: ``learner``,
``datamodule``, ``data_gen``, ``export``, ``monitor``, ``trainer``, ``task_name``, ``sampling``.
The one allowed difference is a key the old file left to the code that the new one states with
the callable's own default (e.g. ``learner.step_weight: 0.8`` of ``eagle3_tiny``, the SmolLM2
preset's ``draft_path: null``): the object built is the same. A pair's ``placement:`` node is
compared as the flat keys it replaced (``specdec.models.placement_config.flat_model``).
"""

from __future__ import annotations

import inspect

import pytest
import yaml
from hydra.core.hydra_config import HydraConfig
from hydra.utils import get_object
from omegaconf import OmegaConf

from specdec.testing.paths import REPO

ROOT = REPO
SNAPSHOT = ROOT / "tests" / "fixtures" / "experiment_configs_before.yaml"
BEFORE = yaml.safe_load(SNAPSHOT.read_text())
KEYS = (
    "learner",
    "datamodule",
    "data_gen",
    "export",
    "monitor",
    "trainer",
    "task_name",
    "sampling",
)


def resolved(compose, experiment: str) -> dict:
    """The compared keys of ``+experiment=<experiment>``, resolved, paths as in the snapshot."""
    cfg = compose("train", [f"+experiment={experiment}", "paths.cache_dir=/CACHE"])
    HydraConfig.instance().set_config(cfg)  # trainer.default_root_dir reads ${hydra:...}
    try:
        out = {
            k: OmegaConf.to_container(cfg[k], resolve=True)
            if OmegaConf.is_config(cfg[k])
            else cfg[k]
            for k in KEYS
            if k in cfg
        }
    finally:  # a set HydraConfig would answer ${specdec_choice:} for later tests' configs
        HydraConfig.instance().cfg = None
    out["trainer"].pop("default_root_dir")  # the test's tmp folder (None in the snapshot)
    return yaml.safe_load(yaml.safe_dump(flat_models(out)).replace(str(ROOT), "<root>"))


def flat_models(value: object) -> object:
    """``value`` with every ``model`` config's ``placement:`` node read as the flat keys it
    replaced (``placement_config.flat_model``, as the hashes read it): the snapshot predates it."""
    from specdec.models.placement_config import flat_model

    if isinstance(value, dict):
        return {
            k: flat_model(flat_models(v)) if k == "model" else flat_models(v)
            for k, v in value.items()
        }
    return value


def _default(target: str, key: str) -> object:
    """The default of ``key`` for ``target``: its parameter's, or the ``placement:`` node's for a
    placement key of a loader that takes ``placement``."""
    from specdec.models.placement_config import DEFAULTS

    params = inspect.signature(get_object(target)).parameters
    if key not in params and "placement" in params and key in DEFAULTS:
        return DEFAULTS[key]
    param = params.get(key)
    return inspect.Parameter.empty if param is None else param.default


def _plain(value: object) -> object:
    return list(value) if isinstance(value, tuple) else value


def differences(new: object, old: object, where: str = "") -> list[str]:
    """Where ``new`` differs from ``old``, a key ``new`` adds with its ``_target_``'s default
    excepted."""
    if isinstance(new, dict) and isinstance(old, dict):
        out = []
        for key in sorted(set(new) | set(old)):
            here = f"{where}.{key}" if where else str(key)
            if key not in new:
                out.append(f"{here}: dropped (was {old[key]!r})")
            elif key not in old:
                target = new.get("_target_")
                if target is None or _plain(_default(target, key)) != _plain(new[key]):
                    out.append(f"{here}: added {new[key]!r}")
            else:
                out += differences(new[key], old[key], here)
        return out
    return [] if new == old else [f"{where}: {old!r} -> {new!r}"]


@pytest.mark.parametrize("experiment", sorted(BEFORE))
def test_a_preset_experiment_resolves_as_before(compose, monkeypatch, experiment):
    monkeypatch.delenv("SPECDEC_SHARED_DATA", raising=False)
    old = {k: v for k, v in BEFORE[experiment].items() if k in KEYS}
    old["trainer"].pop("default_root_dir")
    assert differences(resolved(compose, experiment), old) == []


def test_the_rule_flags_a_changed_value_and_a_non_default_key():
    old = {"learner": {"_target_": "specdec.learners.eagle3.module.Eagle3Learner", "lr": 1.0}}
    new = {
        "learner": {
            "_target_": "specdec.learners.eagle3.module.Eagle3Learner",
            "lr": 2.0,
            "step_weight": 0.8,
            "soft_weight": 0.9,
        }
    }
    assert differences(new, old) == ["learner.lr: 1.0 -> 2.0", "learner.soft_weight: added 0.9"]
