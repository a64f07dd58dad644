"""Loop helpers: argmax_rows equals Tensor.argmax on every shape, tie and mask the loop meets;
common_prefix equals an element-by-element scan."""

from __future__ import annotations

import pytest
import torch

from specdec.rowops import argmax_rows


@pytest.mark.parametrize(
    "shape",
    [(5, 49152), (1, 49152), (49152,), (3, 4096), (4, 4097), (2, 8191), (3, 100), (2, 3, 5000)],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_equals_argmax_on_random_rows(shape, dtype):
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(sum(shape))).to(dtype)
    assert torch.equal(argmax_rows(x), x.argmax(-1))


def test_ties_masks_and_block_edges_give_the_first_max():
    x = torch.full((6, 9000), float("-inf"))
    x[0] = 0.0  # all equal: index 0
    x[1, [1023, 1024, 8999]] = 2.0  # tie across a block edge: the first
    x[2, 8999] = 1.0  # the max in the short last block, at its end
    x[3, torch.arange(0, 9000, 7)] = 1.0  # a reduced vocabulary: -inf elsewhere
    # x[4]: all -inf -> 0 ; x[5]: a NaN counts as the max
    x[5] = torch.arange(9000.0)
    x[5, 4500] = float("nan")
    assert torch.equal(argmax_rows(x), x.argmax(-1))
    assert argmax_rows(x).tolist() == [0, 1023, 8999, 0, 0, 4500]
    ints = torch.randint(0, 3, (8, 9000), generator=torch.Generator().manual_seed(1)).float()
    assert torch.equal(argmax_rows(ints), ints.argmax(-1))  # many ties per row
    # both paths (NumPy on fp32 CPU, block maxima on bfloat16): two NaNs -> the first; -0.0 ties 0.0
    y = torch.randn(3, 9000, generator=torch.Generator().manual_seed(2))
    y[0, [700, 6000]] = float("nan")
    y[1] = 0.0
    y[1, :5] = -0.0
    y[2, 8000] = float("nan")
    for z in (y, y.bfloat16(), y.t().contiguous().t()):  # the last: a strided view
        assert argmax_rows(z).tolist() == z.argmax(-1).tolist() == [700, 0, 8000]


def test_common_prefix_matches_an_element_by_element_scan():
    import random

    from specdec.reconcile import common_prefix

    def scan(a, b):
        n = min(len(a), len(b))
        return next((i for i in range(n) if a[i] != b[i]), n)

    rng = random.Random(0)
    for _ in range(3000):
        a = [rng.randint(0, 3) for _ in range(rng.randint(0, 300))]
        b = a[: rng.randint(0, len(a))] + [rng.randint(0, 3) for _ in range(rng.randint(0, 60))]
        assert common_prefix(a, b) == scan(a, b) == common_prefix(b, a)
