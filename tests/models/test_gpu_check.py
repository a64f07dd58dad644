"""``scripts/gpu_check.sh`` / ``scripts/gpu_check.py``, the parts a CPU can run:
the shell script refuses a machine without CUDA, the greedy check passes (and reports a mismatch)
on CPU, the weights probe reads only the local cache, and the timing sanity flags bad tables."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest
import torch

from specdec.testing.paths import REPO

ROOT = REPO
spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "scripts" / "gpu_check.py")
gpu_check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu_check)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal needs a machine without CUDA")
def test_the_shell_script_fails_clearly_without_cuda(tmp_path):
    out = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu_check.sh")],
        capture_output=True,
        text=True,
        env={"PY": sys.executable, "PATH": "/usr/bin:/bin", "OUT": str(tmp_path / "out")},
        timeout=120,
    )
    assert out.returncode == 1
    assert "CUDA is not available here" in out.stderr and "GPU machine" in out.stderr
    assert not (tmp_path / "out").exists()  # nothing ran


def test_greedy_check_passes_on_cpu_and_reports_a_mismatch(capsys, monkeypatch):
    argv = ["greedy", "--device", "cpu", "--methods", "sps", "rrs_tree", "--max-new-tokens", "8"]
    assert gpu_check.main(argv) == 0
    assert "sps              ok" in capsys.readouterr().out
    from specdec import engine

    real = engine.generate

    def off_by_one(prompt, target, drafter, *args, **kwargs):
        out = real(prompt, target, drafter, *args, **kwargs)
        if drafter.models:  # every method but ar
            out.tokens[3] = (out.tokens[3] + 1) % 259
        return out

    monkeypatch.setattr(engine, "generate", off_by_one)
    assert gpu_check.main(["greedy", "--device", "cpu", "--methods", "sps"]) == 1
    text = capsys.readouterr().out
    assert "sps              MISMATCH 'The quick brown fox' from token 3" in text
    assert "greedy: FAILED: sps" in text


def test_first_difference():
    assert gpu_check.first_difference([1, 2, 3], [1, 2, 3]) is None
    assert gpu_check.first_difference([1, 2, 3], [1, 5, 3]) == 1
    assert gpu_check.first_difference([1, 2, 3], [1, 2]) == 2


def test_weights_probe_reads_only_the_local_cache(monkeypatch, capsys):
    import huggingface_hub

    cached = {"Qwen/Qwen2.5-0.5B-Instruct"}
    monkeypatch.setattr(
        huggingface_hub,
        "try_to_load_from_cache",
        lambda repo, name: f"/cache/{repo}/{name}" if repo in cached else None,
    )
    assert gpu_check.main(["weights", "--pair", "qwen25_05b_14b"]) == 1
    assert "not in the local cache: target Qwen/Qwen2.5-14B-Instruct" in capsys.readouterr().out
    cached.add("Qwen/Qwen2.5-14B-Instruct")
    assert gpu_check.main(["weights", "--pair", "qwen25_05b_14b"]) == 0


def _summary(wall: float, modeled: float, monotone: bool = True, t1: float = 0.01) -> dict:
    return {
        "cost_model": True,
        "cost_table_monotone": monotone,
        "cost_fit": {"monotone_violations": {"target": [] if monotone else [8]}},
        "cost_table": {"times": {"target": {"1": t1, "8": 0.012}, "draft": {"1": 0.002}}},
        "overall": {"wall_s": wall, "modeled_s": modeled},
    }


def test_timing_sanity_flags_what_a_cuda_run_must_not_show():
    problems = gpu_check.timing_problems
    assert problems(_summary(10.0, 8.0), 0.5) == []
    assert "outside [0.5, 1.1]" in problems(_summary(10.0, 2.0), 0.5)[0]  # unsynced forwards
    assert "outside [0.5, 1.1]" in problems(_summary(10.0, 12.0), 0.5)[0]  # longer than the run
    assert "bigger forward cheaper" in problems(_summary(10.0, 8.0, monotone=False), 0.5)[0]
    assert problems(_summary(10.0, 8.0, monotone=False), 0.5, monotone=False) == []
    assert "<= 0 s: {'target': ['1']" in problems(_summary(10.0, 8.0, t1=-0.01), 0.5)[0]
    assert "no cost model" in problems({"cost_model": False}, 0.5)[0]


graphs_spec = importlib.util.spec_from_file_location(
    "gpu_graphs", ROOT / "scripts" / "gpu_graphs.py"
)
gpu_graphs = importlib.util.module_from_spec(graphs_spec)
graphs_spec.loader.exec_module(gpu_graphs)


def test_graphs_check_runs_on_cpu_and_fails_on_a_replayed_mismatch(capsys, monkeypatch):
    """Step 4 on the CPU's fixed-address path: identical tokens pass, a changed one fails."""
    argv = ["graphs", "--device", "cpu", "--max-new-tokens", "4"]
    assert gpu_graphs.main(argv) == 0
    text = capsys.readouterr().out
    assert "graphs vs static eager: 1.000 identical tokens" in text and "graph_replays" in text
    tokens = {p: [5, 6, 7] for p in gpu_check.PROMPTS}

    def flip_replayed(overrides, max_new_tokens, profile=0):  # the replayed path's 2nd token
        if "model.cuda_graphs=true" not in overrides:
            return tokens, 1.0, {}
        return {p: [5, 9, 7] for p in tokens}, 1.0, {"graph_replays": 3}

    monkeypatch.setattr(gpu_graphs, "run_ar", flip_replayed)
    assert gpu_graphs.main(argv) == 1
    text = capsys.readouterr().out
    assert "0.667 identical tokens (first differences [1, 1, 1])" in text
    assert "graphs: FAILED" in text


def test_graphs_profile_prints_the_costliest_ops_of_the_replayed_path(capsys):
    """``--profile N``: one more replayed generation under ``torch.profiler``, its table printed
    (CPU time here; CUDA kernels on a GPU), the check's verdict unchanged."""
    argv = ["graphs", "--device", "cpu", "--max-new-tokens", "3", "--profile", "4"]
    assert gpu_graphs.main(argv) == 0
    text = capsys.readouterr().out
    assert "Self CPU time total" in text and "graphs: ok" in text


def test_dtype_agreement_is_reported_not_asserted(capsys):
    assert gpu_graphs.main(["dtypes", "--device", "cpu", "--max-new-tokens", "4"]) == 0
    text = capsys.readouterr().out
    assert "bfloat16 vs float32" in text and "identical tokens" in text
    same, firsts = gpu_graphs.agreement({"a": [1, 2, 3]}, {"a": [1, 5, 3]})
    assert (same, firsts) == (2 / 3, [1])


@pytest.mark.slow  # several python processes: about a minute on an idle machine
def test_the_dry_run_runs_every_step_on_the_cpu(tmp_path):
    env = {
        "PY": sys.executable,
        "PATH": "/usr/bin:/bin",
        "OUT": str(tmp_path / "out"),
        "DEVICE": "cpu",
        "GREEDY_METHODS": "sps",
        "MAX_NEW": "4",
        "HOME": str(tmp_path),
    }
    out = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu_check.sh")],
        capture_output=True,
        text=True,
        env=env,
        timeout=1200,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    for name in ("greedy", "timing_tiny", "graphs_tiny", "dtypes"):
        assert (tmp_path / "out" / f"{name}.txt").stat().st_size > 0, name
    assert "graphs: ok" in (tmp_path / "out" / "graphs_tiny.txt").read_text()
    assert "gpu_check: all checks passed" in out.stdout
