"""The leaderboard's plots (``specdec.bench.report.plots``, ``specdec.bench.report.colours``):
PDF and 300-dpi PNG files, ± std error bars on merged repeats, one colour per method in every
plot whatever other rows it draws. Rows are stand-ins (``specdec.testing.board_rows``): no eval
run is needed to draw them."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys

import pytest
from matplotlib.colors import to_hex
from PIL import Image

from specdec.bench.report.colours import PALETTE, hashed_colour, method_colour
from specdec.bench.report.plots import acceptance_curves, bars, colours, plot_all
from specdec.testing.board_rows import repeats, row


def _bar_colours(fig) -> dict[str, str]:
    (ax,) = fig.axes
    return {
        c.get_label(): to_hex(c.patches[0].get_facecolor())
        for c in ax.containers
        if hasattr(c, "patches") and c.patches
    }


def _line_colours(fig) -> dict[str, str]:
    return {line.get_label(): to_hex(line.get_color()) for ax in fig.axes for line in ax.lines}


def test_a_method_keeps_its_colour_in_every_plot_of_every_leaderboard():
    small = [row("ar", "gsm8k", 1.0), row("sps", "gsm8k", 1.4)]
    large = [row(m, "gsm8k", 1.2) for m in ("eagle3", "pld", "adaedl", "sps", "ssd", "ar")]
    assert colours(small)["sps"] == colours(large)["sps"] == PALETTE["sps"]
    assert colours(small)["ar"] == colours(large)["ar"] == PALETTE["ar"]
    for rows in (small, large):  # what is drawn: the bars and the curves use the mapping
        drawn = _bar_colours(bars(rows, lambda r: r.speedup, "t", "y"))
        assert drawn == {k: to_hex(v) for k, v in colours(rows).items()}
        assert _line_colours(acceptance_curves(rows)) == drawn
    # two rows of one method share its colour and differ by hatch
    two = [row("sps", "gsm8k", 1.3, label="sps (a)"), row("sps", "gsm8k", 1.5, label="sps (b)")]
    fig = bars(two, lambda r: r.speedup, "t", "y")
    assert set(_bar_colours(fig).values()) == {PALETTE["sps"]}
    assert len({c.patches[0].get_hatch() for c in fig.axes[0].containers}) == 2


def test_unknown_methods_get_a_colour_stable_across_processes():
    """SHA-256, not Python's per-process salted ``hash``: another hash seed, the same colour."""
    code = (
        "from specdec.bench.report.colours import method_colour; "
        "print(method_colour('my_new_method'))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    other = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert other == method_colour("my_new_method") == hashed_colour("my_new_method")
    assert method_colour("my_new_method") != method_colour("my_new_method_2")
    assert len(set(PALETTE.values())) == len(PALETTE)  # the fixed colours are distinct


def test_error_bars_show_the_tables_std_of_merged_repeats():
    merged = repeats("sps", "gsm8k", [1.2, 1.4, 1.3], [2.0, 2.2, 2.1])
    single = row("pld", "gsm8k", 1.1)
    assert merged.std["speedup"] == pytest.approx(statistics.stdev([1.2, 1.4, 1.3]))
    fig = bars([merged, single], lambda r: r.speedup, "t", "y", std=lambda r: r.std.get("speedup"))
    by_label = {c.get_label(): c for c in fig.axes[0].containers if hasattr(c, "errorbar")}
    (segment,) = by_label["sps"].errorbar.lines[2][0].get_segments()
    low, high = segment[0][1], segment[1][1]
    assert (high + low) / 2 == pytest.approx(1.3)
    assert (high - low) / 2 == pytest.approx(merged.std["speedup"])
    assert by_label["pld"].errorbar is None  # one run: no spread, no error bar


def test_plot_all_writes_pdf_and_300_dpi_png_with_error_bars(tmp_path):
    rows = [
        repeats("sps", "gsm8k", [1.2, 1.4], [2.0, 2.4]),
        row("ar", "gsm8k", 1.0),
        repeats("sps", "alpaca", [1.1, 1.5], [1.8, 2.0]),
        row("ar", "alpaca", 1.0),
    ]
    written = plot_all(rows, tmp_path)
    names = sorted(p.name for p in written)
    assert names == sorted(
        f"{s}.{f}" for s in ("speedup", "block_efficiency", "acceptance") for f in ("pdf", "png")
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == names
    for path in written:
        if path.suffix == ".pdf":
            assert path.read_bytes().startswith(b"%PDF")
        else:
            dpi = Image.open(path).info["dpi"]
            assert dpi == pytest.approx((300, 300), abs=0.1)
