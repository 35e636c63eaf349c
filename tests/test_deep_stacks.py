"""transformer_book.deep_stacks: the stacked weights equal the FeedForward modules
they come from, the three update rules, and what the gradients measure."""

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


def test_teacher_task_is_seeded_and_shaped():
    teacher, train_x, dev_x, test_x = deep_stacks.teacher_task(4, steps=3, n_eval=10)
    again = deep_stacks.teacher_task(4, steps=3, n_eval=10)
    assert train_x.shape == (3, 32, 4) and dev_x.shape == test_x.shape == (10, 4)
    torch.testing.assert_close(teacher(test_x), again[0](again[3]))
    assert not torch.equal(dev_x, test_x)
