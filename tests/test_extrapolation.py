"""transformer_book.extrapolation: the tasks' targets, the Tagger's schemes, the
training recipe, the causal prefix and the new RoPE angles."""

import pytest
import torch

from transformer_book import extrapolation
from transformer_book.extrapolation import IGNORE


def test_make_batch_targets_are_the_token_offset_back_and_the_last_marker():
    ids, copy, marker = extrapolation.make_batch(
        4, 20, torch.Generator().manual_seed(0), offset=3, vocab_size=16, n_markers=4
    )
    assert ids.shape == copy.shape == marker.shape == (4, 20)
    assert (copy[:, :3] == IGNORE).all()
    torch.testing.assert_close(copy[:, 3:], ids[:, :-3])
    for b in range(4):  # a loop over positions: the most recent marker so far
        last = IGNORE
        for t in range(20):
            if ids[b, t] < 4:
                last = ids[b, t].item()
            assert marker[b, t].item() == last


def test_make_batch_rejects_an_offset_outside_the_sequence():
    with pytest.raises(ValueError, match="offset must be in 1 … T - 1 = 4, got 5"):
        extrapolation.make_batch(1, 5, torch.Generator(), offset=5)


def test_test_sets_are_seeded_by_length_and_train_batches_by_seed():
    a = extrapolation.test_sets(2, (8, 16))
    b = extrapolation.test_sets(2, (8, 16))
    assert a.keys() == {8, 16} and a[16][0].shape == (2, 16)
    assert all(torch.equal(x, y) for L in a for x, y in zip(a[L], b[L]))
    one, two = (extrapolation.train_batches(s, 3, 2, 8) for s in (0, 1))
    assert len(one) == 3 and not torch.equal(one[0][0], two[0][0])


@pytest.mark.parametrize("scheme", extrapolation.SCHEMES)
def test_tagger_is_causal_for_every_scheme(scheme):
    torch.manual_seed(0)
    model = extrapolation.Tagger(scheme, train_len=12, width=16, n_heads=2).eval()
    ids = torch.randint(0, 16, (2, 12))
    changed = ids.clone()
    changed[:, 7:] = (changed[:, 7:] + 1) % 16  # the future of position 6
    with torch.no_grad():
        out, out_changed = model(ids), model(changed)
    assert out.shape == (2, 12, 16)
    torch.testing.assert_close(out[:, :7], out_changed[:, :7])


def test_tagger_rejects_an_unknown_scheme_and_learned_stops_at_train_len():
    with pytest.raises(ValueError, match="scheme must be one of"):
        extrapolation.Tagger("absolute", train_len=8)
    model = extrapolation.Tagger("learned", train_len=8, width=16, n_heads=2)
    with pytest.raises(ValueError):
        model(torch.zeros(1, 9, dtype=torch.long))


def test_train_and_test_learns_copy_with_t5_and_reports_none_where_it_cannot_run():
    tests = extrapolation.test_sets(32, (16, 32), offset=1)
    batches = extrapolation.train_batches(0, 40, 16, 16, offset=1)
    shape = dict(train_len=16, width=16, n_heads=2)
    acc, _ = extrapolation.train_and_test(
        "T5 bias", extrapolation.TASKS["copy"], 0, batches, tests, 40, 2e-2, **shape
    )
    # chance is 1/16; at 32, only positions 16-31 count
    assert acc[16] > 0.2 and acc[32] > 0.1
    acc, model = extrapolation.train_and_test(
        "learned", extrapolation.TASKS["copy"], 0, batches, tests, 2, 2e-2, **shape
    )
    assert acc[32] is None and isinstance(model, extrapolation.Tagger)
    with pytest.raises(ValueError, match="task must be one of"):
        extrapolation.train_and_test("none", 0, 0, batches, tests, 1, 1e-3, **shape)


def test_far_attention_of_uniform_attention_is_the_uniform_share():
    torch.manual_seed(0)
    model = extrapolation.Tagger("none", train_len=8, width=16, n_heads=2)
    attn = model.encoder.layers[0].attn
    torch.nn.init.zeros_(attn.q_proj.weight)  # every score 0: uniform over the past
    torch.nn.init.zeros_(attn.q_proj.bias)
    ids = torch.randint(0, 16, (3, 16))
    uniform = sum((t - 8 + 1) / (t + 1) for t in range(8, 16)) / 8
    assert extrapolation.far_attention(model, ids, 8) == pytest.approx(
        uniform, abs=1e-5
    )
    with pytest.raises(ValueError, match="distance must be in 1 … T - 1 = 15, got 16"):
        extrapolation.far_attention(model, ids, 16)


def test_accuracy_counts_only_the_positions_from_start_on():
    model = lambda ids: torch.nn.functional.one_hot(ids, 16).float()  # echoes the ids
    ids = torch.tensor([[1, 2, 3, 4]])
    target = torch.tensor([[1, 2, 0, 0]])  # right on the first half, wrong after
    assert extrapolation.accuracy(model, ids, target) == pytest.approx(0.5)
    assert extrapolation.accuracy(model, ids, target, start=2) == 0.0
    with pytest.raises(ValueError, match="start must be in 0 … T - 1 = 3, got 4"):
        extrapolation.accuracy(model, ids, target, start=4)


def test_measure_copy_reports_every_scheme_at_both_lengths():
    measured = extrapolation.measure_copy(offset=1, n_test=8, train_len=16)
    assert set(measured) == set(extrapolation.SCHEMES)
    assert measured["learned"][1] is None  # no rows past train_len
    assert all(0 <= a <= 1 for a, _ in measured.values())


def test_best_constant_is_the_share_of_the_most_frequent_answer():
    target = torch.tensor([[IGNORE, 1, 1, 2], [3, 1, IGNORE, IGNORE]])
    assert extrapolation.best_constant(target) == pytest.approx(3 / 5)
    with pytest.raises(ValueError, match="at least one answer"):
        extrapolation.best_constant(torch.full((1, 3), IGNORE))


def test_train_schemes_is_the_chapters_loop_over_seeds_and_runs():
    tests = extrapolation.test_sets(8, (8, 16))
    shape = dict(train_len=8, width=8, n_heads=2, layers=1)
    runs = [
        ("none", "copy", "none", {}),
        ("RoPE", "last marker", "RoPE", {}),
        ("ALiBi, 2 layers", "copy", "ALiBi", {"layers": 2}),
    ]
    results, models = extrapolation.train_schemes(
        runs, [0, 1], tests, 2, 4, 1e-2, **shape
    )
    # chapter 4's old inline loop: per seed one set of batches, every run trained on it
    for seed in (0, 1):
        batches = extrapolation.train_batches(seed, 2, 4, 8, 3)
        for name, task, scheme, kw in runs:
            task_i, kwargs = extrapolation.TASKS[task], {**shape, **kw}
            acc, model = extrapolation.train_and_test(
                scheme, task_i, seed, batches, tests, 2, 1e-2, **kwargs
            )
            assert [results[name, task][L][seed] for L in (8, 16)] == [acc[8], acc[16]]
            if task == "copy":
                ref = model.state_dict()
                for key, value in models[name, seed].state_dict().items():
                    torch.testing.assert_close(value, ref[key], rtol=0, atol=0)
    assert set(models) == {(n, s) for n in ("none", "ALiBi, 2 layers") for s in (0, 1)}
    assert len(models["ALiBi, 2 layers", 0].encoder.layers) == 2  # kw overrides


def test_same_prefix_holds_for_a_causal_tagger_and_not_for_a_length_dependent_one():
    torch.manual_seed(0)
    ids = torch.randint(0, 16, (2, 12))
    model = extrapolation.Tagger("sinusoidal", train_len=8, width=8, n_heads=2)
    assert extrapolation.same_prefix(model, ids, 8)
    # a model that divides by the length: its first positions change with T
    assert not extrapolation.same_prefix(lambda x: model(x) / x.shape[1], ids, 8)
    with pytest.raises(ValueError, match="n must be in 1 … T = 12, got 13"):
        extrapolation.same_prefix(model, ids, 13)


def test_new_angle_gaps_are_zero_for_full_turns_and_large_for_slow_pairs():
    theta = torch.tensor([2 * torch.pi, 0.1], dtype=torch.float64)
    gaps = extrapolation.new_angle_gaps(theta, 4, 8)
    assert gaps[0] == pytest.approx(0, abs=1e-9)  # every angle is 0 again
    assert gaps[1] == pytest.approx(0.4)  # distance 7 is 0.4 rad past distance 3
    with pytest.raises(ValueError, match="need 0 < train_len < test_len"):
        extrapolation.new_angle_gaps(theta, 8, 8)
