"""What the SpecBlock bandit chooses per dataset, and what it gains against each arm run alone.

For each dataset of the benchmark the script decodes the same prompts with the bandit method
(``--method``, default ``specblock_bandit``) and with each of its arms as the only arm (the fixed
arm), a fresh drafter per dataset and variant (so the bandit learns on that dataset's stream).
Time is the bandit's own clock: the measured seconds of each run's decode forwards (no Python
overhead), ``fwd tok/s`` = new tokens / those seconds; wall tok/s is printed beside it. A fitted
cost table (``bench.costfit``) is not used here: the bandit's catch-up forwards after a run of
skips append tens of positions, sizes a short run fits from too few samples and would extrapolate.
Columns: the arm shares of the bandit's steps, τ (new tokens per target forward), forward and
wall tokens/s, and the forward-time speedup over ``skip alone`` (AR with an idle drafter: the
root alone every step) and over the best fixed arm.

Usage:
    python scripts/bench_bandit.py --model tiny --benchmark tiny --override threads=1
    python scripts/bench_bandit.py --limit 8 --max-new 128                  # SmolLM2, default bench
    python scripts/bench_bandit.py --override drafter.path=DIR --override drafter.discount=0.98

SmolLM2 (``--model smollm2``, the default) reads the shipped SpecBlock weights
(``specdec/assets/specblock/smollm2``, ``python -m specdec.train +experiment=specblock_smollm2``);
``--override drafter.path=DIR`` points at another trained folder. ``--method`` takes any preset
whose drafter has ``arms`` (``SpecBlockBanditDrafter``); ``--override`` takes any Hydra override
(``drafter.arms.full.max_blocks=2``, ``sampling...``).
"""

from __future__ import annotations

import argparse
import copy

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, open_dict

from specdec.bench.run.method import build_method, run_prompt
from specdec.config import compose_config
from specdec.data.prompts import load_prompts
from specdec.drafters.bandit_arms import arm_rates


def variants(cfg: DictConfig) -> dict[str, DictConfig]:
    """The bandit config and, per arm, a copy whose only arm is that one."""
    if "arms" not in cfg.drafter:
        raise ValueError(
            f"--method {cfg.method_name} has no drafter.arms; use a bandit preset "
            "such as specblock_bandit"
        )
    out = {"bandit": cfg}
    for name, spec in cfg.drafter.arms.items():
        one = copy.deepcopy(cfg)
        with open_dict(one):
            one.drafter.arms = {name: spec}
        out[f"{name} alone"] = one
    return out


def run_dataset(cfg: DictConfig, pair, name: str, limit: int, max_new: int) -> list:
    """Answers of one variant on one dataset's prompts (a fresh drafter, one warm-up prompt)."""
    ds = cfg.benchmark.datasets[name]
    prompts = load_prompts(ds.path, name, limit, cache_dir=cfg.paths.get("cache_dir"))
    method = build_method(cfg, pair)

    def answer(p):
        return run_prompt(
            p,
            pair,
            method,
            seed=cfg.seed,
            max_new_tokens=max_new,
            chat_template=ds.chat_template,
            template=ds.get("template", "{turn}"),
            truncate="left",
        )

    answer(prompts[0])  # warm-up, not counted (the bandit keeps what it learned)
    return [answer(p) for p in prompts]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--benchmark", default="default")
    ap.add_argument("--method", default="specblock_bandit")
    ap.add_argument("--limit", type=int, default=4, help="prompts per dataset")
    ap.add_argument("--max-new", type=int, default=64)
    ap.add_argument("--override", action="append", default=[], help="extra Hydra overrides")
    args = ap.parse_args()
    cfg = compose_config(
        "eval",
        [
            f"model={args.model}",
            f"benchmark={args.benchmark}",
            f"method={args.method}",
            *args.override,
        ],
    )
    if cfg.get("threads") is not None:  # as the eval does (--override threads=1)
        torch.set_num_threads(int(cfg.threads))
    pair = instantiate(cfg.model)
    runs = {
        (v, name): run_dataset(vcfg, pair, name, args.limit, args.max_new)
        for v, vcfg in variants(cfg).items()
        for name in cfg.benchmark.datasets
    }
    arms = list(cfg.drafter.arms)
    for name in cfg.benchmark.datasets:
        print(f"\n{name} ({args.limit} prompts, <= {args.max_new} new tokens, {args.model})")
        head = "".join(f"{a:>7}" for a in arms)
        print(
            f"{'variant':>14}{head} {'tokens':>7} {'tau':>5} {'fwd tok/s':>10} "
            f"{'wall tok/s':>10} {'vs skip':>7} {'vs best fixed':>13}"
        )
        rows = {}
        for v in variants(cfg):
            answers = runs[(v, name)]
            new = sum(a.stats.new_tokens for a in answers)
            steps = sum(a.stats.target_forwards for a in answers)
            seconds = sum(f.seconds for a in answers for f in a.stats.forwards)
            counters: dict[str, int] = {}
            for a in answers:
                for k, val in a.stats.counters.items():
                    counters[k] = counters.get(k, 0) + val
            rates = arm_rates(counters)
            wall = sum(a.stats.decode_s for a in answers)
            rows[v] = (rates, new, steps, new / seconds, new / wall)
        best = max(r[3] for v, r in rows.items() if v != "bandit")
        skip = rows.get("skip alone", (None, 0, 0, float("nan")))[3]
        for v, (rates, new, steps, mod, wall) in rows.items():
            shares = "".join(f"{rates.get(a, {}).get('share', 0.0):>7.0%}" for a in arms)
            print(
                f"{v:>14}{shares} {new:>7} {new / steps:>5.2f} {mod:>10.1f} {wall:>10.1f} "
                f"{mod / skip:>6.2f}x {mod / best:>12.2f}x"
            )
    print(
        "\nshares: the arm's share of the steps with a choice; vs best fixed: forward-time "
        "tok/s over the best single arm's on that dataset"
    )


if __name__ == "__main__":
    main()
