"""transformer_book.tiled_attention: exact attention, one tile at a time."""

import pytest
import torch
import torch.nn.functional as F

from transformer_book import attention, benchmark, masks
from transformer_book.tiled_attention import tiled_attention


def explicit(q, k, v, causal=False, window=None, scale=None):
    """The reference: the full score matrix, masked, softmax, times V."""
    Tq, Tk = q.shape[-2], k.shape[-2]
    mask = None
    if window is not None:
        mask = masks.sliding_window_mask(Tq, Tk, window=window, causal=causal)
    elif causal:
        mask = masks.causal_mask(Tq, Tk)
    return attention.scaled_dot_product_attention(q, k, v, mask=mask, scale=scale)[0]


def qkv(Tq, Tk, seed=0, batch=(2, 3), d_k=8, d_v=5):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(*batch, Tq, d_k, generator=gen)
    k = torch.randn(*batch, Tk, d_k, generator=gen)
    v = torch.randn(*batch, Tk, d_v, generator=gen)
    return q, k, v


@pytest.mark.parametrize("block_size", [1, 3, 16, 37, 64, 500])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("Tq,Tk", [(37, 37), (20, 45), (1, 30), (64, 64)])
def test_equals_explicit_attention(block_size, causal, Tq, Tk):
    q, k, v = qkv(Tq, Tk)
    got = tiled_attention(q, k, v, block_size=block_size, causal=causal)
    torch.testing.assert_close(got, explicit(q, k, v, causal), atol=1e-5, rtol=0)


@pytest.mark.parametrize("Tq,Tk", [(45, 20), (8, 30)])
def test_non_causal_any_lengths(Tq, Tk):
    q, k, v = qkv(Tq, Tk, seed=1)
    got = tiled_attention(q, k, v, block_size=7)
    torch.testing.assert_close(got, explicit(q, k, v), atol=1e-5, rtol=0)


def test_equals_torch_sdpa_and_custom_scale():
    q, k, v = qkv(50, 50, seed=2, batch=(1, 2))
    for causal in (False, True):
        ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=0.3)
        got = tiled_attention(q, k, v, 16, causal=causal, scale=0.3)
        torch.testing.assert_close(got, ref, atol=1e-5, rtol=0)


@pytest.mark.parametrize("window", [1, 4, 17, 200])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("block_size", [1, 5, 16])
def test_sliding_window_equals_masked_explicit(window, causal, block_size):
    q, k, v = qkv(33, 41, seed=3)
    got = tiled_attention(q, k, v, block_size, causal=causal, window=window)
    torch.testing.assert_close(
        got, explicit(q, k, v, causal, window), atol=1e-5, rtol=0
    )


def test_large_scores_do_not_overflow():
    """The running max keeps exp() finite where a naive exp(score) overflows."""
    q, k, v = qkv(30, 30, seed=4)
    q = q * 100.0  # scores in the hundreds: exp(score) = inf in fp32
    got = tiled_attention(q, k, v, block_size=8, causal=True)
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got, explicit(q, k, v, True), atol=1e-5, rtol=0)


def test_broadcast_batch_dims_and_gradients_agree():
    gen = torch.Generator().manual_seed(5)
    q = torch.randn(2, 4, 12, 6, generator=gen, dtype=torch.float64)
    k = torch.randn(1, 4, 12, 6, generator=gen, dtype=torch.float64)  # broadcasts
    v = torch.randn(1, 4, 12, 3, generator=gen, dtype=torch.float64)
    q.requires_grad_(), k.requires_grad_(), v.requires_grad_()
    got = tiled_attention(q, k, v, block_size=5, causal=True)
    ref = explicit(q, k, v, causal=True)
    assert got.shape == (2, 4, 12, 3)
    torch.testing.assert_close(got, ref)
    g_got = torch.autograd.grad(got.sum(), (q, k, v))
    g_ref = torch.autograd.grad(ref.sum(), (q, k, v))
    for a, b in zip(g_got, g_ref):
        torch.testing.assert_close(a, b)


def test_empty_inputs():
    q, k, v = qkv(0, 5)
    assert tiled_attention(q, k, v).shape == (2, 3, 0, 5)
    q, k, v = qkv(3, 0)
    assert torch.equal(tiled_attention(q, k, v), torch.zeros(2, 3, 3, 5))


def test_peak_memory_grows_linearly_not_quadratically():
    """Doubling T roughly doubles the tiled peak; the explicit path's roughly x4."""
    peaks = {}
    for T in (256, 512):
        q, k, v = qkv(T, T, batch=(1, 1), d_k=32, d_v=32)
        with torch.no_grad():
            peaks[T] = (
                benchmark.peak_bytes(lambda q=q, k=k, v=v: tiled_attention(q, k, v)),
                benchmark.peak_bytes(lambda q=q, k=k, v=v: explicit(q, k, v)),
            )
    tiled_ratio = peaks[512][0] / peaks[256][0]
    explicit_ratio = peaks[512][1] / peaks[256][1]
    assert tiled_ratio < 2.5 and explicit_ratio > 3.5, (tiled_ratio, explicit_ratio)
    assert peaks[512][0] < 512 * 512 * 4  # less than one T x T fp32 matrix


def test_bad_inputs():
    q, k, v = qkv(4, 6)
    with pytest.raises(ValueError, match="block_size must be an int >= 1, got 0"):
        tiled_attention(q, k, v, block_size=0)
    with pytest.raises(ValueError, match="block_size must be an int >= 1, got 2.0"):
        tiled_attention(q, k, v, block_size=2.0)
    with pytest.raises(ValueError, match="window must be None or an int >= 1"):
        tiled_attention(q, k, v, window=0)
    with pytest.raises(
        ValueError, match="window must be None or an int >= 1, got True"
    ):
        tiled_attention(q, k, v, window=True)
    with pytest.raises(ValueError, match="q and k must share their last dimension"):
        tiled_attention(q, k[..., :3], v)
    with pytest.raises(ValueError, match="needs Tq <= Tk, got Tq=6, Tk=4"):
        tiled_attention(k, q, q, causal=True)


def test_tiles_visited_counts_the_tiles_with_an_allowed_score():
    from transformer_book import tiled_attention as tiled

    assert tiled.tiles_visited(torch.ones(8, 8, dtype=torch.bool), 2) == 16
    assert (
        tiled.tiles_visited(masks.causal_mask(8), 2) == 4 * 5 // 2
    )  # the diagonal too
    # a window of 2 keys: the diagonal tiles and, for the first query of a block, the
    # last key of the block before
    assert tiled.tiles_visited(masks.sliding_window_mask(8, window=2), 2) == 4 + 3
    mask = masks.sliding_window_mask(256, window=64)
    n = 256 // 32  # chapter 08's former inline count
    inline = int(mask.view(n, 32, n, 32).any(dim=3).any(dim=1).sum())
    assert tiled.tiles_visited(mask, 32) == inline
    with pytest.raises(ValueError, match="multiple of 3"):
        tiled.tiles_visited(masks.causal_mask(8), 3)
