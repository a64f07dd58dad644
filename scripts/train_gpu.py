"""The stages of ``scripts/train_gpu.sh`` in one Python process (one start-up, not one per stage).

Each stage is the ``python -m specdec.train`` command it names (composed with the same overrides,
in the same run folder ``<log_dir>/train/<task>/<hash>``, so a rerun here or on the command line
resumes it): ``data`` (traces only, ``data_gen.features=none``), ``eagle3`` and ``specblock``
(online features, ``+trainer.max_time``, sharded export into ``$OUT``), then ``sweep``
(``scripts/tree_sweep.py``). Settings come from the environment (the shell script's header lists
them). It prints and writes (``WORK/rates.json``) tokens/s of data generation (continuation
tokens per wall second of the stage) and of training (steps x batch x mean trace length per
second of Lightning's training timer).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]
DEFAULTS = {
    "MODEL": "smollm2",
    "DEVICE": "cuda",
    "STAGES": "data,eagle3,specblock,sweep",
    "PROMPTS": "6000",
    "GEN_BATCH": "256",
    "MAX_NEW": "128",
    "GEN_MINUTES": "3",
    "E3_MINUTES": "3",
    "SB_MINUTES": "3",
    "E3_STEPS": "4000",
    "SB_STEPS": "2000",
    "E3_BATCH": "64",
    "SB_BATCH": "16",
    "VAL_EVERY": "250",
    "SHARD_MIB": "15",
    "SWEEP_PROMPTS": "16",
    "SWEEP_NEW": "128",
    "SWEEP": "4:16 8:32 8:64 10:96",
    "SB_SWEEP": "8 16 32",
    "SWEEP_ALSO": "pld",
    "MAX_FILES": "8",
    "SELF_INSTRUCT": "1100",
    "CODE_PROMPTS": "576",
    "E3_INIT": "shipped",
}
MAX_LEN = {"tiny": (64, 64), "smollm2": (320, 256)}  # (EAGLE-3, SpecBlock) datamodule.max_len


def env(name: str) -> str:
    return os.environ.get(name) or DEFAULTS[name]


def extra_sources() -> list[str]:
    """``SELF_INSTRUCT`` / ``CODE_PROMPTS``: how many self-instructed and code-completion prompts
    the data stage adds (``conf/data_gen/smollm2_features.yaml``'s blocks; 0 leaves one out)."""
    out = []
    for key, node in (("SELF_INSTRUCT", "self_instruct"), ("CODE_PROMPTS", "code_completion")):
        count = int(env(key))
        out.append(f"data_gen.{node}.count={count}" if count else f"data_gen.{node}=null")
    return out


def warm_start(model: str) -> list[str]:
    """``E3_INIT``: the EAGLE-3 fit starts from a drafter folder (``shipped``: the model's shipped
    asset when present -- carry ``specdec/assets/eagle3/<model>`` in a call -- with its head moved
    onto the new traces' token map; ``none``: from the target's layers)."""
    init = env("E3_INIT")
    if init == "shipped":
        asset = ROOT / "specdec" / "assets" / "eagle3" / model
        init = str(asset) if (asset / "config.json").is_file() else "none"
    if init == "none":
        return []
    say(f"eagle3: warm start from {init}")
    return [f"learner.init_from={init}", "learner.remap_vocab=true"]


def swept(kind: str, out: Path, model: str) -> Path | None:
    """The drafter the sweep measures: this run's export (``OUT/<kind>``) when its stage ran, else
    the shipped asset (``specdec/assets/<kind>/<model>``, when carried), else none (no rows)."""
    for folder in (out / kind, ROOT / "specdec" / "assets" / kind / model):
        if (folder / "config.json").is_file():
            say(f"sweep: {kind} from {folder}")
            return folder
    say(f"sweep: no {kind} drafter ({out / kind} nor the shipped asset): its rows are left out")
    return None


def say(text: str) -> None:
    print(f"train_gpu: {text}", flush=True)


def run_train(overrides: list[str]) -> dict:
    """``python -m specdec.train <overrides>`` in this process, in the command's run folder."""
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    from specdec.config import compose_config
    from specdec.train import train

    cfg = compose_config("train", overrides)
    with open_dict(cfg):
        cfg.paths.output_dir = str(cfg.hydra.run.dir)
    HydraConfig.instance().set_config(cfg)
    try:
        return train(cfg)
    finally:
        HydraConfig.instance().cfg = None


def trace_stats(folder: Path, max_len: int) -> dict:
    """Traces, continuation tokens and mean training length (cut at ``max_len``) of ``folder``."""
    from specdec.data.traces import traces_of_file

    n = cont = seen = 0
    for path in sorted(folder.glob("traces*.safetensors")):
        for tr in traces_of_file(path):
            n, cont = n + 1, cont + int(tr.ids.numel()) - tr.prompt_len
            seen += min(int(tr.ids.numel()), max_len)
    return {"traces": n, "tokens": cont, "mean_len": seen / max(n, 1)}


def run_stats(root: Path) -> tuple[int, float]:
    """(global step, training seconds of Lightning's Timer) of the newest ``last.ckpt``."""
    import torch

    best = (0, 0.0)
    for path in root.glob("**/checkpoints/last.ckpt"):
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
        timer = [v for k, v in ckpt.get("callbacks", {}).items() if "Timer" in str(k)]
        train_s = float(timer[0].get("time_elapsed", {}).get("train", 0.0)) if timer else 0.0
        best = max(best, (int(ckpt.get("global_step", 0)), train_s))
    return best


def hms(minutes: float) -> str:
    s = int(round(minutes * 60))
    return f"00:{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="[%(name)s] %(message)s")
    model, device, stages = env("MODEL"), env("DEVICE"), env("STAGES").split(",")
    work = Path(os.environ.get("WORK") or f"outputs/train_gpu/{model}").resolve()
    out = Path(os.environ.get("OUT") or work / "out").resolve()
    data = Path(os.environ.get("TRAIN_DATA") or work / "train_data").resolve()
    traces, runs = work / "traces", work / "runs"
    out.mkdir(parents=True, exist_ok=True)
    e3_len, sb_len = MAX_LEN.get(model, (320, 256))
    if model == "tiny":  # eagle3_tiny's synthetic prompts replaced by the training prompts
        data_args = [
            "~data_gen.synthetic",
            f"++data_gen.source_dir={data}",
            "++data_gen.vocab_map_size=96",
        ]
    else:  # the recipe's breadth: prompts the target writes itself, raw code completions
        data_args = [f"train_data_dir={data}", *extra_sources()]
    common = [
        f"+device={device}",
        f"paths.log_dir={runs}",
        "++data_gen.features=none",
        "++datamodule.features=online",
        f"trainer={'cpu' if device == 'cpu' else 'gpu'}",
        *data_args,
    ]
    rates: dict = {"model": model, "device": device}
    if "data" in stages:
        before = trace_stats(traces, e3_len)["tokens"]
        start = time.perf_counter()
        run_train(
            [
                f"+experiment=eagle3_{model}",
                "stage=data",
                f"eagle3.traces_dir={traces}",
                *common,
                f"++data_gen.limit={env('PROMPTS')}",
                f"++data_gen.batch_size={env('GEN_BATCH')}",
                f"++data_gen.max_new={env('MAX_NEW')}",
                f"++data_gen.max_minutes={env('GEN_MINUTES')}",
            ]
        )
        wall, after = time.perf_counter() - start, trace_stats(traces, e3_len)
        rates["data_tokens_per_s"] = round((after["tokens"] - before) / wall, 1)
        say(
            f"data: {after['traces']} traces, {after['tokens'] - before} new tokens in "
            f"{wall:.1f} s: {rates['data_tokens_per_s']} tokens/s"
        )
    for kind, minutes, steps, batch, max_len, extra in (
        ("eagle3", "E3_MINUTES", "E3_STEPS", "E3_BATCH", e3_len, warm_start(model)),
        (
            "specblock",
            "SB_MINUTES",
            "SB_STEPS",
            "SB_BATCH",
            sb_len,
            [f"learner.init_eagle3={out / 'eagle3'}"],
        ),
    ):
        if kind not in stages:
            continue
        root, n_steps = runs / "train" / f"{kind}_{model}", int(env(steps))
        step0, time0 = run_stats(root)
        run_train(
            [
                f"+experiment={kind}_{model}",
                f"{kind}.traces_dir={traces}",
                *common,
                f"++trainer.max_time={hms(float(env(minutes)))}",
                f"trainer.max_steps={n_steps}",
                f"trainer.val_check_interval={min(int(env('VAL_EVERY')), n_steps)}",
                f"datamodule.batch_size={env(batch)}",
                f"datamodule.max_len={max_len}",
                f"export.folder={out / kind}",
                "export.force=true",
                f"++export.max_shard_mib={env('SHARD_MIB')}",
                *extra,
            ]
        )
        step1, time1 = run_stats(root)
        seen = (step1 - step0) * int(env(batch)) * trace_stats(traces, max_len)["mean_len"]
        rates[f"{kind}_tokens_per_s"] = round(seen / max(time1 - time0, 1e-9), 1)
        say(
            f"{kind}: {step1 - step0} steps (to {step1}), ~{seen:.0f} tokens seen (steps x "
            f"batch x mean trace length) in {time1 - time0:.1f} s of training: "
            f"{rates[kind + '_tokens_per_s']} tokens/s"
        )
    (work / "rates.json").write_text(json.dumps(rates))
    say(f"rates {json.dumps(rates)}")
    if "sweep" in stages:
        from tree_sweep import parser, tree_sweep

        e3, sb = swept("eagle3", out, model), swept("specblock", out, model)
        tree_sweep(
            parser().parse_args(
                [
                    "--model",
                    model,
                    "--device",
                    device,
                    "--source",
                    str(data),
                    "--skip",
                    env("PROMPTS"),
                    "--prompts",
                    env("SWEEP_PROMPTS"),
                    "--max-new",
                    env("SWEEP_NEW"),
                    "--e3",
                    str(e3),
                    "--sb",
                    str(sb),
                    "--grid",
                    env("SWEEP") if e3 else "",
                    "--sb-grid",
                    env("SB_SWEEP") if sb else "",
                    "--also",
                    env("SWEEP_ALSO"),
                    "--out",
                    str(work / "tree_sweep.json"),
                ]
            )
        )
    for name in ("tree_sweep.json", "rates.json"):  # at most MAX_FILES files come back
        if (work / name).is_file():
            if sum(p.is_file() for p in out.rglob("*")) < int(env("MAX_FILES")):
                shutil.copy(work / name, out / name)
            else:  # printed instead: the device tool returns the output's tail
                say(
                    f"{name} stays in {work} ({env('MAX_FILES')} files in {out} already): "
                    f"{json.dumps(json.loads((work / name).read_text()))}"
                )
    say(f"done: {sum(p.is_file() for p in out.rglob('*'))} files in {out}")


if __name__ == "__main__":
    from specdec.errors import exit_on_input_error

    with exit_on_input_error():
        main()
