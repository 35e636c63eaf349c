"""transformer_book.masks: True = may attend, for separate query and key lengths."""

import pytest
import torch

from transformer_book import masks


def test_causal_square():
    m = masks.causal_mask(4)
    assert m.dtype == torch.bool
    assert torch.equal(
        m,
        torch.tensor(
            [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]], dtype=torch.bool
        ),
    )


def test_causal_queries_are_the_last_positions():
    m = masks.causal_mask(2, 5)  # two new tokens at positions 3 and 4
    assert torch.equal(
        m, torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    )
    assert masks.causal_mask(1, 10).all()


def test_causal_rejects_more_queries_than_keys():
    with pytest.raises(ValueError, match="n_queries=5, n_keys=3"):
        masks.causal_mask(5, 3)


def test_padding_mask_shape_and_values():
    m = masks.padding_mask(torch.tensor([3, 0, 5]), 5)
    assert m.shape == (3, 1, 1, 5)
    assert m[0, 0, 0].tolist() == [True, True, True, False, False]
    assert not m[1].any() and m[2].all()


def test_padding_mask_from_ids():
    ids = torch.tensor([[5, 6, 0, 0], [7, 0, 8, 0]])
    m = masks.padding_mask_from_ids(ids, pad_id=0)
    assert m.shape == (2, 1, 1, 4)
    assert m[1, 0, 0].tolist() == [True, False, True, False]


def test_padding_mask_bad_lengths():
    with pytest.raises(
        ValueError, match=r"lengths must lie in \[0, n_keys=4\], got \[2, 6\]"
    ):
        masks.padding_mask(torch.tensor([2, 6]), 4)
    with pytest.raises(ValueError, match="1-D integer tensor"):
        masks.padding_mask(torch.tensor([[1.0]]), 4)


def test_combined_masks_broadcast():
    m = masks.causal_mask(4) & masks.padding_mask(torch.tensor([4, 2]), 4)
    assert m.shape == (2, 1, 4, 4)
    assert m[1, 0, 3].tolist() == [True, True, False, False]
