"""transformer_book.batching: every item once per epoch, similar lengths together."""

import pytest
import torch

from transformer_book.batching import (
    LengthBatches,
    PaddedBatches,
    pad_sequences,
    padding_share,
    sorted_batches,
)


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


def test_padded_batches_cut_each_batch_to_its_longest_row():
    lengths = torch.tensor([3, 1, 4, 2, 4, 1])
    ids = torch.zeros(6, 5, dtype=torch.long)
    for n, k in enumerate(lengths.tolist()):
        ids[n, :k] = n + 1  # row n holds n + 1, then padding
    tags = ids * 10  # one target per token
    batches = PaddedBatches(ids, lengths, tags, batch_size=2, seed=0)
    assert len(batches) == 3
    seen = []
    for x, y in batches:
        rows = x[:, 0] - 1  # which rows this batch holds
        assert x.shape[1] == int(lengths[rows].max()), "cut to the longest row"
        assert torch.equal(y, x * 10) and torch.equal(x, ids[rows, : x.shape[1]])
        seen += rows.tolist()
    assert sorted(seen) == list(range(6))
    labels = torch.arange(6)  # one target per row
    for x, y in PaddedBatches(ids, lengths, labels, batch_size=4, shuffle=False):
        assert torch.equal(y, x[:, 0] - 1)


def test_padded_batches_repeat_from_the_seed_and_augment_with_a_running_generator():
    lengths = torch.randint(1, 9, (40,), generator=torch.Generator().manual_seed(0))
    ids = torch.ones(40, 8, dtype=torch.long)

    def drop(x, gen):  # a stand-in for word dropout
        return x.masked_fill(torch.rand(x.shape, generator=gen) < 0.5, 0)

    def two_epochs(seed):
        batches = PaddedBatches(ids, lengths, lengths, 8, seed=seed, augment=drop)
        return [x for _ in range(2) for x, _ in batches]

    first, again = two_epochs(3), two_epochs(3)
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert any(not torch.equal(a, b) for a, b in zip(first, two_epochs(4)))
    # the generator runs on: the second epoch draws other masks than the first
    zeros = [int((x == 0).sum()) for x in first]
    assert zeros[:5] != zeros[5:10]


def test_sorted_batches_give_every_row_once_with_its_index_in_a_fixed_order():
    lengths = torch.tensor([5, 1, 3, 2])
    ids = torch.arange(20).view(4, 5)
    got = list(sorted_batches(ids, lengths, 3))
    assert [idx.tolist() for idx, _, _ in got] == [[1, 3, 2], [0]]
    idx, x, lens = got[0]
    assert x.shape == (3, 3) and lens.tolist() == [1, 2, 3]
    assert torch.equal(x, ids[idx, :3])


def test_padding_share():
    lengths = torch.tensor([1, 3, 2, 2])
    # batch [0, 1]: 2 x 3 positions, 4 real; batch [2, 3]: 4 positions, 4 real
    assert abs(padding_share(lengths, [torch.tensor([0, 1])]) - 2 / 6) < 1e-12
    assert padding_share(lengths, [torch.tensor([2, 3])]) == 0.0
    with pytest.raises(ValueError, match="index_batches is empty"):
        padding_share(lengths, [])


def test_padded_batches_bad_inputs_named():
    ids, lengths = torch.zeros(3, 4, dtype=torch.long), torch.tensor([1, 2, 3])
    with pytest.raises(ValueError, match=r"targets must be \(3,\) or \(3, T_max\)"):
        PaddedBatches(ids, lengths, torch.zeros(2), 2)
    with pytest.raises(ValueError, match=r"ids must be \(N, T_max\) and lengths"):
        PaddedBatches(ids, lengths[:2], lengths[:2], 2)
    with pytest.raises(ValueError, match=r"ids must be \(N, T_max\) and lengths"):
        list(sorted_batches(ids[0], lengths, 2))
