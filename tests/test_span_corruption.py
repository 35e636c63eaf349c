"""T5's span corruption (src/transformer_book/span_corruption.py) against the T5
paper's recipe, and the training pairs made from it: random windows of a stream,
span-corrupted, with the end token appended."""

import itertools
import math
from collections import Counter

import pytest
import torch

from transformer_book import span_corruption

EOS = 1


# --- the objective: noise_span_mask, span_corruption, merge_spans --------------------

SENTINELS = list(range(10_000, 10_400))
SENTINEL_SET = set(SENTINELS)


@pytest.mark.parametrize("length", [2, 3, 4, 7, 10, 20, 33, 64, 100, 512, 1000])
def test_span_corruption_counts_and_reconstruction(length):
    ids = torch.arange(3, 3 + length)
    for seed in range(40):
        gen = torch.Generator().manual_seed(seed)
        inputs, targets = span_corruption.span_corruption(
            ids, sentinel_ids=SENTINELS, generator=gen
        )
        n_noise = min(max(round(length * 0.15), 1), length - 1)
        n_spans = max(round(n_noise / 3.0), 1)
        assert len(targets) == n_noise + n_spans
        assert len(inputs) == length - n_noise + n_spans
        assert span_corruption.merge_spans(inputs, targets, SENTINELS) == ids.tolist()
        # sentinels in order, once each, in both; each target span is non-empty
        inputs, targets = inputs.tolist(), targets.tolist()
        in_s = [t for t in inputs if t in SENTINEL_SET]
        tg_s = [t for t in targets if t in SENTINEL_SET]
        assert in_s == tg_s == SENTINELS[:n_spans]
        assert targets[0] == SENTINELS[0]
        pairs = zip(inputs, inputs[1:])
        assert not any(a in SENTINEL_SET and b in SENTINEL_SET for a, b in pairs)
        assert targets[-1] not in SENTINEL_SET


@pytest.mark.parametrize("density, mean_span", [(0.15, 3.0), (0.5, 8.0), (0.3, 1.0)])
def test_noise_mask_counts(density, mean_span):
    for length in (5, 50, 128, 568):
        gen = torch.Generator().manual_seed(length)
        mask = span_corruption.noise_span_mask(length, density, mean_span, gen)
        n_noise = min(max(round(length * density), 1), length - 1)
        starts = mask & ~torch.cat((torch.zeros(1, dtype=torch.bool), mask[:-1]))
        assert mask.dtype == torch.bool and mask.shape == (length,)
        assert int(mask.sum()) == n_noise
        assert int(starts.sum()) == max(round(n_noise / mean_span), 1)
        assert not mask[0] and mask[-1]  # kept run first, corrupted span last


def test_t5_paper_setting():
    """512 tokens, 15 %, spans of 3: T5's 77 corrupted tokens in 26 spans (inputs of 461,
    targets of 103 tokens, before the eos)."""
    inputs, targets = span_corruption.span_corruption(
        torch.arange(512), sentinel_ids=SENTINELS, generator=torch.Generator()
    )
    assert (len(inputs), len(targets)) == (512 - 77 + 26, 77 + 26)


def test_every_segmentation_is_equally_likely():
    """6 noise tokens in 3 spans: the C(5, 2) = 10 ways to cut them are drawn alike."""
    gen = torch.Generator().manual_seed(0)
    counts = Counter(
        tuple(span_corruption._random_segmentation(6, 3, gen)) for _ in range(4000)
    )
    assert len(counts) == math.comb(5, 2)
    assert all(300 < c < 500 for c in counts.values())  # 400 expected each
    assert all(sum(k) == 6 and min(k) >= 1 for k in counts)


def test_mean_span_length_is_as_asked():
    gen = torch.Generator().manual_seed(0)
    lengths = []
    for _ in range(200):
        mask = span_corruption.noise_span_mask(512, 0.15, 3.0, gen).int()
        runs = torch.diff(torch.cat((torch.zeros(1), mask, torch.zeros(1))))
        starts, ends = (runs == 1).nonzero(), (runs == -1).nonzero()
        lengths += (ends - starts).flatten().tolist()
    assert abs(sum(lengths) / len(lengths) - 77 / 26) < 1e-9


def test_span_corruption_accepts_lists_and_is_seeded():
    ids = list(range(40))
    a = span_corruption.span_corruption(
        ids, sentinel_ids=SENTINELS, generator=torch.Generator().manual_seed(3)
    )
    b = span_corruption.span_corruption(
        ids, sentinel_ids=SENTINELS, generator=torch.Generator().manual_seed(3)
    )
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert a[0].dtype == a[1].dtype == torch.long


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda: span_corruption.span_corruption(
                list(range(100)), sentinel_ids=[7, 8]
            ),
            "sentinel_ids has 2 ids, but this sequence of 100 tokens has 5 corrupted spans",
        ),
        (
            lambda: span_corruption.span_corruption([5], sentinel_ids=SENTINELS),
            "length must be an integer >= 2",
        ),
        (
            lambda: span_corruption.span_corruption(
                torch.ones(2, 5), sentinel_ids=SENTINELS
            ),
            r"ids must be one sequence of shape \(L,\), got \(2, 5\)",
        ),
        (
            lambda: span_corruption.noise_span_mask(10, noise_density=1.5),
            r"noise_density must be in \(0, 1\)",
        ),
        (
            lambda: span_corruption.noise_span_mask(10, mean_span_length=0.5),
            "mean_span_length must be >= 1",
        ),
    ],
)
def test_span_corruption_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# --- training pairs: corrupted_windows, SpanCorruptionBatches ------------------------


def test_corrupted_windows_are_windows_of_the_stream_with_eos():
    stream = torch.arange(10, 310)  # every window is a run of consecutive ids
    gen = torch.Generator().manual_seed(0)
    src, tgt = span_corruption.corrupted_windows(stream, 5, 32, SENTINELS, EOS, gen)
    # 32 tokens: round(4.8) = 5 corrupted in round(5 / 3) = 2 spans
    assert src.shape == (5, 32 - 5 + 2 + 1) and tgt.shape == (5, 5 + 2 + 1)
    assert (src[:, -1] == EOS).all() and (tgt[:, -1] == EOS).all()
    for i, t in zip(src.tolist(), tgt.tolist()):
        merged = span_corruption.merge_spans(i[:-1], t[:-1], SENTINELS)
        assert merged == list(range(merged[0], merged[0] + 32))  # a real window
        assert merged[0] >= 10 and merged[-1] < 310


def test_corrupted_windows_are_seeded_and_reject_bad_input():
    stream = torch.arange(100)
    draw = lambda seed: span_corruption.corrupted_windows(
        stream, 3, 16, SENTINELS, EOS, torch.Generator().manual_seed(seed)
    )
    assert all(torch.equal(a, b) for a, b in zip(draw(4), draw(4)))
    assert not torch.equal(draw(4)[0], draw(5)[0])
    with pytest.raises(ValueError, match="longer than window=16"):
        span_corruption.corrupted_windows(stream[:16], 3, 16, SENTINELS, EOS)
    with pytest.raises(ValueError, match="n >= 1"):
        span_corruption.corrupted_windows(stream, 0, 16, SENTINELS, EOS)


def test_batches_are_endless_and_restart_with_the_seed():
    stream = torch.arange(200)
    batches = span_corruption.SpanCorruptionBatches(stream, 16, 4, SENTINELS, EOS, 7)
    first = list(itertools.islice(batches, 3))
    again = list(itertools.islice(batches, 3))
    assert all(s.shape == (4, 16 - 2 + 1 + 1) for s, _ in first)  # 2 noise, 1 span
    assert all(torch.equal(a[0], b[0]) for a, b in zip(first, again))
    assert not torch.equal(first[0][0], first[1][0])  # fresh windows every batch
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        span_corruption.SpanCorruptionBatches(stream, 16, 0, SENTINELS, EOS)


def test_left_neighbours_read_the_original_text():
    from transformer_book.span_corruption import corrupted_windows, left_neighbours

    stream = torch.arange(10, 60)  # word i is 10 + i: every left neighbour is word - 1
    gen = torch.Generator().manual_seed(0)
    src, tgt = corrupted_windows(stream, 8, 20, sentinel_ids=[1, 2, 3, 4], eos_id=0,
                                 generator=gen)  # fmt: skip
    left, hidden = left_neighbours(src, tgt, [1, 2, 3, 4], eos_id=0)
    assert len(hidden) == ((tgt >= 10).sum()).item() > 0
    assert torch.equal(left, hidden - 1)
    with pytest.raises(ValueError, match="same B"):
        left_neighbours(src, tgt[:3], [1, 2, 3, 4], 0)


def test_sentinels_in_order_needs_every_sentinel_then_the_end_token():
    S0, S1, EOS, PAD = 100, 101, 1, 0
    targets = torch.tensor([[S0, 5, S1, 6, EOS]] * 4)
    written = torch.tensor([
        [S0, 7, S1, 8, EOS, PAD],  # the format, other words: counts
        [S0, 7, 8, EOS, S1, PAD],  # S1 after the end token: does not
        [S1, 7, S0, 8, EOS, PAD],  # out of order
        [S0, 7, S1, 8, 9, 9],  # no end token
    ])  # fmt: skip
    ok = span_corruption.sentinels_in_order(written, targets, [S0, S1], EOS)
    assert ok == [True, False, False, False]


def test_span_lengths_are_the_runs_of_the_mask():
    mask = torch.tensor([True, False, True, True, False, False, True, True, True])
    assert span_corruption.span_lengths(mask) == [1, 2, 3]
    gen = torch.Generator().manual_seed(0)
    mask = span_corruption.noise_span_mask(512, 0.15, 3.0, gen)
    lengths = span_corruption.span_lengths(mask)
    assert sum(lengths) == 77 and len(lengths) == 26  # the counts are fixed


def test_round_trips_come_back_exactly_with_fixed_sizes():
    gen = torch.Generator().manual_seed(0)
    exact, sizes = span_corruption.round_trips([10, 512, 10], range(1000, 1100), gen)
    assert exact and set(sizes) == {10, 512}
    assert sizes[512] == {(512 - 77 + 26, 77 + 26)}  # 77 noise tokens in 26 spans
    again = span_corruption.round_trips([10, 512, 10], range(1000, 1100),
                                        torch.Generator().manual_seed(0))  # fmt: skip
    assert again == (exact, sizes)


def test_drawn_spans_count_every_span_and_the_last_token():
    spans, last = span_corruption.drawn_spans(512, 5, torch.Generator().manual_seed(0))
    assert len(spans) == 5 * 26 and sum(spans) == 5 * 77
    assert last == 5  # kept run first, noise run last: the last token is always hidden
    with pytest.raises(ValueError, match="n_draws"):
        span_corruption.drawn_spans(512, 0, torch.Generator())
