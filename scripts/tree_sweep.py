"""Tree size per device (the best tree is a property of the hardware): tokens/s of the feature
drafters' dynamic trees.

Greedy ``ar``, EAGLE-3 at each ``topk:total_tokens`` of ``--grid`` and SpecBlock at each
``total_tokens`` of ``--sb-grid`` and the presets of ``--also`` as shipped (``pld eagle3_pld``),
one pair loaded once, on held-out TRAINING prompts: the
``--prompts`` prompts of ``training_prompts(--source)`` past the first ``--skip`` (the ones the
data stage traced), so no eval prompt chooses a default (``--source`` may also be a JSON list of
such prompts, written ahead of time: a few KB to carry instead of the training data). One warm-up
generation per setting, on the longest prompt (a growing static cache reaches its size and the
buckets are captured before the clock starts; captures still made while timed are in the row's
``timed_counters``); tokens/s = new tokens / wall seconds; ``tau`` = tokens per target
forward; speedup over ``ar``.
``--graphs`` (default on for cuda) runs every setting, ``ar`` too, on the static cache with
replayed CUDA graphs (``model.static_cache=true``); a setting that raises there is run again
eagerly (its row says ``graphs: false`` and keeps the error), one that raises eagerly too is a row
with its error, so one broken setting never costs the others' numbers.

    python scripts/tree_sweep.py --model smollm2 --device cuda --source DATA --skip 6000 \\
        --e3 OUT/eagle3 --sb OUT/specblock --out tree_sweep.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def held_out_prompts(source: str, skip: int, count: int) -> list[str]:
    from specdec.data.training import training_prompts
    from specdec.errors import BadInput

    if source.endswith(".json"):  # a list of prompts drawn from training data ahead of time
        texts = json.loads(Path(source).read_text())[skip : skip + count]
    else:
        texts = training_prompts(source)[skip : skip + count]
    if len(texts) < count:
        raise BadInput(
            f"only {len(texts)} training prompts past the {skip} traced ones in "
            f"{source}; lower SWEEP_PROMPTS or PROMPTS"
        )
    return texts


def tree_sweep(args: argparse.Namespace) -> dict:
    """The table (printed) and its JSON (``args.out``); ``args``: see ``parser``."""
    import torch

    import specdec
    from specdec.api import Decoder, compose_eval, overrides_for
    from specdec.bench.run.method import build_method
    from specdec.models.pair import with_static
    from specdec.static_cache import static_spec

    prompts = held_out_prompts(args.source, args.skip, args.prompts)
    draft = "none" if args.model == "smollm2" else None  # feature drafters run no draft LM
    base = {"device": args.device}
    if args.dtype:  # None: the model preset's dtype
        base["model.placement.dtype"] = args.dtype
    pair = specdec.load(args.model, draft, method="ar", **base).pair
    settings: list[tuple[str, dict]] = [("ar", {})]
    for item in args.grid.split():
        k, n = (int(v) for v in item.split(":"))
        settings.append(
            ("eagle3", {"drafter.path": args.e3, "drafter.topk": k, "drafter.total_tokens": n})
        )
    for n in args.sb_grid.split():
        settings.append(("specblock", {"drafter.path": args.sb, "drafter.total_tokens": int(n)}))
    settings += [(method, {}) for method in args.also.split()]  # presets as shipped
    graphs = args.graphs if args.graphs is not None else str(args.device).startswith("cuda")

    replayed = with_static(pair, static_spec(True, None)) if graphs else pair  # same weights

    def measure(method: str, extra: dict, replay: bool) -> dict:
        static = {"model.static_cache": True} if replay else {}
        cfg = compose_eval(overrides_for(args.model, draft, method, {**base, **static, **extra}))
        one = replayed if replay else pair
        dec = Decoder(cfg, one, build_method(cfg, one))
        # warm-up on the longest prompt: a growing static cache reaches the size the timed
        # prompts need, and its buckets are captured, before the clock starts
        longest = max(prompts, key=len)
        dec.generate(longest, max_new_tokens=args.max_new, prompt_id="warmup")
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        start, new, taus, counts = time.perf_counter(), 0, [], {}
        for i, text in enumerate(prompts):
            out = dec.generate(text, max_new_tokens=args.max_new, prompt_id=f"heldout{i}")
            new += len(out.tokens)
            taus.append(float(out.stats["tau"]))
            for key, value in (out.stats.get("counters") or {}).items():
                if key.startswith(("graph_", "cache_")):  # captures here cost timed seconds
                    counts[key] = counts.get(key, 0) + value
        wall = time.perf_counter() - start
        return {
            "tokens": new,
            "seconds": round(wall, 3),
            "tokens_per_s": round(new / wall, 2),
            "tau": round(sum(taus) / len(taus), 3),
            "graphs": replay,
            "timed_counters": counts,
        }

    rows = []
    for method, extra in settings:
        row = {
            "method": method,
            "topk": extra.get("drafter.topk"),
            "total_tokens": extra.get("drafter.total_tokens"),
        }
        for replay in [True, False] if graphs else [False]:
            try:
                row |= measure(method, extra, replay)
                break
            except Exception as err:  # noqa: BLE001  (a row with its error; the sweep goes on)
                row["error"] = f"{'graphs' if replay else 'eager'}: {type(err).__name__}: {err}"
                print(f"tree_sweep: {method} {extra}: {row['error'][:300]}", flush=True)
        rows.append(row)
    ar = rows[0].get("tokens_per_s")
    for row in rows:
        ok = ar and "tokens_per_s" in row
        row["speedup"] = round(row["tokens_per_s"] / ar, 3) if ok else None
    print(
        f"{'method':<10} {'topk':>4} {'total':>5} {'graphs':>6} {'tok/s':>9} {'tau':>6} "
        f"{'speedup':>7}"
    )
    for r in rows:
        if "tokens_per_s" not in r:
            print(
                f"{r['method']:<10} {r['topk'] or '':>4} {r['total_tokens'] or '':>5} "
                f"error: {r['error'][:80]}"
            )
            continue
        print(
            f"{r['method']:<10} {r['topk'] or '':>4} {r['total_tokens'] or '':>5} "
            f"{str(r['graphs']):>6} {r['tokens_per_s']:>9.1f} {r['tau']:>6.2f} "
            f"{r['speedup'] or 0:>7.2f}  {r['timed_counters']}"
        )
    result = {
        "model": args.model,
        "device": args.device,
        "dtype": args.dtype,
        "graphs": graphs,
        "held_out_prompts": len(prompts),
        "skip": args.skip,
        "max_new": args.max_new,
        "rows": rows,
    }
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2))
    return result


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for key, kind, default in (
        ("--model", str, "smollm2"),
        ("--device", str, "cuda"),
        ("--dtype", str, None),
        ("--source", str, None),
        ("--skip", int, 0),
        ("--prompts", int, 16),
        ("--max-new", int, 128),
        ("--e3", str, None),
        ("--sb", str, None),
        ("--grid", str, "4:16 8:32 8:64 10:96"),
        ("--sb-grid", str, "8 16 32"),
        ("--also", str, ""),
        ("--out", str, None),
    ):
        p.add_argument(key, type=kind, default=default)
    p.add_argument(
        "--graphs",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="static cache + replayed CUDA graphs for every setting (default: on cuda)",
    )
    return p


def main(argv: list[str] | None = None) -> None:
    from specdec.errors import exit_on_input_error

    with exit_on_input_error():
        tree_sweep(parser().parse_args(argv))


if __name__ == "__main__":
    main()
