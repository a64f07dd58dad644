"""``leaderboard.tex`` (``specdec.bench.report.latex``): booktabs rules, escaped names, merged
repeats as ``mean $\\pm$ std``, refused and undefined cells. Rows are stand-ins
(``specdec.testing.board_rows``)."""

from __future__ import annotations

import re

from specdec.bench.report.latex import latex_escape, to_latex, write_latex
from specdec.testing.board_rows import repeats, row


def _body(tex: str) -> list[list[str]]:
    """The cells of the lines between ``\\midrule`` and ``\\bottomrule``, split on unescaped
    ``&``."""
    inner = tex.split("\\midrule\n")[1].split("\\bottomrule")[0]
    return [
        [c.strip() for c in re.split(r"(?<!\\)&", line.removesuffix("\\\\").strip())]
        for line in inner.strip().splitlines()
    ]


def test_latex_escape_writes_every_special_character_as_itself():
    assert latex_escape("a_b & 5% #1 $x {y} ~^\\") == (
        r"a\_b \& 5\% \#1 \$x \{y\} \textasciitilde{}\textasciicircum{}\textbackslash{}"
    )


def test_leaderboard_tex_is_a_booktabs_table_with_escaped_names_and_std(tmp_path):
    rows = [
        row("ar", "cnn_dailymail", 1.0),
        repeats("sps", "cnn_dailymail", [1.2, 1.4], [2.0, 2.4]),
        row("pld", "cnn_dailymail", None, label="pld (run_b&c%)"),
        row("ssd", "gsm8k", 1.3, tau=float("nan")),
    ]
    rows[2].refused = "other prompts"
    tex = write_latex(rows, tmp_path / "leaderboard.tex").read_text()
    assert tex.startswith("\\begin{tabular}{llrrrrr}\n\\toprule\n")
    assert tex.count("\\toprule") == tex.count("\\midrule") == tex.count("\\bottomrule") == 1
    header = tex.split("\\toprule\n")[1].split("\\\\")[0]
    assert [c.strip() for c in header.split("&")] == [
        "method",
        "dataset",
        "runs",
        "tokens/s",
        "speedup",
        r"$\tau$",
        "accept",
    ]
    body = _body(tex)
    assert all(len(cells) == 7 for cells in body)  # no name broke a column
    assert body[0][:3] == ["ar", r"cnn\_dailymail", "1"]
    assert body[1][:2] == ["sps", r"cnn\_dailymail"]
    assert body[1][2:6] == ["2", r"130.0 $\pm$ 14.1", r"1.30 $\pm$ 0.14", r"2.20 $\pm$ 0.28"]
    assert body[2][0] == r"pld (run\_b\&c\%)" and body[2][4] == "refused"
    assert body[3][:2] == ["ssd", r"gsm8k"] and body[3][5] == "--"  # NaN τ: undefined


def test_columns_measured_by_no_row_are_left_out_and_quality_is_shown():
    rows = [row("sps", "humaneval", 1.2, quality_pass_at_1=0.25)]
    rows[0].modeled_speedup_vs_ar = 1.5
    tex = to_latex(rows, caption="SpecDec on 1_000 prompts")
    assert "\\caption{SpecDec on 1\\_000 prompts}" in tex and "runs" not in tex
    header = tex.split("\\toprule\n")[1].split("\\\\")[0]
    assert [c.strip() for c in header.split("&")][-2:] == ["modeled speedup", r"pass\_at\_1"]
    assert _body(tex)[0][-2:] == ["1.50", "0.250"]
