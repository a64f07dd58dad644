"""The weight-stationary CPU linear kernel (specdec/models/kernels.py): same numbers and params."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from specdec.lm import CachedLM
from specdec.models.kernel_probe import choose_linear_kernel
from specdec.models.kernels import (
    MAX_ROWS,
    PackedLinear,
    WeightStationaryLinear,
    apply_linear_kernel,
)
from specdec.models.tiny import tiny_pair


@pytest.mark.parametrize("rows", [1, 2, 3, 8, MAX_ROWS, MAX_ROWS + 1])
@pytest.mark.parametrize("bias", [False, True])
def test_weight_stationary_equals_f_linear(rows, bias):
    gen = torch.Generator().manual_seed(rows)
    layer = nn.Linear(24, 40, bias=bias, dtype=torch.float64)
    x = torch.randn(1, rows, 24, generator=gen, dtype=torch.float64)  # [1, M, I]
    want = F.linear(x, layer.weight, layer.bias)  # [1, M, O]
    apply_linear_kernel(layer, "weight_stationary")
    with torch.inference_mode():
        got = layer(x)
    assert type(layer) is WeightStationaryLinear and got.shape == want.shape
    torch.testing.assert_close(got, want, atol=1e-12, rtol=0)


def test_swap_keeps_parameters_ties_and_gradients():
    pair = tiny_pair(placement={"dtype": "float64", "linear_kernel": "stock"})
    model = pair.target
    model.config.tie_word_embeddings = True
    model.tie_weights()
    before = {k: v.data_ptr() for k, v in model.state_dict().items()}
    linears = sum(type(m) is nn.Linear for m in model.modules())
    assert apply_linear_kernel(model, "weight_stationary") == linears > 0
    assert {k: v.data_ptr() for k, v in model.state_dict().items()} == before
    assert model.lm_head.weight is model.model.embed_tokens.weight
    # With autograd on, the stock path runs and gradients reach the weights.
    out = model(input_ids=torch.tensor([[3, 4, 5]])).logits.sum()
    out.backward()
    assert model.lm_head.weight.grad is not None
    # Switching back restores plain nn.Linear; a second switch is a no-op.
    assert apply_linear_kernel(model, "stock") == linears
    assert apply_linear_kernel(model, "stock") == 0


def test_cached_forwards_agree_across_kernels():
    """Every decoding shape (1 token, chains, a tree) gives the same logits with both kernels."""
    stock = CachedLM(tiny_pair(placement={"dtype": "float64", "linear_kernel": "stock"}).target)
    fast = CachedLM(
        tiny_pair(placement={"dtype": "float64", "linear_kernel": "weight_stationary"}).target
    )
    assert type(fast.model.lm_head) is WeightStationaryLinear
    assert type(stock.model.lm_head) is nn.Linear
    steps = [
        (torch.arange(10, 30), None),
        (torch.tensor([7]), None),
        (torch.tensor([1, 2, 3, 4]), None),
        (torch.tensor([5, 6, 8]), torch.tensor([-1, 0, 0])),
    ]  # the last one is a tree
    for tokens, parent in steps:
        a, b = stock.forward(tokens, parent).logits, fast.forward(tokens, parent).logits
        torch.testing.assert_close(b, a, atol=1e-10, rtol=0)
        for lm in (stock, fast):
            lm.keep([0])


def test_kernel_names_and_fingerprint():
    with pytest.raises(ValueError, match="unknown linear_kernel 'fast'.*auto"):
        choose_linear_kernel("fast", [])
    # the tiny pair's weights stay in cache: not probed, packed (the real pairs' usual path)
    described = tiny_pair().describe()
    assert described["linear_kernel"] == "packed"
    assert described["linear_kernel_probe"].startswith("not probed: 0.")
    assert "linear_kernel_probe" not in tiny_pair(placement={"linear_kernel": "stock"}).describe()
    assert tiny_pair(placement={"linear_kernel": "stock"}).describe()["linear_kernel"] == "stock"


@pytest.mark.parametrize("rows", [1, 2, 3, 8])
def test_output_is_row_major(rows):
    # a transposed view would send q/k/v strided into attention: measured on SmolLM2, SDPA then
    # left its CPU flash kernel for the math path and a 2-token verify cost 1.6x a 1-token step
    layer = nn.Linear(16, 24)
    apply_linear_kernel(layer, "weight_stationary")
    with torch.inference_mode():
        out = layer(torch.randn(1, rows, 16))  # [1, M, 24]
    assert out.is_contiguous()


def test_chain_verify_forward_uses_the_flash_attention_kernel():
    from torch.profiler import profile

    pair = tiny_pair()
    apply_linear_kernel(pair.target, "weight_stationary")
    lm = CachedLM(pair.target)
    lm.forward(torch.arange(1, 20))
    with profile() as prof:
        lm.forward(torch.arange(20, 24))  # 4 new tokens: a causal mask over the cache
    names = {e.key for e in prof.key_averages()}
    assert "aten::_scaled_dot_product_flash_attention_for_cpu" in names
    assert "aten::_scaled_dot_product_attention_math" not in names


@pytest.mark.parametrize("rows", [1, 3, 8, MAX_ROWS, MAX_ROWS + 1])
def test_packed_equals_f_linear_and_follows_weight_updates(rows):
    gen = torch.Generator().manual_seed(rows)
    layer = nn.Linear(48, 80)
    x = torch.randn(1, rows, 48, generator=gen)  # [1, M, I] float32 (the packed path's dtype)
    apply_linear_kernel(layer, "packed")
    for _ in range(2):
        with torch.inference_mode():
            got = layer(x)
        want = F.linear(x, layer.weight, layer.bias)  # [1, M, O]
        assert type(layer) is PackedLinear and got.is_contiguous()
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
        with torch.no_grad():
            layer.weight.mul_(-2.0)  # the packed copy must be remade
    apply_linear_kernel(layer, "stock")
    assert "_packed" not in layer.__dict__


def test_cached_forwards_agree_with_the_packed_kernel_in_float32():
    stock = CachedLM(tiny_pair(placement={"linear_kernel": "stock"}).target)
    packed = CachedLM(tiny_pair(placement={"linear_kernel": "packed"}).target)
    assert type(packed.model.lm_head) is PackedLinear
    steps = [
        (torch.arange(10, 30), None),
        (torch.tensor([7]), None),
        (torch.tensor([1, 2, 3, 4, 9]), None),
        (torch.tensor([5, 6, 8, 2]), torch.tensor([-1, 0, 0, 1])),
    ]  # the last one is a tree
    for tokens, parent in steps:
        a, b = stock.forward(tokens, parent).logits, packed.forward(tokens, parent).logits
        torch.testing.assert_close(b, a, atol=1e-4, rtol=1e-4)
        for lm in (stock, packed):
            lm.keep([0])
