"""transformer_book.deep_stacks: the stacked weights equal the FeedForward modules
they come from, the three update rules, what the gradients measure, the gains, the walk
over the grid and Adam's first step."""

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


def test_train_arms_keys_every_arm_at_every_depth_and_rejects_unknown_inits():
    teacher, train_x, dev_x, test_x = deep_stacks.teacher_task(4, 3, batch=4, n_eval=8)
    task = dict(seeds=range(2), teacher=teacher, train_x=train_x,
                eval_x=(dev_x, test_x))  # fmt: skip
    arms = [("plain", "default"), ("residual", "default")]
    lrs = [1e-3, 1e-2, 1e-1]
    test_loss, best_lr, tried = deep_stacks.train_arms([1, 2], arms, {"default": None},
                                                       lrs, **task)  # fmt: skip
    assert list(test_loss) == [(d, a) for d in (1, 2) for a in arms]
    for key, loss in test_loss.items():
        best, runs = deep_stacks.walk_the_grid(key[0], key[1][0], None, lrs, **task)
        assert best_lr[key] == lrs[best] and tried[key] == sorted(runs)
        torch.testing.assert_close(loss, runs[best][1])
    with pytest.raises(ValueError, match="missing \\['He'\\]"):
        deep_stacks.train_arms([1], [("plain", "He")], {"default": None}, lrs, **task)


def test_input_share_and_residual_growth_match_the_stacks_they_build():
    torch.manual_seed(3)
    share = deep_stacks.input_share(3, 4, range(2), n=16)
    torch.manual_seed(3)
    x = torch.randn(16, 4, dtype=torch.float64)
    W = deep_stacks.make_stacks(3, 4, None, range(2), torch.float64)
    y = deep_stacks.stack_forward(x, W, "plain").detach()
    assert share == ((y.amax(1) - y.amin(1)).amax() / y.abs().amax()).item()
    # α = 0: the branches add nothing, the stream keeps its second moment
    assert deep_stacks.residual_growth(4, 8, None, 0.0, range(2)) == pytest.approx(1)
    assert deep_stacks.residual_growth(4, 8, None, 1.0, range(2)) > 1
    with pytest.raises(ValueError, match="alpha must be >= 0"):
        deep_stacks.residual_growth(4, 8, None, -1.0, range(2))
