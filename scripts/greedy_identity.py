"""Greedy token identity of every method preset, before and after a change (a refactor must change
no token).

Decodes a few prompts of each default dataset greedily with every preset in ``conf/method/``
through the Python API (``specdec.load``: the eval's composition, the one engine loop) and writes
``{method: {prompt: [token ids]}}`` as JSON. With ``--compare BEFORE.json`` it prints, per preset,
how many prompts decode to the same tokens as in BEFORE and as ``ar`` now (a lossless method's
greedy output is ``ar``'s)::

    git worktree add /tmp/before <rev> && (cd /tmp/before && PYTHONPATH=$PWD \
        python scripts/greedy_identity.py --out /tmp/before.json)
    python scripts/greedy_identity.py --out /tmp/after.json --compare /tmp/before.json

Defaults: ``model=smollm2``, 2 prompts of GSM8K, HumanEval and Alpaca, 48 new tokens. On a GPU
(``--device cuda``, ``--set model.static_cache=true`` for the graph-replayed path) a preset that
raises is recorded (``{"error": ...}`` in the JSON, ``error`` in the table) and the others still
run; ``--compare`` with a CPU run's JSON then also tells where cuda's float32 kernels round to a
different argmax than the CPU's (reported: the pass criterion is identity with ``ar`` on the same
device).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from specdec.paths import CONF_DIR, ROOT

DATASETS = ("gsm8k", "humaneval", "alpaca")


def prompts(per_dataset: int) -> dict[str, str]:
    """The first ``per_dataset`` first turns of each default dataset's shipped prompt file."""
    out: dict[str, str] = {}
    for name in DATASETS:
        lines = (ROOT / "data" / name / "test.jsonl").read_text().splitlines()[:per_dataset]
        for line in lines:
            row = json.loads(line)
            out[f"{name}/{row['id']}"] = row["turns"][0]
    return out


def decode_all(
    model: str,
    methods: list[str],
    texts: dict[str, str],
    max_new: int,
    overrides: dict[str, object] | None = None,
    draft: str | None = None,
) -> dict[str, dict]:
    """Every method's greedy tokens for every prompt (``{"error": text}`` for a preset that
    raised: one broken preset does not hide the others' results)."""
    import specdec

    out: dict[str, dict] = {}
    for method in methods:
        t0 = time.perf_counter()
        try:
            dec = specdec.load(model, draft, method=method, **(overrides or {}))
            out[method] = {
                key: dec.generate(text, max_new_tokens=max_new, temperature=0).tokens
                for key, text in texts.items()
            }
            note = ""
        except Exception as err:  # noqa: BLE001  (recorded per preset, the run goes on)
            out[method] = {"error": f"{type(err).__name__}: {err}"[:400]}
            note = "  ERROR " + out[method]["error"]
        print(f"{method:22s} {time.perf_counter() - t0:6.1f} s{note}", flush=True)
    return out


def parse_sets(items: list[str]) -> dict[str, object]:
    """``KEY=VALUE`` overrides (``model.static_cache=true``) as ``specdec.load`` keywords."""
    import yaml

    pairs = [item.split("=", 1) for item in items]
    if any(len(pair) != 2 for pair in pairs):
        raise SystemExit(f"--set takes KEY=VALUE items, got {items}")
    return {key: yaml.safe_load(value) for key, value in pairs}


def table(now: dict[str, dict[str, list[int]]], before: dict[str, dict[str, list[int]]]) -> str:
    """Markdown: per preset, prompts identical to BEFORE and to ``ar`` now."""
    rows = [
        "| preset | prompts | tokens | identical to before | identical to ar |",
        "|---|---:|---:|---:|---:|",
    ]
    for method, outs in now.items():
        if "error" in outs:
            rows.append(f"| {method} | error | | | {outs['error'][:120]} |")
            continue
        old = before.get(method, {})
        same = sum(old.get(k) == v for k, v in outs.items())
        as_ar = sum(now.get("ar", {}).get(k) == v for k, v in outs.items())
        tokens = sum(len(v) for v in outs.values())
        rows.append(
            f"| {method} | {len(outs)} | {tokens} | {same}/{len(outs)} | {as_ar}/{len(outs)} |"
        )
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--per-dataset", type=int, default=2)
    ap.add_argument("--max-new", type=int, default=48)
    ap.add_argument("--methods", nargs="*", default=None, help="default: every conf/method preset")
    ap.add_argument("--out", required=True)
    ap.add_argument("--compare", default=None, help="a JSON written by an earlier run")
    ap.add_argument(
        "--draft",
        default=None,
        help="the draft LM (default: the preset's; none: no draft, e.g. when its "
        "weights were not carried: presets that need one then error)",
    )
    ap.add_argument("--device", default=None, help="cpu (the preset's default), cuda, cuda:1")
    ap.add_argument(
        "--set",
        nargs="*",
        action="extend",
        default=[],
        metavar="KEY=VALUE",
        help="eval config overrides, e.g. model.static_cache=true model.dtype=bfloat16",
    )
    args = ap.parse_args()
    overrides = parse_sets(args.set) | ({"device": args.device} if args.device else {})
    methods = args.methods or sorted(p.stem for p in (CONF_DIR / "method").glob("*.yaml"))
    if "ar" in methods:
        methods = ["ar"] + [m for m in methods if m != "ar"]
    now = decode_all(
        args.model, methods, prompts(args.per_dataset), args.max_new, overrides, args.draft
    )
    Path(args.out).write_text(json.dumps(now))
    if args.compare:
        print(table(now, json.loads(Path(args.compare).read_text())))
    ar = now.get("ar", {})
    broken = [
        m
        for m, outs in now.items()
        if "error" in outs or any(ar.get(k) != v for k, v in outs.items())
    ]
    verdict = f"DIFFERS or ERROR: {broken}" if broken else "all identical"
    print(f"greedy identity with ar: {verdict}")
    raise SystemExit(1 if broken else 0)


if __name__ == "__main__":
    main()
