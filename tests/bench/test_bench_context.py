"""``scripts/bench_context.py`` on the tiny pair: one line per (method, context length) with the
prefill split and the per-step costs, ``ar``'s own ratios at 1 and the feature drafter's prefill
share measured (SpecBlock catches up on the prompt, so its drafter prefill is not zero)."""

from __future__ import annotations

import importlib.util
import sys

from specdec.testing.paths import REPO


def _script():
    spec = importlib.util.spec_from_file_location(
        "bench_context", REPO / "scripts" / "bench_context.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up
    spec.loader.exec_module(module)
    return module


def test_bench_context_prints_a_table_per_method_and_length(capsys):
    assert (
        _script().main(
            ["--model", "tiny", "--methods", "ar,specblock", "--contexts", "16,32", "--new", "2"]
        )
        == 0
    )
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("load average (1 min):") and out[-1].startswith("load average")
    assert out[1].split()[:4] == ["method", "context", "pre", "tgt"]
    rows = {(c[0], int(c[1])): c for c in (line.split() for line in out[2:-1])}
    assert set(rows) == {("ar", 16), ("ar", 32), ("specblock", 16), ("specblock", 32)}
    for row in rows.values():
        assert len(row) == 12 and float(row[2]) > 0  # the target's prefill is always timed
    assert float(rows[("ar", 16)][11]) == 1.0 and float(rows[("ar", 32)][9]) < 0.5  # no draft
    assert float(rows[("specblock", 16)][3]) > 0 and float(rows[("specblock", 16)][10]) == 1.0
