"""Every dataset, benchmark and W&B sweep composes into a valid eval config with the tiny pair."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from specdec.bench.records import config_hash
from specdec.paths import CONF_DIR
from specdec.testing.paths import REPO

SWEEPS = sorted((REPO / "scripts" / "sweeps").glob("*.yaml"))
DATASETS = sorted(p.stem for p in (CONF_DIR / "dataset").glob("*.yaml"))
BENCHMARKS = sorted(p.stem for p in (CONF_DIR / "benchmark").glob("*.yaml"))
REAL = ["alpaca", "cnndm", "gsm8k", "humaneval", "mt_bench", "specbench"]
DATASET_KEYS = {
    "name",
    "split",
    "path",
    "chat_template",
    "template",
    "max_new_tokens",
    "limit",
    "quality",
    "source",
}  # source: the registry node (specdec.data.registry)


def test_every_issue_dataset_and_benchmark_exists():
    assert set(REAL) | {"tiny"} <= set(DATASETS)
    assert {"all", "all5", "tiny"} | set(REAL) <= set(BENCHMARKS)


@pytest.mark.parametrize("dataset", DATASETS)
def test_dataset_composes_as_a_one_dataset_benchmark(compose, dataset, monkeypatch):
    monkeypatch.setenv("SPECDEC_DATA_DIR", "/data-dir-under-test")
    cfg = compose("eval", ["model=tiny", f"benchmark={dataset}"])
    ds = cfg.benchmark.datasets[dataset]
    assert set(ds) == DATASET_KEYS
    assert ds.name == dataset and "{turn}" in ds.template and ds.max_new_tokens > 0
    if dataset != "tiny":  # real sets live in the configurable data dir
        assert ds.path == f"/data-dir-under-test/{dataset}/{ds.split}.jsonl"
    else:
        assert Path(ds.path).exists()


@pytest.mark.parametrize("benchmark", BENCHMARKS)
def test_benchmark_composes(compose, benchmark):
    cfg = compose("eval", ["model=tiny", f"benchmark={benchmark}"])
    names = list(cfg.benchmark.datasets)
    assert names and all(cfg.benchmark.datasets[n].name == n for n in names)
    OmegaConf.to_container(cfg.benchmark, resolve=True)  # every interpolation resolves


def test_benchmark_all_holds_the_five_sets_and_specbench(compose):
    cfg = compose("eval", ["model=tiny", "benchmark=all"])
    assert sorted(cfg.benchmark.datasets) == REAL


def test_a_dataset_can_be_dropped_from_the_cli(compose):
    cfg = compose(
        "eval", ["benchmark=all", "~benchmark.datasets.cnndm", "benchmark.datasets.gsm8k.limit=3"]
    )
    assert "cnndm" not in cfg.benchmark.datasets and cfg.benchmark.datasets.gsm8k.limit == 3


def test_eval_defaults_and_logger_schema(compose):
    from hydra.utils import get_object
    from lightning.pytorch.loggers import Logger

    from specdec.bench.run.loggers import EvalLogger

    cfg = compose("eval", [])
    assert cfg.cost_model is True and cfg.resume is True and cfg.quality is False
    names = sorted(p.stem for p in (CONF_DIR / "logger").glob("*.yaml"))
    assert names == ["csv", "none", "wandb"]
    for name in names:  # one node per entry point: an eval logger, a Lightning logger or null
        node = compose("eval", [f"logger={name}"]).logger
        assert issubclass(get_object(node.eval._target_), EvalLogger), name
        assert (node.train is None) == (name == "none"), name
        assert node.train is None or issubclass(get_object(node.train._target_), Logger), name


def _resolved(cfg) -> dict:
    return {
        k: OmegaConf.to_container(v, resolve=True) if OmegaConf.is_config(v) else v
        for k, v in cfg.items()
        if k != "hydra"
    }


def test_config_hash_ignores_selection_keys_but_not_generation_keys(compose):
    base = config_hash(_resolved(compose("eval", [])))
    for same in (
        "limit=2",
        "warmup=0",
        "resume=false",
        "logger=csv",
        "progress=false",
        "benchmark.datasets.tiny.limit=1",
        "on_bad_record=skip",
    ):
        assert config_hash(_resolved(compose("eval", [same]))) == base, same
    for other in (
        "seed=1",
        "sampling.temperature=1.0",
        "max_new_tokens=3",
        "method=ar",
        "drafter.policy.gamma=2",
        "cost_model=false",
        "threads=1",
        "quality=true",
        "benchmark.datasets.tiny.template='Q: {turn}'",
        "benchmark.datasets.tiny.path=/moved/tiny_prompts.jsonl",
    ):
        assert config_hash(_resolved(compose("eval", [other]))) != base, other


def _sweep_runs(path: Path) -> list[list[str]]:
    """Every override list a grid over the sweep's parameters would pass to the command."""
    sweep = yaml.safe_load(path.read_text())
    command = sweep["command"]
    assert "${args_no_hyphens}" in command, "W&B must pass key=value overrides to Hydra"
    i = command.index("-m")
    assert command[i + 1] == "specdec.eval"
    fixed = [c for c in command[i + 2 :] if not c.startswith("${")]
    runs = [fixed]
    for key, spec in sweep["parameters"].items():
        values = spec["values"] if "values" in spec else [spec["value"]]
        runs = [r + [f"{key}={v}"] for r in runs for v in values]
    return runs


@pytest.mark.parametrize("sweep", SWEEPS, ids=[p.stem for p in SWEEPS])
def test_sweep_composes(compose, sweep):
    sweep_cfg = yaml.safe_load(sweep.read_text())
    assert sweep_cfg["metric"]["name"].startswith("eval/")
    for overrides in _sweep_runs(sweep):
        cfg = compose("eval", overrides)
        for item in overrides:
            key, value = item.split("=", 1)
            if key not in {"method", "model", "benchmark", "logger"}:
                assert str(OmegaConf.select(cfg, key)) == value, item


def test_there_is_a_gamma_sweep():
    assert any(
        "drafter.policy.gamma" in yaml.safe_load(p.read_text())["parameters"] for p in SWEEPS
    )
