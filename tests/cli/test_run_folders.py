"""The eval's run folder is one folder per command: a path or hub id in an override's value
(``model.target=/models/x``, ``drafter.path=/tmp/h``) names one folder, not a tree of them, and a
name without ``/`` stays as it was, so existing runs resume in place."""

from __future__ import annotations

from pathlib import Path

from hydra.core.hydra_config import HydraConfig

from specdec.bench.run.paired import baseline_dir
from specdec.bench.rundir import register_run_name, run_folder_name


def test_names_without_a_slash_are_unchanged():
    for name in (
        "",
        "drafter.policy.gamma=1",
        "max_new_tokens=4,sampling.temperature=0.7",
        "drafter.branching=[2,3]",
    ):
        assert run_folder_name(name) == name


def test_paths_and_hub_ids_become_one_folder_name():
    assert run_folder_name("model.target=/models/my-target") == "model.target=models--my-target"
    assert (
        run_folder_name("model.draft=Qwen/Qwen2.5-0.5B,model.target=/a/b")
        == "model.draft=Qwen--Qwen2.5-0.5B,model.target=a--b"
    )
    long = run_folder_name("model.target=/" + "x" * 400)
    assert "/" not in long and len(long) == 200
    assert long != run_folder_name("model.target=/" + "x" * 399)  # the digest tells them apart


def test_the_eval_run_folder_of_an_absolute_target_is_one_level(compose, tmp_path):
    register_run_name()
    target = tmp_path / "models" / "my-target"
    cfg = compose("eval", ["model=hf", f"model.target={target}", "method=ar"])  # logs: tmp_path
    HydraConfig.instance().set_config(cfg)
    try:
        run_dir = Path(cfg.hydra.run.dir)
    finally:
        HydraConfig.instance().cfg = None
    assert run_dir.parent == tmp_path / "eval" / "hf" / "tiny" / "ar"
    assert run_dir.name == "model.target=" + str(target).lstrip("/").replace("/", "--")
    # the sweep's paired ar folder is looked up under the same name
    sps = run_dir.parent.parent / "sps" / run_dir.name
    assert baseline_dir(sps, "sps", [f"model.target={target}"], [], "ar") == run_dir
