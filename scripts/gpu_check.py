"""The checks ``scripts/gpu_check.sh`` runs on a GPU machine, one subcommand each.

``greedy``: every method preset in ``conf/method/`` on the tiny random pair must emit exactly the
tokens ``ar`` emits at temperature 0 (Leviathan et al. 2023, Theorem 1: a lossless verifier's
greedy output is the target's greedy decoding), here on ``--device`` (``cuda``) in float64 so no
rounding tie can flip an argmax (``specdec.bench.report.greedy``).

``weights``: exit 0 when a paper pair's target and draft are both in the local Hugging Face cache
(``huggingface_hub.try_to_load_from_cache``; nothing is downloaded), else 1 naming what is missing.

``timing``: the cost model's sanity on a run folder (a ``summary.json`` of an eval with
``cost_model=true``): the fitted cost table never makes a bigger forward cheaper (monotone), and the
modeled time (the forwards priced by the table) over the wall time lies in
``[--min-ratio, --max-ratio]``. On CUDA each forward is timed between syncs of every device
(``specdec.lm.CachedLM(synchronize=True)``), so the forwards cannot add up to more than the run
(ratio <= 1, plus noise); the gap below 1 is the Python loop and verification, large for the
launch-bound tiny pair (hence its low default floor), small for a 14B target (use 0.5 there).
Forwards timed without syncs would measure kernel launches only and drive the ratio far down.
Every priced forward must also cost more than nothing.

Run ``python scripts/gpu_check.py <subcommand> --help``; every subcommand exits 1 on failure.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from specdec.paths import CONF_DIR

PROMPTS = ["The quick brown fox", "def fibonacci(n):", "Speculative decoding on a GPU"]


def compose(overrides: list[str]):
    """The eval config composed with ``overrides`` (as ``python -m specdec.eval`` would)."""
    from specdec.config import compose_config

    return compose_config("eval", overrides)


def first_difference(want: list[int], got: list[int]) -> int | None:
    """Index of the first token where ``got`` leaves ``want`` (``None``: identical)."""
    for i, (a, b) in enumerate(zip(want, got)):
        if a != b:
            return i
    return None if len(want) == len(got) else min(len(want), len(got))


def greedy(args: argparse.Namespace) -> int:
    """Greedy identity of every method preset with ``ar`` on the tiny pair on ``args.device``."""
    from hydra.utils import instantiate

    from specdec.bench.run.method import build_method
    from specdec.engine import generate
    from specdec.sampling import TorchCoins

    base = [
        "model=tiny",
        "benchmark=tiny",
        f"device={args.device}",
        "model.placement.dtype=float64",
        "sampling.temperature=0",
    ]
    pair = instantiate(compose([*base, "method=ar"]).model)
    methods = args.methods or sorted(p.stem for p in (CONF_DIR / "method").glob("*.yaml"))

    def tokens(method: str) -> dict[str, list[int]]:
        m = build_method(compose([*base, f"method={method}"]), pair)
        return {
            p: generate(
                pair.tokenizer.encode(p),
                m.target,
                m.drafter,
                m.verifier,
                sampling=m.sampling,
                coins=TorchCoins(0),
                max_new_tokens=args.max_new_tokens,
            ).tokens
            for p in PROMPTS
        }

    want = tokens("ar")
    failed = []
    print(
        f"greedy identity with ar on the tiny pair, device={args.device}, float64, "
        f"{len(PROMPTS)} prompts x {args.max_new_tokens} tokens"
    )
    for method in methods:
        try:
            got = tokens(method)
            diffs = [first_difference(want[p], got[p]) for p in PROMPTS]
        except Exception as err:  # report every method, then fail
            print(f"  {method:16s} ERROR {type(err).__name__}: {err}")
            failed.append(method)
            continue
        bad = [(p, d) for p, d in zip(PROMPTS, diffs) if d is not None]
        print(
            f"  {method:16s} "
            + (
                "ok"
                if not bad
                else "MISMATCH " + "; ".join(f"{p!r} from token {d}" for p, d in bad)
            )
        )
        failed += [method] if bad else []
    print("greedy: " + ("all identical" if not failed else f"FAILED: {', '.join(failed)}"))
    return 1 if failed else 0


def weights(args: argparse.Namespace) -> int:
    """Exit 0 when the pair's target and draft are in the local Hugging Face cache."""
    from huggingface_hub import try_to_load_from_cache

    cfg = compose([f"model={args.pair}", "benchmark=tiny", "method=ar"]).model
    missing = []
    for role in ("target", "draft"):
        name = cfg.get(role)
        if name is None or Path(str(name)).is_dir():
            continue
        if not isinstance(try_to_load_from_cache(str(name), "config.json"), str):
            missing.append(f"{role} {name}")
    if missing:
        print(
            f"weights of {args.pair} not in the local cache: {', '.join(missing)} "
            "(download them first, e.g. `huggingface-cli download <id>`)"
        )
        return 1
    print(f"weights of {args.pair}: target and draft are in the local cache")
    return 0


def timing_problems(
    summary: dict, min_ratio: float, max_ratio: float = 1.1, *, monotone: bool = True
) -> list[str]:
    """Why a run's cost model fails the sanity check (empty: it passes); ``monotone=False``
    leaves a table whose bigger forwards are cheaper unflagged (a launch-bound tiny pair's
    forwards all cost about the same, so noise alone can make one 10 % cheaper)."""
    problems = []
    if not summary.get("cost_model"):
        problems.append("the run has no cost model (run the eval with cost_model=true)")
        return problems
    if monotone and summary.get("cost_table_monotone") is False:
        problems.append(
            "the fitted cost table makes a bigger forward cheaper: "
            f"{summary.get('cost_fit', {}).get('monotone_violations')}"
        )
    table = (summary.get("cost_table") or {}).get("times", {})
    free = {role: [n for n, t in sizes.items() if t <= 0] for role, sizes in table.items()}
    if any(free.values()):
        problems.append(f"the fitted cost table prices forwards at <= 0 s: {free}")
    overall = summary.get("overall", {})
    wall, modeled = overall.get("wall_s"), overall.get("modeled_s")
    if not wall or not modeled:
        problems.append(
            f"no wall_s / modeled_s in the summary (wall_s={wall}, modeled_s={modeled})"
        )
    elif not min_ratio <= modeled / wall <= max_ratio:
        problems.append(
            f"modeled time {modeled:.3f} s is {modeled / wall:.2f}x the wall time "
            f"{wall:.3f} s, outside [{min_ratio}, {max_ratio}]: above, forwards "
            "outlast the run (a clock or pricing bug); below, forwards timed without "
            "device syncs or a loop overhead outside the forwards"
        )
    return problems


def timing(args: argparse.Namespace) -> int:
    """The cost model's sanity on a run folder's ``summary.json``."""
    path = Path(args.run_dir) / "summary.json"
    summary = json.loads(path.read_text())
    overall = summary.get("overall", {})
    print(
        f"timing: {path}: wall {overall.get('wall_s')} s, modeled {overall.get('modeled_s')} s,"
        f" devices {summary.get('machine', {}).get('device')}, "
        f"cost table {summary.get('cost_table')}"
    )
    problems = timing_problems(
        summary, args.min_ratio, args.max_ratio, monotone=not args.allow_nonmonotone
    )
    if args.allow_nonmonotone and summary.get("cost_table_monotone") is False:
        sizes = summary.get("cost_fit", {}).get("monotone_violations")
        print(f"  note: non-monotone sizes {sizes}")
    for p in problems:
        print(f"  FAILED: {p}")
    print("timing: " + ("ok" if not problems else "FAILED"))
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("greedy", help="greedy identity of every method preset with ar")
    p.add_argument("--device", default="cuda")
    p.add_argument("--methods", nargs="*", help="presets (default: every conf/method/*.yaml)")
    p.add_argument("--max-new-tokens", type=int, default=24)
    p.set_defaults(run=greedy)
    p = sub.add_parser("weights", help="exit 0 when a pair's weights are cached locally")
    p.add_argument("--pair", default="qwen25_05b_14b")
    p.set_defaults(run=weights)
    p = sub.add_parser("timing", help="cost-model sanity of an eval run folder")
    p.add_argument("run_dir")
    p.add_argument("--min-ratio", type=float, default=0.2)
    p.add_argument("--max-ratio", type=float, default=1.1)
    p.add_argument(
        "--allow-nonmonotone",
        action="store_true",
        help="do not fail on a cost table whose bigger forwards are cheaper",
    )
    p.set_defaults(run=timing)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
