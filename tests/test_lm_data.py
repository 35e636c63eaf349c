"""transformer_book.lm_data: windows and shifted targets, nanoGPT's split, sharded
batches that add up to the single-process batch, exact held-out evaluation."""

import pytest
import torch
from torch import nn

from transformer_book import lm_data

STREAM = torch.arange(1000) % 97  # a stream whose next token is predictable


def test_char_vocab_is_sorted_characters_without_specials():
    v = lm_data.char_vocab("hello world")
    assert v.itos == sorted(set("hello world"))
    assert v.encode(list("held")) == [3, 2, 4, 1]
    with pytest.raises(ValueError, match="non-empty"):
        lm_data.char_vocab("")


def test_split_keeps_the_first_ninety_percent_for_training():
    train, val = lm_data.split_stream(torch.arange(1001))
    assert len(train) == 900 and len(val) == 101
    assert train[-1] == 899 and val[0] == 900
    with pytest.raises(
        ValueError, match=r"train_fraction must be in \(0, 1\), got 1.5"
    ):
        lm_data.split_stream(torch.arange(10), 1.5)


def test_targets_are_inputs_shifted_by_one():
    x, y = lm_data.windows_at(STREAM, torch.tensor([0, 5, 900]), context=8)
    assert x.shape == y.shape == (3, 8)
    assert torch.equal(x[:, 1:], y[:, :-1])
    assert torch.equal(x[1], STREAM[5:13]) and torch.equal(y[1], STREAM[6:14])


def test_random_windows_reach_the_last_token_and_stay_inside():
    x, y = lm_data.random_windows(
        torch.arange(20), 2000, 8, torch.Generator().manual_seed(0)
    )
    assert int(y.max()) == 19 and int(x.min()) == 0


def test_batches_repeat_with_the_seed_and_differ_across_seeds():
    take = lambda seed: [
        b for b, _ in zip(lm_data.WindowBatches(STREAM, 4, 8, seed), range(3))
    ]
    a, b, c = take(0), take(0), take(1)
    assert all(torch.equal(p[0], q[0]) for p, q in zip(a, b))
    assert not torch.equal(a[0][0], c[0][0])


def test_ranks_share_out_the_single_process_batch():
    """2 ranks with batch b read exactly the windows 1 process with batch 2b reads."""
    single = iter(lm_data.WindowBatches(STREAM, 6, 8, seed=3))
    ranks = [
        iter(lm_data.WindowBatches(STREAM, 3, 8, 3, r, world_size=2)) for r in (0, 1)
    ]
    for _ in range(4):
        x, y = next(single)
        (x0, y0), (x1, y1) = next(ranks[0]), next(ranks[1])
        assert torch.equal(torch.cat([x0, x1]), x) and torch.equal(
            torch.cat([y0, y1]), y
        )


def test_sequential_windows_read_every_token_once():
    batches = lm_data.sequential_windows(torch.arange(103), context=10, batch_size=4)
    x = torch.cat([b[0] for b in batches])
    y = torch.cat([b[1] for b in batches])
    assert x.shape == (10, 10) and [len(b[0]) for b in batches] == [4, 4, 2]
    assert torch.equal(x.flatten(), torch.arange(100))
    assert torch.equal(y.flatten(), torch.arange(1, 101))


class Lookup(nn.Module):
    """Predicts the next token of STREAM from a table: a perfect or a uniform model."""

    def __init__(self, perfect: bool):
        super().__init__()
        table = torch.zeros(97, 97)
        if perfect:
            table[torch.arange(97), (torch.arange(97) + 1) % 97] = 50.0
        self.table = nn.Parameter(table)

    def forward(self, x):
        return self.table[x]  # (B, T, 97)


def test_loss_is_zero_for_a_perfect_model_and_log_v_for_a_uniform_one():
    val = lm_data.sequential_windows(STREAM, 16, 8)
    assert lm_data.mean_loss(Lookup(True), val) < 1e-6
    uniform = Lookup(False).train()
    assert lm_data.mean_loss(uniform, val) == pytest.approx(
        torch.log(torch.tensor(97.0))
    )
    assert uniform.training, "mean_loss restores the model's mode"
    loss = lm_data.next_token_loss(uniform, val[0])
    assert loss.requires_grad and loss.item() == pytest.approx(4.5747, abs=1e-4)


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="source must be a 1-D tensor of token ids"):
        lm_data.WindowBatches(torch.zeros(3, 4, dtype=torch.long), 2, 2)
    with pytest.raises(ValueError, match="too few for one window of context 8"):
        lm_data.random_windows(torch.arange(5), 1, 8)
    with pytest.raises(ValueError, match="need 0 <= rank < world_size, got rank=2"):
        lm_data.WindowBatches(STREAM, 2, 8, rank=2, world_size=2)
    with pytest.raises(
        ValueError, match="batch_size must be a positive integer, got 0"
    ):
        lm_data.WindowBatches(STREAM, 0, 8)
    with pytest.raises(ValueError, match="nothing to evaluate"):
        lm_data.mean_loss(Lookup(True), [])
