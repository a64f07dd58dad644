"""The SpecBlock serving-time bandit drafter (``drafters/specblock_bandit.py``).

* (the discounted-UCB rule and the step clock alone: ``tests/drafters/test_bandit.py``)
* the drafter through the real engine: exact at T = 1 and 0.7 under ``rrs`` and ``hsd`` by
  enumeration (random arms enumerated with the verifier's coins, TableLM target);
  greedy-identical to AR on the tiny fp64 pair with every arm pulled; per-arm counters that add
  up to the run's steps and tokens; skip steps with no draft forward, whose positions join the
  next drafting step's one catch-up forward;
* the eval CLI writes the arm counters; ``scripts/bench_bandit.py`` prints each arm alone too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from specdec.drafters import EmptyDrafter
from specdec.drafters.bandit import StepClock
from specdec.drafters.bandit_arms import arm_rates, arm_shape
from specdec.drafters.policies import Fixed
from specdec.drafters.specblock import TreeShape
from specdec.drafters.specblock_bandit import SpecBlockBanditDrafter
from specdec.engine import generate
from specdec.lm import CachedLM
from specdec.models.placement import Placement
from specdec.sampling import Sampling, TorchCoins
from specdec.testing.enumeration import enumerate_outcomes, max_abs_error
from specdec.testing.paths import REPO
from specdec.testing.specblock_table import save_table_specblock
from specdec.testing.table_lm import TableLM, ar_joint
from specdec.verifiers import Hierarchical, RecursiveRejection

F64 = Placement.cpu(torch.float64)  # the drafters' nets next to the float64 targets

ROOT = REPO
TINY_ASSET = str(ROOT / "specdec" / "assets" / "specblock" / "tiny")
LINEAR = {"target": [1e-3, 2e-4], "draft": [2e-4, 1e-4]}  # a deterministic step clock


def test_arm_shapes_override_the_full_tree_and_refuse_unknown_settings():
    full = TreeShape((1, 2, 3, 0), 3, 8, 2, 2)
    head = arm_shape(full, "head", {"widths": [1, 1, 1, 0], "root_width": 1, "max_blocks": 1})
    assert head == TreeShape((1, 1, 1, 0), 1, 8, 1, 2)
    assert arm_shape(full, "skip", None) is None and arm_shape(full, "full", {}) == full
    with pytest.raises(ValueError, match=r"drafter.arms.bad sets \['depth'\]"):
        arm_shape(full, "bad", {"depth": 3})
    with pytest.raises(ValueError, match="4 widths"):
        arm_shape(full, "short", {"widths": [1, 1]})


def _table_bandit(tmp_path, vocab: int, **kwargs) -> SpecBlockBanditDrafter:
    """The bandit drafter with a seeded random network shaped for a TableLM (hidden = V)."""
    path = save_table_specblock(tmp_path / "sb", vocab)
    return SpecBlockBanditDrafter(
        Fixed(4),
        path,
        widths=(1, 2, 2, 0),
        root_width=2,
        total_tokens=9,
        max_blocks=2,
        beam=2,
        placement=F64,
        **kwargs,
    )


@pytest.mark.parametrize("verifier", [RecursiveRejection(), Hierarchical()])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_bandit_is_exact_at_t_above_0_through_the_engine(tmp_path, verifier, temperature):
    vocab, prompt, length = 20, [0, 1, 2], 3
    sampling, target = Sampling(temperature=temperature, top_k=3), TableLM(vocab, 1, scale=2.0)
    # explore 0.5: each step's arm is a coin (uniform over the arms) or the UCB arm, both
    # enumerated; a fresh bandit per path (persist: false) and a deterministic clock make every
    # path a deterministic function of its coins, as the harness needs.
    drafter = _table_bandit(
        tmp_path, vocab, explore=0.5, persist=False, costs=LINEAR, context_edges=[1]
    )
    pulls = {name: 0 for name in drafter.arm_names}
    seen = {"accepted": 0}

    def run(coins):
        out = generate(
            prompt, target, drafter, verifier, sampling=sampling, coins=coins, max_new_tokens=length
        )
        for name in pulls:
            pulls[name] += drafter.counters()[f"bandit_{name}_pulls"]
        seen["accepted"] += out.stats.accepted
        return tuple(out.tokens)

    got = enumerate_outcomes(run)
    assert max_abs_error(got, ar_joint(target, prompt, length, sampling)) < 1e-12
    assert all(n > 0 for n in pulls.values()), pulls  # every arm was drafted from on some path
    assert seen["accepted"] > 0  # and drafts were really accepted


@pytest.fixture(scope="module")
def tiny_run(tiny64):
    greedy, prompt = Sampling(temperature=0.0), tiny64.tokenizer.encode("The quick brown fox")
    drafter = SpecBlockBanditDrafter(
        Fixed(8), TINY_ASSET, explore=0.3, context_edges=[1], costs=LINEAR, placement=F64
    )
    gens = []
    for i, n in enumerate((40, 30)):  # two prompts: the statistics persist, the counters restart
        gens.append(
            generate(
                prompt,
                CachedLM(tiny64.target),
                drafter,
                RecursiveRejection(),
                sampling=greedy,
                coins=TorchCoins(5 + i),
                max_new_tokens=n,
            )
        )
    ar = generate(
        prompt,
        CachedLM(tiny64.target),
        EmptyDrafter(),
        RecursiveRejection(),
        sampling=greedy,
        coins=TorchCoins(0),
        max_new_tokens=40,
    )
    return drafter, gens, ar


def test_greedy_bandit_is_ar_with_every_arm_pulled(tiny_run):
    drafter, gens, ar = tiny_run
    assert gens[0].tokens == ar.tokens and gens[1].tokens == ar.tokens[:30]
    counters = gens[0].stats.counters
    assert all(counters[f"bandit_{name}_pulls"] > 0 for name in ("skip", "head", "full"))


def test_arm_counters_add_up_to_the_steps_and_tokens(tiny_run):
    drafter, gens, _ = tiny_run
    for gen in gens:  # no stop ids: a pulled step's tokens are never truncated
        c, names = gen.stats.counters, drafter.arm_names
        steps = len(gen.stats.accepted_per_step)
        assert sum(c[f"bandit_{n}_pulls"] for n in names) + c["bandit_forced_steps"] == steps
        assert sum(c[f"bandit_{n}_tokens"] for n in names) + c["bandit_forced_steps"] == len(
            gen.tokens
        )
        assert c["bandit_skip_tokens"] == c["bandit_skip_pulls"]  # a skip step emits one token
    # the statistics persist across prompts (reset keeps them); persist: false forgets them
    learned = [list(w) for w in drafter.rule.weight]
    drafter.reset()
    assert drafter.rule.weight == learned and sum(map(sum, learned)) > 0
    drafter.persist = False
    drafter.reset()
    assert sum(map(sum, drafter.rule.weight)) == 0
    rates = arm_rates(gens[0].stats.counters)
    assert sum(r["share"] for r in rates.values()) == pytest.approx(1.0)
    # the arms' microseconds add up to the priced forwards of the steps with an arm (the forced
    # last step excluded), deferred catch-ups included (each term rounded to 1 µs)
    for gen in gens:
        c, steps = gen.stats.counters, len(gen.stats.accepted_per_step)
        chosen = steps - c["bandit_forced_steps"]
        priced = StepClock(LINEAR)([f for f in gen.stats.forwards if 0 <= f.step < chosen])
        arms_us = sum(c[f"bandit_{n}_us"] for n in drafter.arm_names)
        assert abs(arms_us - 1e6 * priced) <= 2 * steps


def test_a_run_with_measured_costs_says_it_is_not_a_function_of_the_seed(tiny_run, tiny64):
    _, gens, _ = tiny_run  # costs given: every arm follows the seed alone
    assert all(g.stats.counters["bandit_timed_steps"] == 0 for g in gens)
    greedy, prompt = Sampling(temperature=0.0), tiny64.tokenizer.encode("The quick brown fox")
    drafter = SpecBlockBanditDrafter(Fixed(8), TINY_ASSET, costs=None, placement=F64)
    gen = generate(
        prompt,
        CachedLM(tiny64.target),
        drafter,
        RecursiveRejection(),
        sampling=greedy,
        coins=TorchCoins(5),
        max_new_tokens=12,
    )
    c = gen.stats.counters
    pulled = sum(c[f"bandit_{n}_pulls"] for n in drafter.arm_names)
    assert pulled > 0 and c["bandit_timed_steps"] == pulled


def test_skip_steps_run_no_draft_forward_and_the_next_catch_up_takes_them_all(tiny64):
    greedy, prompt = Sampling(temperature=0.0), tiny64.tokenizer.encode("hello there")
    drafter = SpecBlockBanditDrafter(Fixed(8), TINY_ASSET, costs=LINEAR, placement=F64)
    script = iter([0, 0, 0, 2, 0, 1] + [2] * 20)  # skip, skip, skip, full, skip, head, full...
    drafter.rule.choose = lambda context=0, coins=None: next(script)
    gen = generate(
        prompt,
        CachedLM(tiny64.target),
        drafter,
        RecursiveRejection(),
        sampling=greedy,
        coins=TorchCoins(0),
        max_new_tokens=12,
    )
    steps = {}
    for rec in gen.stats.forwards:
        steps.setdefault(rec.step, []).append(rec)
    drafts = {s: [r for r in recs if r.role == "draft"] for s, recs in steps.items()}
    assert drafts[0] == drafts[1] == drafts[2] == drafts[4] == []  # skip: no draft forward
    assert gen.stats.drafted_per_step[:3] == [0, 0, 0]
    # step 3 appends the three positions the skips held (each kept its root) in one forward
    assert [r.new_tokens for r in drafts[3]] == [3]
    # step 5 (head) appends step 3's kept positions and step 4's root: 1 + accepted_3 + 1
    assert [r.new_tokens for r in drafts[5]] == [gen.stats.accepted_per_step[3] + 2]
    assert gen.stats.drafted_per_step[5] <= 4  # the head arm's chain
    # skips are charged their share of the catch-ups (linear clock): step 3's forward of 3
    # positions held 1 each for skips 1 and 2 (skip 0 held none), step 5's held step 3's kept
    # positions (1 + a3) for skip 4 beside its own 1
    a3 = gen.stats.accepted_per_step[3]
    catch3, catch5 = 2e-4 + 1e-4 * 3, 2e-4 + 1e-4 * (2 + a3)
    verify1 = 1e-3 + 2e-4  # a skip step's own forward: the 1-token verification
    want = 4 * verify1 + catch3 * 2 / 3 + catch5 * (1 + a3) / (2 + a3)
    assert abs(drafter.counters()["bandit_skip_us"] - 1e6 * want) <= 4
    assert drafter.counters()["bandit_skip_pulls"] == 4
    ar = generate(
        prompt,
        CachedLM(tiny64.target),
        EmptyDrafter(),
        RecursiveRejection(),
        sampling=greedy,
        coins=TorchCoins(0),
        max_new_tokens=12,
    )
    assert gen.tokens == ar.tokens


def test_a_zero_priced_step_names_the_fix(tmp_path):
    drafter = _table_bandit(tmp_path, 20, arms={"skip": None})  # measured: a TableLM takes 0 s
    with pytest.raises(ValueError, match="drafter.costs"):
        generate(
            [0, 1, 2],
            TableLM(20, 1),
            drafter,
            RecursiveRejection(),
            sampling=Sampling(temperature=1.0),
            coins=TorchCoins(0),
            max_new_tokens=3,
        )


def test_eval_cli_records_the_arm_counters(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline"}
    cmd = [
        sys.executable,
        "-m",
        "specdec.eval",
        "model=tiny",
        "benchmark=tiny",
        "method=specblock_bandit",
        "max_new_tokens=16",
        "hydra.mode=RUN",
        f"hydra.run.dir={tmp_path}",
        "logger=none",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["method"] == "specblock_bandit" and summary["lossless"] is True
    for metrics in summary["datasets"].values():
        counters = metrics["counters"]
        pulls = sum(counters[f"bandit_{n}_pulls"] for n in ("skip", "head", "full"))
        assert pulls + counters["bandit_forced_steps"] == metrics["target_forwards"]


def test_bench_script_prints_the_bandit_and_every_fixed_arm(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline", "PYTHONPATH": str(ROOT)}
    cmd = [
        sys.executable,
        str(ROOT / "scripts" / "bench_bandit.py"),
        "--model",
        "tiny",
        "--benchmark",
        "tiny",
        "--limit",
        "2",
        "--max-new",
        "8",
        "--override",
        "threads=1",
        "--override",
        f"paths.output_dir={tmp_path}",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = {line.split()[0]: line.split() for line in proc.stdout.splitlines() if line.strip()}
    assert {"bandit", "skip", "head", "full"} <= set(rows)
    assert rows["skip"][1:5] == ["alone", "100%", "0%", "0%"]  # a fixed arm takes every step
    # greedy: the bandit and every fixed arm emit the same number of tokens (AR's)
    assert rows["bandit"][4] == rows["skip"][5] == rows["head"][5] == rows["full"][5]
    assert sum(int(x.rstrip("%")) for x in rows["bandit"][1:4]) in (99, 100, 101)
