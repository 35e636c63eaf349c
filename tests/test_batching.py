"""transformer_book.batching: every item once per epoch, similar lengths together."""

import pytest
import torch

from transformer_book.batching import LengthBatches, pad_sequences


def test_each_epoch_covers_every_item_once_in_batches_of_similar_length():
    lengths = torch.randint(1, 40, (103,), generator=torch.Generator().manual_seed(0))
    batches = LengthBatches(lengths, batch_size=10, seed=1)
    assert len(batches) == 11
    epochs = [list(batches), list(batches)]
    for epoch in epochs:
        seen = torch.cat(epoch).sort().values
        assert torch.equal(seen, torch.arange(103))
        spread = [int(lengths[b].max() - lengths[b].min()) for b in epoch]
        assert max(spread) <= 8, "a batch holds neighbours in the length order"
    assert [b.tolist() for b in epochs[0]] != [b.tolist() for b in epochs[1]]


def test_padding_share_falls_when_grouped_by_length():
    lengths = torch.randint(1, 40, (500,), generator=torch.Generator().manual_seed(0))

    def pad_share(batches):
        real = sum(int(lengths[b].sum()) for b in batches)
        return 1 - real / sum(len(b) * int(lengths[b].max()) for b in batches)

    grouped = list(LengthBatches(lengths, 32))
    random = torch.randperm(500, generator=torch.Generator().manual_seed(0)).split(32)
    assert pad_share(grouped) < 0.1 < pad_share(random)


def test_unshuffled_is_fixed_and_sorted():
    lengths = torch.tensor([5, 1, 3, 2])
    assert [b.tolist() for b in LengthBatches(lengths, 2, shuffle=False)] == [
        [1, 3],
        [2, 0],
    ]


def test_bad_inputs_named():
    with pytest.raises(
        ValueError, match=r"lengths must be a non-empty 1-D integer tensor"
    ):
        LengthBatches(torch.tensor([1.5, 2.0]), 2)
    with pytest.raises(ValueError, match="batch_size must be >= 1, got 0"):
        LengthBatches(torch.tensor([1, 2]), 0)
    with pytest.raises(ValueError, match="at least one sequence"):
        pad_sequences([], 0)


def test_pad_sequences():
    ids, lengths = pad_sequences([[4, 5, 6], [7]], pad_id=0)
    assert ids.tolist() == [[4, 5, 6], [7, 0, 0]] and lengths.tolist() == [3, 1]
