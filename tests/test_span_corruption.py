"""Training pairs for T5's objective (src/transformer_book/span_corruption.py): random
windows of a stream, span-corrupted, with the end token appended. The objective itself
(noise_span_mask, span_corruption, merge_spans) is tested in tests/test_t5.py."""

import itertools

import pytest
import torch

from transformer_book import span_corruption

SENTINELS = list(range(1000, 1010))
EOS = 1


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
