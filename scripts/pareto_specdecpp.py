"""SpecDec++ evaluation (arXiv:2405.19715): sweep thresholds and γ, plot the Pareto fronts,
tabulate.

    python scripts/pareto_specdecpp.py --run --out outputs/pareto_tiny model=tiny benchmark=tiny
    python scripts/pareto_specdecpp.py --out outputs/pareto_tiny          # re-plot existing runs

``--run`` launches Hydra multiruns of ``specdec.eval`` (extra ``key=value`` arguments go to every
run): ``method=sps`` over ``--gammas``, ``method=specdecpp`` over ``--thresholds``, and one run each
of ``sps_heuristic``, ``adaedl`` and ``ar``. Then every ``summary.json`` under ``--out`` is read and
the script writes ``pareto.png`` (discard rate vs verification rate per dataset, SpecDec++'s
figure 3: lower-left is better; each family's non-dominated points are joined) and ``pareto.md``
(tokens/s, block efficiency, discard and verification rates for ``sps`` at its best γ,
``sps_heuristic``, ``adaedl`` and ``specdecpp`` at its best threshold, and the relative tokens/s
gain of ``specdecpp`` over the best fixed γ).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from specdec.bench.report.board import load_runs

SWEPT = {"sps": "gamma", "specdecpp": "threshold"}


def launch(out: Path, gammas: str, thresholds: str, extra: list[str]) -> None:
    """One Hydra multirun per family, each in its own sweep folder under ``out``."""
    jobs = {
        "sps": [f"drafter.policy.gamma={gammas}"],
        "specdecpp": [f"drafter.policy.threshold={thresholds}"],
        "sps_heuristic": [],
        "adaedl": [],
        "ar": [],
    }
    for method, sweep in jobs.items():
        cmd = [
            sys.executable,
            "-m",
            "specdec.eval",
            "-m",
            f"method={method}",
            *sweep,
            *extra,
            f"hydra.sweep.dir={out / method}",
            "progress=false",
        ]
        print("+", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)


def collect(out: Path) -> dict[str, dict[str, list[dict]]]:
    """``{dataset: {method: [point, ...]}}``; a point holds the metrics and the swept value."""
    points: dict[str, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for run in load_runs([out]):
        policy = ((run.summary.config or {}).get("drafter") or {}).get("policy") or {}
        knob = policy.get(SWEPT.get(run.method, ""), None)
        for dataset, m in run.summary.datasets.items():
            points[dataset][run.method].append({**m, "knob": knob})
    return points


def frontier(pts: list[dict]) -> list[dict]:
    """Non-dominated points (lower discard and lower verification rate are better)."""
    xy = [(p["discard_rate"], p["verification_rate"]) for p in pts]
    keep = [
        p for p, a in zip(pts, xy) if not any(b[0] <= a[0] and b[1] <= a[1] and b != a for b in xy)
    ]
    return sorted(keep, key=lambda p: p["discard_rate"])


def plot(points: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(points), figsize=(5 * len(points), 4), squeeze=False)
    style = {
        "sps": ("tab:blue", "o", "fixed γ (sps)"),
        "specdecpp": ("tab:red", "s", "SpecDec++ (threshold)"),
        "sps_heuristic": ("tab:green", "^", "heuristic +2/−1"),
        "adaedl": ("tab:purple", "D", "AdaEDL"),
    }
    for ax, (dataset, by_method) in zip(axes[0], sorted(points.items())):
        for method, (color, marker, label) in style.items():
            pts = by_method.get(method, [])
            if not pts:
                continue
            ax.scatter(
                [p["discard_rate"] for p in pts],
                [p["verification_rate"] for p in pts],
                color=color,
                marker=marker,
                label=label,
                alpha=0.8,
            )
            front = frontier(pts)
            if len(front) > 1:
                ax.plot(
                    [p["discard_rate"] for p in front],
                    [p["verification_rate"] for p in front],
                    color=color,
                    lw=1,
                )
            for p in pts:
                if p["knob"] is not None:
                    ax.annotate(
                        f"{p['knob']}",
                        (p["discard_rate"], p["verification_rate"]),
                        fontsize=7,
                        color=color,
                        xytext=(3, 3),
                        textcoords="offset points",
                    )
        ax.set_title(dataset)
        ax.set_xlabel("discard rate (discarded drafts / generated token)")
        ax.set_ylabel("verification rate (target calls / generated token)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def table(points: dict) -> str:
    lines = [
        "| dataset | method | setting | tokens/s | block eff. | discard | verif. |",
        "|---|---|---|---|---|---|---|",
    ]
    gains = []
    for dataset, by_method in sorted(points.items()):
        best: dict[str, dict] = {}
        for method in ("sps", "sps_heuristic", "adaedl", "specdecpp"):
            pts = by_method.get(method, [])
            if not pts:
                continue
            p = best[method] = max(pts, key=lambda x: x.get("tokens_per_s") or 0.0)
            setting = "" if p["knob"] is None else f"{SWEPT[method]}={p['knob']} (best)"
            lines.append(
                f"| {dataset} | {method} | {setting} | {p['tokens_per_s']:.1f} | "
                f"{p['block_efficiency']:.3f} | {p['discard_rate']:.3f} | "
                f"{p['verification_rate']:.3f} |"
            )
        if "sps" in best and "specdecpp" in best:
            gain = best["specdecpp"]["tokens_per_s"] / best["sps"]["tokens_per_s"] - 1
            gains.append(
                f"- {dataset}: specdecpp vs best fixed γ: {gain:+.1%} tokens/s "
                "(paper, Llama-2 7B/70B: +7.2 % Alpaca, +9.4 % GSM8K, +11.1 % HumanEval)"
            )
    return "\n".join(lines + [""] + gains) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, type=Path, help="folder of the sweeps")
    ap.add_argument("--run", action="store_true", help="launch the multiruns first")
    ap.add_argument("--gammas", default="1,2,3,4,6,8")
    ap.add_argument("--thresholds", default="0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9")
    args, extra = ap.parse_known_args(argv)
    if args.run:
        launch(args.out, args.gammas, args.thresholds, extra)
    points = collect(args.out)
    plot(points, args.out / "pareto.png")
    text = table(points)
    (args.out / "pareto.md").write_text(text)
    print(text)
    print(f"wrote {args.out / 'pareto.png'} and {args.out / 'pareto.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
