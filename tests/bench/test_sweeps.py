"""Sweeps: ``specdec.eval``'s main returns the sweep metric (``sweep_objective``: the modeled
speedup paired with the command's ``ar`` run, else the run's own estimate), the W&B sweeps optimise
it, and the Optuna search config (``conf/hparams_search/``) composes.

hydra-optuna-sweeper is an optional extra (``[sweep]``). Where it is missing, composing the search
must fail naming the sweeper; our own overrides are then composed against a stand-in node for
``hydra/sweeper/optuna`` (registered in Hydra's ConfigStore by the test, as the plugin would), which
checks this project's YAML, not the plugin.
"""

from __future__ import annotations

import importlib.util
import json

import pytest
import yaml
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

import specdec.eval as entry
from specdec.paths import CONF_DIR
from specdec.testing.eval_cfg import eval_cfg
from specdec.testing.paths import REPO

ROOT = REPO
SEARCH = CONF_DIR / "hparams_search" / "sps_optuna.yaml"
PLUGIN = "hydra_plugins.hydra_optuna_sweeper"
HAS_OPTUNA_SWEEPER = (
    importlib.util.find_spec("hydra_plugins") is not None
    and importlib.util.find_spec(PLUGIN) is not None
)


def test_main_returns_the_runs_own_estimate_without_an_ar_run(tmp_path):
    cfg = eval_cfg(tmp_path, ["method=sps", "limit=1"])
    value = entry.main.__wrapped__(cfg)  # the function @hydra.main wraps: what a sweeper gets
    overall = json.loads((tmp_path / "summary.json").read_text())["overall"]
    assert isinstance(value, float) and value > 0
    assert value == pytest.approx(overall["ar_modeled_s"] / overall["modeled_s"])
    assert value == overall["sweep_objective"] == overall["self_modeled_speedup"]
    assert "modeled_speedup_vs_ar" not in overall  # not a Hydra job: no ar folder to pair with


def test_metric_choice_none_and_missing_metric(tmp_path):
    tps = entry.evaluate(
        eval_cfg(tmp_path / "a", ["method=ar", "limit=1", "optimized_metric=tokens_per_s"])
    )
    overall = json.loads((tmp_path / "a" / "summary.json").read_text())["overall"]
    assert tps == pytest.approx(overall["tokens_per_s"])
    assert (
        entry.evaluate(eval_cfg(tmp_path / "b", ["method=ar", "limit=1", "cost_model=false"]))
        is None
    )
    with pytest.raises(ValueError, match="optimized_metric='speedupp' is not a run metric"):
        entry.evaluate(eval_cfg(tmp_path / "c", ["method=ar", "optimized_metric=speedupp"]))
    assert not (tmp_path / "c" / "summary.json").exists()  # refused before the run started


def test_wandb_sweeps_optimise_the_sweep_objective():
    for path in sorted((ROOT / "scripts" / "sweeps").glob("*.yaml")):
        sweep = yaml.safe_load(path.read_text())
        assert sweep["metric"] == {"name": "eval/overall/sweep_objective", "goal": "maximize"}, path


def test_eval_composes_without_a_search(compose):
    cfg = compose("eval", [])
    assert cfg.optimized_metric == "sweep_objective"
    assert cfg.hydra.runtime.choices.get("hparams_search") is None
    assert cfg.hydra.sweeper.params.method == "ar,sps,pld,eagle3,specblock"


def test_search_params_parse_as_sweeps_over_existing_keys(compose):
    search = yaml.safe_load(SEARCH.read_text())
    params = search["hydra"]["sweeper"]["params"]
    cfg = compose("eval", ["method=sps"])
    parser = OverridesParser.create()
    for key, value in params.items():
        (override,) = parser.parse_overrides([f"{key}={value}"])
        assert override.is_sweep_override() == (key != "method"), key
        if (CONF_DIR / key).is_dir():  # a config group: its option must exist
            assert (CONF_DIR / key / f"{value}.yaml").exists(), f"{key}={value}"
        else:
            assert OmegaConf.select(cfg, key) is not None, f"{key} is not a key of method=sps"
    assert search["optimized_metric"] == "sweep_objective"
    assert search["hydra"]["sweeper"]["direction"] == "maximize"


@pytest.mark.skipif(HAS_OPTUNA_SWEEPER, reason="the plugin is installed: the next test composes")
def test_search_without_the_plugin_fails_naming_the_sweeper(compose):
    with pytest.raises(Exception, match="hydra/sweeper/optuna"):
        compose("eval", ["hparams_search=sps_optuna"])


@pytest.fixture
def optuna_node():
    """The plugin's ``hydra/sweeper/optuna`` node, or a stand-in when the plugin is missing."""
    if HAS_OPTUNA_SWEEPER:
        yield
        return
    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    store.store(
        group="hydra/sweeper",
        name="optuna",
        provider="test",
        node={
            "_target_": "hydra_plugins.hydra_optuna_sweeper.optuna_sweeper.OptunaSweeper",
            "direction": "minimize",
            "study_name": None,
            "storage": None,
            "n_trials": 20,
            "n_jobs": 2,
            "sampler": {"seed": None},
            "params": None,
        },
    )
    yield
    store.repo["hydra"]["sweeper"].pop("optuna.yaml")


def test_search_overrides_compose_onto_the_sweeper(compose, optuna_node):
    cfg = compose("eval", ["hparams_search=sps_optuna"])
    sweeper = cfg.hydra.sweeper
    assert sweeper._target_.endswith("OptunaSweeper")
    assert sweeper.direction == "maximize" and sweeper.n_trials == 12 and sweeper.n_jobs == 1
    assert sweeper.sampler.seed == 1234
    assert dict(sweeper.params) == {"method": "sps", "drafter.policy.gamma": "range(1, 9)"}
    assert cfg.optimized_metric == "sweep_objective" and str(cfg.hydra.mode) == "RunMode.MULTIRUN"
