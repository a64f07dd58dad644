"""The EAGLE-3 nets keep RoPE's frequencies float32 in bfloat16 (``nets/eagle3/rotary.py``).

A bfloat16 ``inv_freq`` rounds each frequency by up to 2^-9 relatively: at position 4096 the
rotary phase ``t · inv_freq`` is then off by up to ~1.8 rad. Checked on the paths that cast a
drafter's net: the published-head loader (a bfloat16 checkpoint), ``Placement.place`` into a
bfloat16 pair, and ours (``Eagle3Net``); the phase at position 4096 must match a float32
``LlamaRotaryEmbedding`` within 1e-3 rad. Deterministic: no false-failure probability.
"""

from __future__ import annotations

import math

import pytest
import torch
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

from specdec.models.placement import Placement
from specdec.nets.eagle3.net import load_eagle3, new_eagle3
from specdec.nets.eagle3.rotary import keep_rotary_float32
from specdec.testing.eagle3_stub import write_stub

POSITION = 4096


def phase(rotary: torch.nn.Module, position: int = POSITION) -> torch.Tensor:
    """``[D]`` rotary phase at ``position`` (radians in (-pi, pi]) from the module's cos/sin
    for a float32 input."""
    x = torch.zeros(1, 1, 1, dtype=torch.float32)
    cos, sin = rotary(x, torch.tensor([[position]]))
    return torch.atan2(sin, cos)[0, 0]


def phase_error(rotary: torch.nn.Module) -> float:
    """Largest wrapped difference to a float32 ``LlamaRotaryEmbedding`` of the same config."""
    want = phase(LlamaRotaryEmbedding(config=rotary.config))
    diff = torch.remainder(phase(rotary) - want + math.pi, 2 * math.pi) - math.pi
    return float(diff.abs().max())


def test_a_bfloat16_published_head_keeps_float32_frequencies(tmp_path):
    head = write_stub(tmp_path / "head")
    state_file = head / "model.safetensors"
    from safetensors.torch import load_file, save_file

    save_file(
        {
            k: v.bfloat16() if v.is_floating_point() else v
            for k, v in load_file(str(state_file)).items()
        },
        str(state_file),
    )
    net = load_eagle3(head)
    rotary = net.decoder.rotary_emb
    assert next(net.parameters()).dtype == torch.bfloat16
    assert rotary.inv_freq.dtype == torch.float32
    assert phase_error(rotary) < 1e-3


@pytest.mark.parametrize("which", ["published", "specdec"])
def test_placement_into_a_bfloat16_pair_keeps_float32_frequencies(tiny32, tmp_path, which):
    net = (
        load_eagle3(write_stub(tmp_path / "head"))
        if which == "published"
        else new_eagle3(tiny32.target, torch.arange(0, 259, 2), [0, 1, 2])
    )
    placed = Placement.cpu(torch.bfloat16).place(net, "features")
    rotary = [m for m in placed.modules() if isinstance(m, LlamaRotaryEmbedding)]
    assert len(rotary) == 1 and next(placed.parameters()).dtype == torch.bfloat16
    assert rotary[0].inv_freq.dtype == rotary[0].original_inv_freq.dtype == torch.float32
    assert phase_error(rotary[0]) < 1e-3
    assert not any("inv_freq" in k for k in placed.state_dict())  # nothing new is saved


def test_a_bfloat16_cast_without_the_fix_drifts_and_the_fix_recovers(tiny32):
    rotary = LlamaRotaryEmbedding(config=tiny32.target.config).to(torch.bfloat16)
    assert phase_error(rotary) > 0.1  # what the guard prevents: the drift is real
    keep_rotary_float32(rotary)  # an already narrowed module is recomputed
    assert rotary.inv_freq.dtype == torch.float32 and phase_error(rotary) == 0.0
    rotary.to(torch.float64)  # widening is left alone
    assert rotary.inv_freq.dtype == torch.float64
