"""Sharded exports (``export.max_shard_mib``, ``specdec/models/shards.py``): every weights file
under the limit, in the Hugging Face layout; the shipped-folder readers load a sharded folder as
they load a single file (same tensors, same network); a missing or truncated shard is refused
naming the file; a re-export in the other layout leaves no stale weights behind."""

from __future__ import annotations

import json

import pytest
import torch

from specdec.errors import BadInput, MissingInput
from specdec.models.shards import INDEX
from specdec.models.shipped import WEIGHTS

LAYERS = (0, 1, 2)
LIMIT_MIB = 0.05  # 52 KB shards: the tiny drafters (80 and 140 KB) take several


@pytest.fixture(scope="module")
def nets():
    from specdec.models.tiny import tiny_pair
    from specdec.nets.eagle3.net import load_eagle3
    from specdec.nets.specblock.store import load_specblock

    pair = tiny_pair()
    return (
        pair,
        load_eagle3("specdec/assets/eagle3/tiny", pair.target),
        load_specblock("specdec/assets/specblock/tiny", pair.target),
    )


def export_both(nets, root, limit):
    from specdec.nets.eagle3.net import save_eagle3
    from specdec.nets.specblock.store import save_specblock

    pair, eagle, block = nets
    save_eagle3(eagle, root / "e3", target_vocab=pair.target.config.vocab_size, max_shard_mib=limit)
    save_specblock(block, root / "sb", int8=["head.weight"], max_shard_mib=limit)


def test_a_sharded_export_loads_the_tensors_of_a_single_file(nets, tmp_path):
    from specdec.nets.eagle3.net import load_eagle3
    from specdec.nets.specblock.store import load_specblock

    pair = nets[0]
    export_both(nets, tmp_path / "one", None)
    export_both(nets, tmp_path / "many", LIMIT_MIB)
    for kind, load in (("e3", load_eagle3), ("sb", load_specblock)):
        one, many = tmp_path / "one" / kind, tmp_path / "many" / kind
        assert (one / WEIGHTS).is_file() and not (one / INDEX).exists()
        shards = sorted(many.glob("model-*-of-*.safetensors"))
        assert len(shards) >= 2 and not (many / WEIGHTS).exists()
        assert all(p.stat().st_size <= LIMIT_MIB * 2**20 for p in shards)
        index = json.loads((many / INDEX).read_text())
        assert set(index["weight_map"].values()) == {p.name for p in shards}
        a = load(one, pair.target).state_dict()
        b = load(many, pair.target).state_dict()
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_missing_or_truncated_shard_is_named(nets, tmp_path):
    from specdec.nets.eagle3.net import load_eagle3

    export_both(nets, tmp_path, LIMIT_MIB)
    folder = tmp_path / "e3"
    shard = sorted(folder.glob("model-*-of-*.safetensors"))[1]
    raw = shard.read_bytes()
    shard.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(BadInput, match=shard.name):
        load_eagle3(folder, nets[0].target)
    shard.unlink()
    with pytest.raises(MissingInput, match=shard.name):
        load_eagle3(folder, nets[0].target)


def test_a_re_export_in_the_other_layout_leaves_no_stale_weights(nets, tmp_path):
    from specdec.nets.eagle3.net import load_eagle3

    export_both(nets, tmp_path, None)
    (tmp_path / "e3" / "MODEL_CARD.md").write_text("card")
    export_both(nets, tmp_path, LIMIT_MIB)  # sharded over a single file: the card stays
    names = {p.name for p in (tmp_path / "e3").iterdir()}
    assert WEIGHTS not in names and INDEX in names and "MODEL_CARD.md" in names
    export_both(nets, tmp_path, None)  # and back
    names = {p.name for p in (tmp_path / "e3").iterdir()}
    assert names == {WEIGHTS, "config.json", "MODEL_CARD.md"}
    load_eagle3(tmp_path / "e3", nets[0].target)


def test_a_tensor_larger_than_a_shard_is_refused(nets, tmp_path):
    with pytest.raises(BadInput, match="max_shard_mib"):
        export_both(nets, tmp_path, 0.005)
