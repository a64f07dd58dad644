"""The eval keys are declared once (``specdec.bench.eval_keys``); every other list agrees with it.

``eval.yaml`` itself, the unhashed keys of the records' config hash and Hydra's run-folder
``exclude_keys`` (literal YAML: Hydra reads it before any Python runs) are checked against the
schema here; the config hash of the default configs is pinned (a changed hash orphans every
user's existing eval records).
"""

from __future__ import annotations

from dataclasses import fields

import pytest
from omegaconf import OmegaConf

import specdec.bench.run.runner as ev
from specdec.bench import eval_keys
from specdec.bench.eval_keys import GROUPS, DatasetKeys, EvalKeys, SamplingKeys
from specdec.bench.records import UNHASHED_DATASET_KEYS, UNHASHED_KEYS, config_hash
from specdec.testing.eval_cfg import eval_cfg

# the lists as they stood before the schema declared them: hashes and run folders must not move
OLD_UNHASHED = {
    "hydra",
    "paths",
    "logger",
    "limit",
    "per_category",
    "warmup",
    "resume",
    "progress",
    "on_bad_record",
    "confirm_run_unsafe_code",
    "optimized_metric",
    "hparams_search",
    "rank_timeout_s",
}
OLD_EXCLUDED = {
    "model",
    "benchmark",
    "method",
    "limit",
    "warmup",
    "resume",
    "progress",
    "logger",
    "confirm_run_unsafe_code",
    "on_bad_record",
    "optimized_metric",
    "hparams_search",
    "rank_timeout_s",
    "paths.data_dir",
    "paths.log_dir",
    "paths.cache_dir",
}


def test_every_scalar_key_of_eval_yaml_is_a_schema_field_and_back(compose):
    cfg = compose("eval", ["model=tiny", "benchmark=tiny"])
    nodes = {k for k, v in cfg.items() if OmegaConf.is_config(v)}
    scalars = set(cfg) - nodes
    assert scalars | {"sampling"} == {f.name for f in fields(EvalKeys)}
    assert set(cfg.sampling) == {f.name for f in fields(SamplingKeys)}
    assert {f.name for f in fields(DatasetKeys)} <= set(cfg.benchmark.datasets.tiny)
    # every other node is a declared group ("method" and "hparams_search" are _global_ presets)
    assert nodes - {"sampling"} <= set(GROUPS)
    assert set(GROUPS) - nodes == {"method", "hparams_search"}


def test_schema_defaults_match_eval_yaml(compose):
    cfg = compose("eval", ["model=tiny", "benchmark=tiny", "method=sps"])
    for f in fields(EvalKeys):
        if f.name not in ("method_name", "sampling"):  # method_name: ??? until a preset sets it
            assert cfg[f.name] == f.default, f.name
    assert OmegaConf.to_container(cfg.sampling) == {f.name: f.default for f in fields(SamplingKeys)}


def test_hydra_exclude_keys_are_the_schema_run_dir_keys(compose):
    cfg = compose("eval", ["model=tiny", "benchmark=tiny"])
    excluded = list(cfg.hydra.job.config.override_dirname.exclude_keys)
    assert len(excluded) == len(set(excluded)) == len(eval_keys.RUN_DIR_EXCLUDED_KEYS)
    assert set(excluded) == set(eval_keys.RUN_DIR_EXCLUDED_KEYS) == OLD_EXCLUDED


def test_unhashed_keys_derive_from_the_schema():
    assert set(UNHASHED_KEYS) == OLD_UNHASHED and len(UNHASHED_KEYS) == len(OLD_UNHASHED)
    assert UNHASHED_DATASET_KEYS == ("limit", "source")  # source: the registry node (specdec.data)
    unhashed = {f.name for f in fields(EvalKeys) if not f.metadata["hashed"]}
    assert unhashed | {g for g, spec in GROUPS.items() if not spec.hashed} == set(UNHASHED_KEYS)


# Moved on purpose once since the schema landed: the model presets gained `static_cache` and
# `max_cache_len` (specdec/static_cache.py) and the feature drafters' presets lost
# `linear_kernel` (the pair's Placement carries it), so wave-3 records do not resume wave-2 runs.
@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["model=tiny", "benchmark=tiny"], "c5d634529781"),
        (["model=smollm2", "benchmark=default"], "4040b79ed0e5"),
        (
            ["model=tiny", "benchmark=tiny", "method=eagle3", "limit=2", "per_category=1"],
            "1f7fc328eae5",
        ),
    ],
)
def test_config_hash_of_default_configs_is_pinned(compose, monkeypatch, overrides, expected):
    """Pinned before the keys moved into the schema; an intended config change updates these."""
    for var in ("SPECDEC_DATA_DIR", "SPECDEC_CACHE_DIR"):
        monkeypatch.delenv(var, raising=False)
    cfg = compose("eval", [*overrides, "paths.root_dir=/pinned-root"])
    resolved = {
        k: OmegaConf.to_container(v, resolve=True) if OmegaConf.is_config(v) else v
        for k, v in cfg.items()
        if k != "hydra"
    }  # as specdec.bench.run.runner hashes it
    assert config_hash(resolved) == expected


def test_confirm_run_unsafe_code_is_checked_as_a_bool(tmp_path, no_models):  # noqa: F811
    """``confirm_run_unsafe_code=no`` is the string "no", truthy: it used to confirm the sandbox."""
    with pytest.raises(ValueError, match="confirm_run_unsafe_code='no' is not valid: expected"):
        ev.run(eval_cfg(tmp_path, ["quality=true", "confirm_run_unsafe_code=no"]))
