"""transformer_book.deep_stacks: the stacked weights equal the FeedForward modules
they come from, the three update rules, what the gradients measure, and chapter 6's
tagging task (numbering, padding, unseen tags, its prior)."""

import math

import pytest
import torch

from transformer_book import blocks, deep_stacks


def test_stacked_weights_compute_what_the_feed_forward_modules_compute():
    W = deep_stacks.make_stacks(3, 8, None, seeds=[5])
    torch.manual_seed(5)
    ffs = [blocks.FeedForward(8, 32) for _ in range(3)]  # the same draws
    x = torch.randn(4, 8)
    ref = x
    for ff in ffs:
        ref = torch.nn.functional.layer_norm(ref + ff(ref), (8,))
    y = deep_stacks.stack_forward(x, W, "residual + LayerNorm")
    assert y.shape == (1, 4, 8)
    torch.testing.assert_close(y[0], ref)
    ref_plain = x
    for ff in ffs:
        ref_plain = ff(ref_plain)
    torch.testing.assert_close(deep_stacks.stack_forward(x, W, "plain")[0], ref_plain)


def test_make_stacks_applies_init_and_rejects_bad_sizes():
    def zero_(ff):
        torch.nn.init.zeros_(ff.down_proj.weight)
        torch.nn.init.zeros_(ff.down_proj.bias)
        return ff

    W = deep_stacks.make_stacks(2, 4, zero_, seeds=range(3))
    assert [tuple(w.shape) for w in W] == [(3, 2, 4, 16), (3, 2, 1, 16), (3, 2, 16, 4),
                                           (3, 2, 1, 4)]  # fmt: skip
    x = torch.randn(5, 4)
    torch.testing.assert_close(deep_stacks.stack_forward(x, W, "residual"),
                               x.expand(3, 5, 4))  # fmt: skip
    with pytest.raises(ValueError, match="depth and d must be >= 1"):
        deep_stacks.make_stacks(0, 4, None, seeds=[0])
    with pytest.raises(ValueError, match="arch must be one of"):
        deep_stacks.stack_forward(x, W, "dense")


def test_gradients_skip_term_of_a_residual_stack_is_exactly_g():
    stats = deep_stacks.gradients(4, "residual", None, 16, seeds=range(2))
    assert stats.shape == (4, 2)
    torch.testing.assert_close(stats[2], torch.ones(2, dtype=torch.float64))
    assert (stats[1] >= 1).all()  # never below the skip term
    plain = deep_stacks.gradients(4, "plain", None, 16, seeds=range(2))
    assert (plain[2] == 0).all() and (plain[1] < 1).all()  # default init shrinks it


def test_train_stacks_learns_a_linear_teacher():
    gen = torch.Generator().manual_seed(0)
    A = torch.randn(8, 8, generator=gen) / 8**0.5
    train_x = torch.randn(150, 32, 8, generator=gen)
    test_x = torch.randn(256, 8, generator=gen)
    (loss,) = deep_stacks.train_stacks(
        2, "residual", None, 1e-2, range(2), lambda x: x @ A, train_x, [test_x]
    )
    assert loss.shape == (2,) and (loss < 0.2).all()  # 1.0: predicting the mean


def test_train_stacks_passes_eps_to_adam(monkeypatch):
    # a plain default stack of 16: layer 1's gradient is ~1e-12, far below Adam's
    # default ε = 1e-8. Adam's first step is lr·g/(|g| + ε): about lr·|g|/ε with the
    # default, lr·sign(g) with ε = 1e-20. One step, then read layer 1's W1 back.
    make, trained = deep_stacks.make_stacks, []

    def keep(*args, **kwargs):  # make_stacks, keeping the tensors train_stacks trains
        trained.append(make(*args, **kwargs))
        return trained[-1]

    monkeypatch.setattr(deep_stacks, "make_stacks", keep)
    gen = torch.Generator().manual_seed(0)
    train_x, test_x = torch.randn(1, 32, 8, generator=gen), torch.randn(16, 8)
    moved = {}
    for eps in (1e-8, 1e-20):
        deep_stacks.train_stacks(16, "plain", None, 1e-3, [0], torch.tanh, train_x,
                                 [test_x], eps=eps)  # fmt: skip
        start = make(16, 8, None, [0])[0][0, 0]  # layer 1's W1, at init
        moved[eps] = (trained[-1][0][0, 0] - start).abs().detach()
    assert moved[1e-8].max() < 1e-2 * 1e-3  # frozen: under 1 % of lr
    steps = moved[1e-20][moved[1e-20] > 0]  # entries with a gradient (ReLU alive)
    assert steps.numel() > 0.3 * moved[1e-20].numel()
    torch.testing.assert_close(steps, torch.full_like(steps, 1e-3))  # lr·sign(g)


def test_teacher_task_is_seeded_and_shaped():
    teacher, train_x, dev_x, test_x = deep_stacks.teacher_task(4, steps=3, n_eval=10)
    again = deep_stacks.teacher_task(4, steps=3, n_eval=10)
    assert train_x.shape == (3, 32, 4) and dev_x.shape == test_x.shape == (10, 4)
    torch.testing.assert_close(teacher(test_x), again[0](again[3]))
    assert not torch.equal(dev_x, test_x)


def _splits():
    from transformer_book.data import SlotIntentSplit

    train = SlotIntentSplit(
        sentences=[["fly", "to", "boston"], ["to", "denver"], ["fly"]],
        tags=[["O", "O", "B-to"], ["O", "B-to"], ["O"]],
        intents=["flight"] * 3,
    )
    dev = SlotIntentSplit(
        sentences=[["fly", "to", "paris"], ["fly", "now"]],
        tags=[["O", "O", "B-to"], ["O", "B-time"]],  # B-time: never seen in training
        intents=["flight"] * 2,
    )
    return train, dev


def test_tagging_task_numbers_pads_and_ignores_unseen_tags():
    task = deep_stacks.tagging_task(*_splits())
    IGNORE = -100
    assert task.train_ids.shape == task.train_tags.shape == (3, 3)
    assert task.train_lengths.tolist() == [3, 2, 1]
    assert task.train_tags[1, 2] == IGNORE and task.train_ids[1, 2] == task.words.pad_id
    assert task.dev_ids[0, 2] == task.words.unk_id  # "paris": never seen in training
    assert task.dev_tags[1, :2].tolist() == [task.tags.stoi["O"], IGNORE]
    assert task.unseen == 1
    ids, tags = task.probe(2)
    assert ids.shape == tags.shape == (2, 3)
    x, y = next(iter(task.dev_batches(batch_size=8)))
    assert x.shape == y.shape == (2, 3)
    assert sum(len(x) for x, _ in task.train_batches(2, seed=0)) == 3


def test_tagging_task_prior_is_the_add_one_unigram_loss():
    task = deep_stacks.tagging_task(*_splits())
    # training tags: O ×4, B-to ×2 -> add-one: p(O) = 5/8, p(B-to) = 3/8
    p = {"O": 5 / 8, "B-to": 3 / 8}
    scored = ["O", "O", "B-to", "O"]  # the dev tokens with a tag seen in training
    expected = -sum(math.log(p[t]) for t in scored) / len(scored)
    assert task.prior_loss() == pytest.approx(expected)


def test_tagging_task_rejects_bad_splits():
    train, dev = _splits()
    train.tags[0] = ["O", "O"]
    with pytest.raises(ValueError, match="sentence 0 has 3 words but 2 tags"):
        deep_stacks.tagging_task(train, dev)
    with pytest.raises(ValueError, match="n must be in 1..3"):
        deep_stacks.tagging_task(*_splits()).probe(4)


# --- chapter 6: reading the runs ---------------------------------------------------


def test_seed_summary_and_learned_count_diverged_and_flat_runs():
    losses = [1.0, 2.0, math.inf, 2.49]  # one diverged, one within 0.02 of the prior
    assert deep_stacks.seed_summary(losses, prior=2.5) == "1.830 ± 0.759  1† 1="
    assert deep_stacks.seed_summary([math.inf] * 2, prior=2.5) == "—  2† 0="
    assert deep_stacks.seed_summary([1.0], prior=2.5) == "1.000 ± 0.000  0† 0="
    assert deep_stacks.learned(losses, prior=2.5) == 2
    assert deep_stacks.learned(losses, prior=2.5, margin=1.0) == 1


def test_seed_verdict_is_compare_seeds_unless_a_run_diverged():
    from transformer_book import report

    before, after = [2.0, 2.1, 2.2, 2.05, 2.15], [1.0, 1.1, 1.2, 1.05, 1.15]
    got = deep_stacks.seed_verdict(before, after, pairs=True)
    assert got == report.compare_seeds(before, after, pairs=True)
    assert got == "lower for every seed"
    diverged = deep_stacks.seed_verdict(before, [*after[:4], math.inf])
    assert diverged == "a run diverged: no t-test"


def test_fisher_one_sided_counts_the_splits_at_least_this_lopsided():
    # 5 of 6 shallow runs learned, 0 of 5 deep ones: only the observed split is as
    # lopsided, C(6, 5) C(5, 0) of the C(11, 5) ways to deal out 5 successes
    assert deep_stacks.fisher_one_sided(5, 6, 0, 5) == pytest.approx(6 / 462)
    # 3 of 6 against 2 of 5: splits with 3, 4 or 5 successes in arm a
    expected = sum(math.comb(6, i) * math.comb(5, 5 - i) for i in (3, 4, 5)) / 462
    assert deep_stacks.fisher_one_sided(3, 6, 2, 5) == pytest.approx(expected)
    assert deep_stacks.fisher_one_sided(0, 6, 2, 5) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="0 <= k <= n"):
        deep_stacks.fisher_one_sided(7, 6, 0, 5)


def test_separation_words_name_the_depths_where_initialisations_keep_apart():
    t = torch.tensor
    post = {6: t([1.5, 2.0]), 12: t([1.0, 2.0]), 24: t([1.5, 3.0])}  # (seeds,) each
    pre = {6: t([0.9, 1.1]), 12: t([0.9, 1.1]), 24: t([1.0, 1.2])}  # 12: they overlap
    ratios = {(False, L): r for L, r in post.items()} | {
        (True, L): r for L, r in pre.items()
    }
    assert deep_stacks.separation_words(ratios) == (
        "every post-norm initialisation is more top-heavy than every pre-norm one at "
        "6, 24 blocks; at 12 blocks single ones overlap"
    )
    ratios[False, 12] = t([1.2, 2.0])
    assert deep_stacks.separation_words(ratios).endswith("at 6, 12, 24 blocks")
    overlap = {(first, 6): t([1.0, 2.0]) for first in (False, True)}
    assert deep_stacks.separation_words(overlap).startswith("single post-norm")


def test_spread_change_is_the_ratio_of_means_and_where_the_ranges_lie():
    t = torch.tensor
    ratio, words = deep_stacks.spread_change(t([1.0, 2.0]), t([3.0, 4.0]), 6, 24)
    assert ratio == pytest.approx(3.5 / 1.5)
    assert words == "with every initialisation at 24 blocks above every one at 6"
    _, words = deep_stacks.spread_change(t([3.0, 4.0]), t([1.0, 2.0]), 6, 24)
    assert "24 blocks below every one at 6" in words
    _, words = deep_stacks.spread_change(t([1.0, 3.0]), t([2.0, 4.0]), 6, 24)
    assert words.startswith("a change within the spread")


def test_grid_words_read_the_quick_and_the_full_grid():
    final = {
        ("post", 0.03, 0): [2.94, 3.0, 3.05],  # none more than 0.02 below the prior
        ("post", 0.03, 9): [3.0, 2.5, 2.94],  # one learned with a warm-up
        ("pre", 0.03, 0): [1.0, 1.2, 1.1],
    }
    words = deep_stacks.grid_words(final, prior=2.95, top=0.03, warmup=9, steps=36)
    assert words["post_level"] == "no post-norm run ended clearly below the prior"
    assert words["warm_text"] == (
        "With a warm-up over the first 9 steps, 1 of the 3 post-norm runs got below "
        "the prior (the best ended at 2.50): in 36 steps, this warm-up got some of "
        "them learning."
    )
    top = (words["top_lr"], words["pre_top"], words["post_top"])
    assert top == ("0.03", "1.10", "3.00")
    words = deep_stacks.grid_words(final, prior=3.5, top=0.03, warmup=9, steps=36)
    assert words["post_level"] == "3 of the 3 post-norm runs ended below the prior"
    assert words["warm_text"].startswith("With a warm-up over the first 9 steps, 3 of")
    words = deep_stacks.grid_words(final, prior=2.0, top=0.03, warmup=9, steps=36)
    assert words["post_level"].startswith("every post-norm run ended above the prior")
    assert "no post-norm run got below" in words["warm_text"]
    assert words["warm_text"].endswith("did not get the deep post-norm stack learning.")
    final |= {
        ("pre", 0.03, 9): [1.0, 1.4, 1.2],
        ("post", 1e-3, 0): [3.0, 2.0, 3.0],
        ("pre", 1e-3, 0): [2.0, 2.0, 3.0],
    }  # the full profile adds smaller rates and pre-norm with a warm-up
    words = deep_stacks.grid_words(final, prior=2.95, top=0.03, warmup=9, steps=36)
    assert words["warm_text"].endswith(
        "The pre-norm runs with that warm-up ended at 1.20 on average. At the "
        "smallest rate (0.001), 3 of the 6 runs of either kind got below the prior "
        "in 36 steps."
    )


def test_depth_words_read_the_split_and_its_p_value():
    words = deep_stacks.depth_words(5, 6, 0, 5, 6 / 462)
    assert words["depth_verdict"] == (
        "depth makes the difference here (Fisher's exact test: p = 0.01)"
    )
    assert words["k_deep"] == "none of the 5" and words["k_shallow"] == "5"
    assert words["shallow_rest"].startswith("The other 1 shallow runs did not")
    words = deep_stacks.depth_words(2, 2, 1, 5, 0.29)
    assert words["depth_verdict"].startswith("a hint that depth makes the trouble")
    assert words["depth_verdict"].endswith("probability 0.29 (Fisher's exact test)")
    assert words["k_deep"] == "1 of the 5"
    assert words["shallow_rest"] == "At 2 blocks, every run did."


def test_head_collapse_measures_what_the_head_reads_and_how_it_tags():
    from transformer_book import classifiers

    model = classifiers.deep_tagger(20, 5, 3, True, d_model=16, n_heads=2, d_ff=32)
    ids = torch.tensor([[3, 4, 5, 0], [6, 7, 0, 0]])
    keep = ids != 0
    cos, cos_head, share = deep_stacks.head_collapse(model, ids, keep, tag=2)
    # chapter 6's old inline code: the stream profile of the last block and the
    # encoder's output, and the share of real tokens whose arg-max is the tag
    enc = model.body.encoder
    _, (ref_cos, ref_head) = blocks.stream_profile(
        model, [enc.layers[-1], enc], ids, keep
    )
    with torch.no_grad():
        ref_share = (model(ids).argmax(-1)[keep] == 2).float().mean().item()
    assert (cos, cos_head, share) == (ref_cos, ref_head, ref_share)
    assert cos != cos_head  # pre-norm: the final norm centres the tokens
    shares = [deep_stacks.head_collapse(model, ids, keep, t)[2] for t in range(5)]
    assert sum(shares) == pytest.approx(1.0)  # every real token gets one tag


# --- chapter 3: gains, the walk over the grid, Adam's first step ---------------------


def test_sublayer_gains_are_the_chapters_second_moment_ratios():
    ff = blocks.FeedForward(64, 256)
    torch.manual_seed(0)
    forward, backward = deep_stacks.sublayer_gains(ff, n_tokens=512)
    torch.manual_seed(0)  # chapter 3's old inline code, the same draws
    x = torch.randn(512, 64, requires_grad=True)
    y = ff(x)
    g = torch.randn_like(y)
    y.backward(g)
    assert forward == (y.pow(2).mean() / x.pow(2).mean()).item()
    assert backward == (x.grad.pow(2).mean() / g.pow(2).mean()).item()
    assert 1 / 36 < forward < 1 / 9 and 1 / 36 < backward < 1 / 9  # about 1/18


def test_walk_the_grid_moves_downhill_and_trains_only_the_rates_it_visits(monkeypatch):
    dev_by_lr = {1: 0.9, 2: 0.5, 3: 0.7, 4: 0.8, 5: float("nan")}  # a minimum at 2
    trained = []

    def fake_train(depth, arch, init, lr, seeds, teacher, train_x, eval_x, eps):
        trained.append((lr, eps))
        return [torch.full((2,), dev_by_lr[lr]), torch.full((2,), 10.0 * lr)]

    monkeypatch.setattr(deep_stacks, "train_stacks", fake_train)
    task = dict(seeds=[0, 1], teacher=None, train_x=None, eval_x=None)
    best, runs = deep_stacks.walk_the_grid(4, "plain", None, [1, 2, 3, 4, 5], **task)
    assert best == 1 and sorted(runs) == [0, 1, 2, 3]  # the middle, then downhill
    assert sorted(lr for lr, _ in trained) == [1, 2, 3, 4]  # each visited rate once
    assert runs[best][1].tolist() == [20.0, 20.0]
    dev_by_lr.update({4: 0.1, 3: 0.6})  # now the best is at the top end, past a NaN
    trained.clear()
    best, _ = deep_stacks.walk_the_grid(
        4, "plain", None, [1, 2, 3, 4, 5], 1e-20, **task
    )
    assert best == 3 and {eps for _, eps in trained} == {1e-20}  # NaN counts as inf


def test_first_layer_gradients_match_the_chapters_old_inline_code():
    teacher, train_x, _, _ = deep_stacks.teacher_task(8, steps=1, batch=16)
    xb = train_x[0]  # (16, 8)
    got = deep_stacks.first_layer_gradients(3, "plain", None, [0, 1], teacher, xb)
    W = deep_stacks.make_stacks(3, 8, None, [0, 1])  # the same draws, in order
    head = torch.nn.Linear(8, 8)
    loss = (head(deep_stacks.stack_forward(xb, W, "plain")) - teacher(xb)).pow(2)
    loss.mean(dim=(1, 2)).sum().backward()
    ref = W[0].grad.abs().transpose(0, 1).flatten(1)  # (depth, S·d·4d)
    assert got.shape == (3, 2 * 8 * 32)
    torch.testing.assert_close(got, ref, rtol=0, atol=0)
    assert got[0].mean() < got[-1].mean()  # default init: the bottom gets less
