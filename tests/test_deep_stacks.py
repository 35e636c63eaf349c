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
