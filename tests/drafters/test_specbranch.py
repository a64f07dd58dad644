"""SpecBranch (``specdec.drafters.specbranch``) on the tiny pair: greedy = AR for the three presets,
the same output whatever the worker's timing, H-RAD's hard signal sets the draft length, a head
for another target is refused, and the CLI runs the presets with their counters."""

from __future__ import annotations

import csv
import json
import random
import time
from pathlib import Path

import pytest
import torch

from specdec.bench.report.board import report
from specdec.bench.run.runner import run
from specdec.config import ROOT
from specdec.core import Context, TargetView
from specdec.drafters import EmptyDrafter
from specdec.drafters.policies import Fixed
from specdec.drafters.specbranch import SpecBranchDrafter
from specdec.engine import generate
from specdec.lm import CachedLM
from specdec.nets.hrad.head import HradHead, save_hrad
from specdec.sampling import Sampling, TorchCoins
from specdec.trees import children, depths
from specdec.verifiers import RecursiveRejection

ASSET = str(ROOT / "specdec" / "assets" / "hrad" / "tiny")
PRESETS = {
    "specbranch": {"hrad": ASSET},
    "specbranch_no_branch": {"hrad": ASSET, "k_max": 1},
    "specbranch_no_hrad": {"hrad": None},
}


def _drafter(draft_model, sampling, mode="thread", gamma=4, **kw) -> SpecBranchDrafter:
    return SpecBranchDrafter(CachedLM(draft_model, role="draft"), Fixed(gamma), mode=mode, **kw)


def _generate(pair, drafter, sampling, seed, text="Hello there", n=40):
    return generate(
        pair.tokenizer.encode(text),
        CachedLM(pair.target),
        drafter,
        RecursiveRejection(),
        sampling=sampling,
        coins=TorchCoins(seed),
        max_new_tokens=n,
    )


@pytest.mark.parametrize("preset", list(PRESETS))
@pytest.mark.parametrize("branching", ["topk", "sample"])
@pytest.mark.parametrize("self_draft", [False, True], ids=["tiny-draft", "target-as-draft"])
def test_greedy_specbranch_emits_ar_tokens_on_the_tiny_fp64_pair(
    tiny64, preset, branching, self_draft
):
    sampling = Sampling(temperature=0.0)
    draft = tiny64.target if self_draft else tiny64.draft
    for text in ("Hello there", "The quick brown fox"):
        ar = _generate(tiny64, EmptyDrafter(), sampling, 0, text)
        drafter = _drafter(draft, sampling, branching=branching, **PRESETS[preset])
        out = _generate(tiny64, drafter, sampling, 0, text)
        assert out.tokens == ar.tokens, text
        c = out.stats.counters
        assert c["pre_steps"] + c.get("post_steps", 0) == out.stats.target_forwards
        if self_draft:  # the target as its own draft: rounds are kept
            assert c["hits"] > 0
        if PRESETS[preset].get("k_max") == 1:
            assert c["branches"] == out.stats.target_forwards  # chains only
        elif branching == "topk" and not self_draft:  # the tiny draft is unsure: it forks
            assert c["branches"] > out.stats.target_forwards


def _slow(drafter: SpecBranchDrafter, rng: random.Random) -> SpecBranchDrafter:
    """Delay every worker job by a random 0-6 ms before it drafts (different timing per run)."""
    job = drafter._grow_round

    def delayed(*args):
        time.sleep(rng.uniform(0.0, 0.006))
        return job(*args)

    drafter._grow_round = delayed
    return drafter


def test_same_seed_same_output_whatever_the_worker_timing(tiny64):
    sampling = Sampling(temperature=1.0)

    def make(mode: str = "thread") -> SpecBranchDrafter:
        return _drafter(tiny64.target, sampling, mode, hrad=ASSET, branching="sample")

    runs = [_generate(tiny64, make("inline"), sampling, 5), _generate(tiny64, make(), sampling, 5)]
    for timing_seed in (1, 2):
        runs.append(_generate(tiny64, _slow(make(), random.Random(timing_seed)), sampling, 5))
    first = runs[0]
    for other in runs[1:]:
        assert other.tokens == first.tokens
        assert other.stats.counters == first.stats.counters
        assert other.stats.accepted_per_step == first.stats.accepted_per_step
    assert first.stats.counters["hits"] > 0 and first.stats.counters["branches"] > 0
    assert _generate(tiny64, make(), sampling, 6).tokens != first.tokens  # the seed matters


class StubHead:
    """A head that always answers ``cls``."""

    def __init__(self, cls: int) -> None:
        self.cls = cls
        self.meta = {
            "layers": 3,
            "target_hidden_size": 32,
            "target_num_layers": 2,
            "target_vocab_size": 259,
        }

    def predict(self, z: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.one_hot(torch.tensor(self.cls), 3).double()


@pytest.mark.parametrize(
    "threshold,lengths", [(1.0, {0: 1, 1: 1, 2: 4}), (0.0, {0: 1, 1: 4, 2: 4})]
)
def test_the_hrad_class_sets_the_draft_length(tiny64, threshold, lengths):
    # threshold 1: every token is uncertain (the soft stop ends the draft at its first token);
    # threshold 0: none is (the soft stop never fires). Class 0: one token; class 2: gamma_max.
    sampling = Sampling(temperature=1.0)
    ids = torch.tensor(tiny64.tokenizer.encode("Hello there"))
    for cls, want in lengths.items():
        drafter = _drafter(
            tiny64.draft,
            sampling,
            "inline",
            gamma=4,
            threshold=threshold,
            k_max=3,
            branching="topk",
        )
        drafter.head = StubHead(cls)
        drafter.attach(TargetView(CachedLM(tiny64.target)))
        drafter.prefill(ids)
        drafter.features = lambda ctx, view: torch.zeros(4)  # the stub ignores z
        log = drafter.lm.forward_log
        before = len(log)
        draft = drafter.propose(Context(tokens=ids, coins=TorchCoins(0), sampling=sampling))
        drafter.ahead.discard()
        assert max(depths(draft.parent.tolist())) == want, (cls, threshold)
        # one forward per depth over every branch: the catch-up (root), then depths 1..want-1
        main = [f for f in log[before:] if f.lane != "specbranch"]
        assert len(main) == want, (cls, threshold)
        widths = [len(k) for k in children(draft.parent.tolist()) if k]
        if cls == 2 and threshold == 1.0:  # forked at x_1 (the tiny draft is unsure), and the
            # branches continued together: each later forward holds one token per branch
            assert max(widths) > 1 and [f.new_tokens for f in main[1:]] == [max(widths)] * 3
        assert drafter.counters()[f"hrad_{cls}"] == 1
        if cls == 0:  # forked at the first token: k = floor(3 (1 - q(x_1))) branches
            assert len(children(draft.parent.tolist())[0]) >= 1


def test_an_hrad_head_for_another_target_is_refused(tiny64, tmp_path):
    head = HradHead(4 * 16, (8,))
    save_hrad(
        head,
        tmp_path / "head",
        target_hidden_size=16,
        target_num_layers=2,
        target_vocab_size=259,
        layers=3,
    )
    drafter = _drafter(tiny64.draft, Sampling(), "inline", hrad=str(tmp_path / "head"))
    assert drafter.target_layers == (-3, -2, -1)
    with pytest.raises(ValueError, match=r"hidden_size 32 \(the head's target has 16\)"):
        drafter.attach(TargetView(CachedLM(tiny64.target)))
    with pytest.raises(FileNotFoundError, match="no H-RAD head at"):
        _drafter(tiny64.draft, Sampling(), "inline", hrad=str(tmp_path / "none"))
    # the missing head's message names the experiment of its folder's model (hrad_<model>)
    with pytest.raises(FileNotFoundError, match=r"\+experiment=hrad_tiny"):
        _drafter(tiny64.draft, Sampling(), "inline", hrad=str(tmp_path / "tiny"))
    with pytest.raises(ValueError, match="drafter.branching='top3'"):
        _drafter(tiny64.draft, Sampling(), "inline", branching="top3")


def test_a_head_trained_for_another_draft_length_is_warned_about(tiny64, caplog):
    # the tiny asset was labelled with gamma_max = 2: its class 2 means "both tokens accepted"
    with caplog.at_level("WARNING", logger="specdec.drafters.hrad_checks"):
        _drafter(tiny64.draft, Sampling(), "inline", gamma=2, hrad=ASSET)
    assert not caplog.records
    with caplog.at_level("WARNING", logger="specdec.drafters.hrad_checks"):
        _drafter(tiny64.draft, Sampling(), "inline", gamma=7, hrad=ASSET)
    (record,) = caplog.records
    assert "gamma_max=2" in record.getMessage() and "drafter.policy.gamma=2" in record.getMessage()
    caplog.clear()  # the tiny head was labelled at T = 1: a greedy generation is told so, once
    drafter = _drafter(tiny64.draft, Sampling(), "inline", gamma=2, hrad=ASSET)
    with caplog.at_level("WARNING", logger="specdec.drafters.hrad_checks"):
        _generate(tiny64, drafter, Sampling(temperature=1.0), 0, n=3)
        assert not caplog.records
        for seed in (0, 1):
            _generate(tiny64, drafter, Sampling(temperature=0.0), seed, n=3)
    (record,) = caplog.records
    assert "labelled at temperature 1.0 but this run samples at 0.0" in record.getMessage()


FAST = ["limit=2", "max_new_tokens=12", "warmup=0", "progress=false", "model=tiny"]


@pytest.mark.parametrize("preset", list(PRESETS))
def test_the_presets_run_from_the_cli_with_their_counters(compose, preset):
    cfg = compose("eval", [f"method={preset}", *FAST, "sampling.temperature=1.0"])
    assert cfg.drafter.hrad == PRESETS[preset]["hrad"]
    summary = run(cfg)
    out = Path(cfg.paths.output_dir)
    recs = [json.loads(x) for x in (out / "records" / "tiny.jsonl").read_text().splitlines()]
    assert len(recs) == 2
    total = summary["datasets"]["tiny"]
    c = total["counters"]
    steps = sum(r["target_forwards"] for r in recs)
    assert total["branches_per_step"] == pytest.approx(c["branches"] / steps)
    assert total["rollback_rate"] == pytest.approx(c["rolled_back"] / c["draft_tokens"])
    assert (sum(c.get(f"hrad_{k}", 0) for k in range(3)) > 0) == (preset != "specbranch_no_hrad")
    text, _ = report([out], out / "board", plots=False)
    header = next(line for line in text.splitlines() if line.startswith("| method"))
    assert "| branches/step |" in header and f"{total['branches_per_step']:.2f}" in text
    csv_rows = list(csv.DictReader((out / "board" / "leaderboard.csv").open()))
    assert float(csv_rows[0]["branches_per_step"]) == pytest.approx(total["branches_per_step"])
