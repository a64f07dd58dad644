"""SpecBlock decoding (``drafters/specblock.py``, ``rank_tree.py``, ``block_lm.py``).

* the rank-guided tree rule on hand-made slot distributions: widths by class, give-up, stop
  tokens, depth limit, dedup, and the kept nodes' ancestor closure;
* the real drafter (random network, block 1 alone and with block 2) through the real engine on a
  TableLM target is lossless at T = 1 under the point-mass tree rules (exact enumeration);
* a drafter made for another target fails before generation, naming both sides and the fix;
* the cost model calibrates its block cache.
Greedy identity of ``method=specblock`` with the shipped tiny asset is in test_methods.py.
"""

from __future__ import annotations

import pytest
import torch

from specdec.core import TargetView
from specdec.drafters.candidates import Candidates
from specdec.drafters.policies import Fixed
from specdec.drafters.rank_tree import grow_block
from specdec.drafters.specblock import SpecBlockDrafter
from specdec.engine import generate
from specdec.lm import CachedLM
from specdec.models.placement import Placement
from specdec.models.tiny import tiny_lm
from specdec.nets.specblock.net import new_specblock
from specdec.nets.specblock.store import save_specblock
from specdec.sampling import Sampling
from specdec.testing.enumeration import enumerate_outcomes, max_abs_error
from specdec.testing.specblock_table import save_table_specblock
from specdec.testing.table_lm import TableLM, ar_joint
from specdec.verifiers import Hierarchical, RecursiveRejection

F64 = Placement.cpu(torch.float64)  # the drafters' nets next to the float64 targets

WIDTHS = (1, 2, 3, 0)


def _logp(rows: list[list[float]]) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float64).log_softmax(-1)


LOGP = _logp([[5, 4, 1, 0, 0], [0, 6, 5, 4, 0], [3, 0, 2, 1, 0]])  # [K=3, V_d=5]
TMAP = torch.tensor([10, 11, 12, 13, 14])  # draft id -> target token


def test_widths_follow_the_rank_classes_and_give_up_truncates():
    tree = Candidates()
    leaves, gave_up = grow_block(tree, LOGP, [0, 1, 3], TMAP, widths=WIDTHS, depth_limit=8)
    # slot 0 (class 0): greedy only; slot 1 (class 1): greedy + 1 sibling; slot 2 gives up
    assert tree.token == [10, 11, 12] and tree.parent == [-1, 0, 0] and gave_up
    assert tree.score[1] == pytest.approx(float(LOGP[0, 0] + LOGP[1, 1]))
    assert tree.score[2] == pytest.approx(float(LOGP[0, 0] + LOGP[1, 2]))
    assert [(leaf.node, leaf.slot) for leaf in leaves] == [(2, 1)]  # no chain end after give-up


def test_root_width_stop_tokens_depth_limit_and_chain_end():
    tree = Candidates()
    leaves, gave_up = grow_block(
        tree, LOGP, [3, 2, 0], TMAP, widths=WIDTHS, root_width=2, depth_limit=8
    )
    # slot 0 takes root_width 2 despite its give-up class; slot 1 (class 2) three tokens
    assert tree.token == [10, 11, 11, 12, 13, 10] and not gave_up
    assert tree.parent == [-1, -1, 0, 0, 0, 2]
    assert [(leaf.node, leaf.slot) for leaf in leaves] == [(1, 0), (3, 1), (4, 1), (5, 2)]
    stopped = Candidates()
    leaves, _ = grow_block(
        stopped, LOGP, [0, 0, 0], TMAP, widths=WIDTHS, depth_limit=8, stop_ids=frozenset({11})
    )
    assert stopped.token == [10, 11] and leaves == []  # nothing below a stop token
    short = Candidates()
    grow_block(short, LOGP, [0, 0, 0], TMAP, widths=WIDTHS, depth_limit=2)
    assert max(short.depth) == 2


def test_keep_best_keeps_ancestors_and_orders_by_depth():
    tree = Candidates()
    leaves, _ = grow_block(tree, LOGP, [0, 2, 2], TMAP, widths=WIDTHS, depth_limit=8)
    grow_block(tree, LOGP, [1, 0, 0], TMAP, widths=WIDTHS, parent=leaves[0].node, depth_limit=8)
    assert tree.add(tree.token[1], 0, -9.0) is None  # a duplicate child is refused
    for total in range(1, len(tree.token) + 1):
        kept = tree.best(total)
        assert len(kept) == total and all(
            tree.parent[i] in kept or tree.parent[i] < 0 for i in kept
        )
        assert [tree.depth[i] for i in kept] == sorted(tree.depth[i] for i in kept)
        best = sorted(tree.score, reverse=True)[total - 1]
        assert min(tree.score[i] for i in kept) == pytest.approx(best)


def _table_drafter(tmp_path, vocab: int, *, max_blocks: int) -> SpecBlockDrafter:
    """The real drafter with a seeded random network shaped for a TableLM (hidden = V)."""
    path = save_table_specblock(tmp_path / "sb", vocab)
    return SpecBlockDrafter(
        Fixed(4),
        path,
        widths=(1, 2, 2, 0),
        root_width=2,
        total_tokens=9,
        max_blocks=max_blocks,
        beam=2,
        placement=F64,
    )


@pytest.mark.parametrize("verifier", [RecursiveRejection(), Hierarchical()])
@pytest.mark.parametrize("max_blocks", [1, 2])
def test_drafter_is_lossless_at_t1_through_the_engine(tmp_path, verifier, max_blocks):
    vocab, prompt, length = 20, [0, 1, 2], 3
    sampling, target = Sampling(temperature=1.0, top_k=3), TableLM(vocab, 1, scale=2.0)
    drafter = _table_drafter(tmp_path, vocab, max_blocks=max_blocks)
    seen = {"branched": 0, "accepted": 0}

    def run(coins):
        out = generate(
            prompt, target, drafter, verifier, sampling=sampling, coins=coins, max_new_tokens=length
        )
        seen["accepted"] += out.stats.accepted
        seen["branched"] += drafter.counters()["block2_forwards"]
        return tuple(out.tokens)

    got = enumerate_outcomes(run)
    assert max_abs_error(got, ar_joint(target, prompt, length, sampling)) < 1e-12
    assert seen["accepted"] > 0  # drafts were really accepted on some paths
    assert (seen["branched"] > 0) == (max_blocks == 2)


def test_drafter_refuses_another_target_before_generating(tiny64, tmp_path):
    vocab = tiny64.target.config.vocab_size
    net = new_specblock(
        tiny64.target, torch.arange(vocab), (0, 1, 2), slots=3, layers=1, rank_hidden=8
    )
    save_specblock(net, tmp_path / "sb")
    greedy = Sampling(temperature=0.0)
    # the command writes the drafter's own folder (without export.*: <run>/export/)
    fix = (
        ".*retrain it with `python -m specdec.train \\+experiment=specblock_<model> "
        f"export\\.folder={tmp_path / 'sb'} export\\.force=true`"
    )
    cases = [
        (
            tiny_lm(vocab, hidden=16, layers=2, heads=2, seed=0, dtype=torch.float64),
            "SpecBlock drafter .* hidden size 32, but this target has 16" + fix,
        ),
        (
            tiny_lm(vocab + 5, hidden=32, layers=2, heads=2, seed=0, dtype=torch.float64),
            # the engine's own check comes first: the drafts' token ids are the target's
            f"target vocabulary size {vocab + 5} != draft vocabulary size {vocab}",
        ),
        (
            tiny_lm(vocab, hidden=32, layers=1, heads=2, seed=0, dtype=torch.float64),
            r"SpecBlock drafter .* reads target layers \[2\], but this target has 1 layers" + fix,
        ),
    ]
    for other, message in cases:
        drafter = SpecBlockDrafter(Fixed(3), str(tmp_path / "sb"))
        with pytest.raises(ValueError, match=message):
            generate(
                [5, 6, 7],
                CachedLM(other),
                drafter,
                RecursiveRejection(),
                sampling=greedy,
                coins=None,
                max_new_tokens=4,
            )
        assert not drafter.lm.forward_log  # refused before any draft forward
    with pytest.raises(FileNotFoundError, match=r"\+experiment=specblock_tiny"):
        SpecBlockDrafter(Fixed(3), str(tmp_path / "none"), experiment="specblock_tiny")
    with pytest.raises(ValueError, match="4 widths"):
        SpecBlockDrafter(Fixed(3), str(tmp_path / "sb"), widths=(1, 2))


def test_cost_model_calibrates_the_block_cache(tiny64, tmp_path):
    from specdec.bench.run.calibration import calibrate

    vocab = tiny64.target.config.vocab_size
    save_specblock(
        new_specblock(tiny64.target, torch.arange(vocab), (0, 1, 2), rank_hidden=8), tmp_path / "sb"
    )
    drafter = SpecBlockDrafter(Fixed(3), str(tmp_path / "sb"), placement=F64)
    drafter.attach(TargetView(CachedLM(tiny64.target)))
    table = calibrate(
        CachedLM(tiny64.target), drafter.lm, max_new=2, repeats=2, ref_context=8, far_context=16
    )
    assert set(table.times) == {"target", "draft"} and all(
        t > 0 for t in table.times["draft"].values()
    )
    assert drafter.lm.positions == 0 and not drafter.lm.forward_log  # left clean
