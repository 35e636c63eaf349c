# ---
# jupyter:
#   jupytext:
#     cell_metadata_filter: tags,mystnb,-all
#     formats: ipynb,py:percent
#     notebook_metadata_filter: kernelspec,jupytext,-jupytext.text_representation.jupytext_version
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 3. The encoder block
#
# Multi-head attention (chapter 2) lets every token gather information from the others.
# On its own it is not yet a layer you can stack dozens of times. The transformer's
# encoder block {cite}`vaswani2017attention` wraps it with three more ingredients: a
# residual connection, layer normalisation and a feed-forward network. After this
# chapter you will be able to:
#
# - predict, from the initialisation alone, how fast gradients vanish in a plain deep
#   stack, and measure what residual connections add beyond that (an identity path for
#   the gradient) and what they do not (a sensible scale); in this chapter's short
#   training runs, the residual stacks whose branches start small trained well and
#   those whose branches start as large as the stream did not, and a plain deep stack
#   stalled mainly because Adam's $\epsilon$ swamped the tiny gradients its
#   initialisation produced;
# - write LayerNorm from scratch and say how it differs from BatchNorm, in training and
#   in evaluation;
# - assemble the post-norm block ("Add & Norm", with dropout) and check it against
#   `torch.nn.TransformerEncoderLayer` with copied weights;
# - stack blocks into an encoder;
# - count a transformer's parameters in closed form, and show that the count does not
#   depend on how long the input is.

# %% tags=["remove-cell"]
# Colab: install this book's package. Apple silicon: let operations that MPS lacks run
# on the CPU (torch reads the variable when it is imported). Nothing else, elsewhere.
import os
import sys

os.environ.setdefault("PYTORCH_ENABLE_MPS_FALLBACK", "1")
if "google.colab" in sys.modules:
    import subprocess

    repo = "https://github.com/transformers-step-by-step/transformers-step-by-step"
    pip = [sys.executable, "-m", "pip", "install", "-q"]
    subprocess.run([*pip, f"transformer-book @ git+{repo}"], check=True)

# %%
import math
from functools import partial

import matplotlib.pyplot as plt
import torch
from torch import nn

from transformer_book import (
    attention,
    benchmark,
    blocks,
    checks,
    deep_stack_readings,
    deep_stacks,
    diagrams,
    masks,
    norms,
    params,
    report,
    runtime,
)


def show(t: torch.Tensor, digits: int = 3):
    """A tensor as a rounded NumPy array for printing (without the sign of -0.0)."""
    return t.detach().cpu().numpy().round(digits) + 0.0


# %% tags=["parameters"]
device = "auto"  # "auto": CUDA, else Apple MPS, else the CPU
profile = "auto"  # "auto": quick on every device; "full" by name

# %%
run = runtime.setup(device, profile, seed=0, cpu_threads=1)
print(run)
# small sizes for the block: the checks below take milliseconds
d_model, n_heads, d_ff = 16, 4, 64
# gradients through deep stacks: depths 1, 2, 4, ..., the stacks' width, seeds
depths = [2**k for k in range(run.pick(quick=7, full=8))]
grad_width = run.pick(quick=64, full=256)
n_seeds = run.pick(quick=3, full=5)
# training deep stacks: depths, width, Adam updates
train_depths = run.pick(quick=[2, 16], full=[2, 16, 64])
train_width, train_steps = run.pick(quick=(16, 100), full=(32, 500))
print("depths:", depths, " trained at depths:", train_depths)

# %% [markdown]
# ## The block at a glance
#
# For an input $X$ of shape (B, T, d_model), the encoder block of the original paper
# computes
#
# $$
# H = \mathrm{LayerNorm}\big(X + \mathrm{MultiHead}(X)\big), \qquad
# Y = \mathrm{LayerNorm}\big(H + \mathrm{FFN}(H)\big).
# $$
#
# Each line is a sublayer ("MultiHead", then "FFN") followed by what the paper's figure
# calls **Add & Norm**: add the sublayer's input back to its output, then normalise.
# The output has the same shape as the input, so the block can be repeated $N$ times.

# %% tags=["hide-input"] mystnb={"image": {"alt": "The post-norm encoder block drawn bottom to top. The input x of shape (B, T, d_model) goes through multi-head self-attention and dropout; a residual path carries x around both to an addition, followed by LayerNorm (Add & Norm). The same pattern repeats with the feed-forward network. A dashed frame marks the block, repeated N times; the output has the shape of the input."}}
diagrams.blocks.encoder_block(norm_first=False)
plt.show()

# %% [markdown]
# Here is the package's block, which this chapter takes apart piece by piece. The
# `Dropout` entries are switched off (p = 0) here; section 4 explains them.

# %%
block = blocks.EncoderBlock(d_model, n_heads, d_ff)
x = torch.randn(2, 5, d_model)  # (B, T, d_model): 2 sentences of 5 tokens
print("in: ", tuple(x.shape))
print("out:", tuple(block(x).shape))
print(block)

# %% [markdown]
# ## 1. Residual connections
#
# A residual (or skip) connection {cite}`he2016deep` adds a sublayer's input to its
# output:
#
# $$
# y = x + F(x).
# $$
#
# The sublayer $F$ only has to learn a *change* to $x$; doing nothing is as easy as
# setting $F$ to zero. In backpropagation, the Jacobian of $y$ with respect to $x$ is
#
# $$
# \frac{\partial y}{\partial x} = I + \frac{\partial F}{\partial x},
# $$
#
# so besides whatever path leads through $F$, the identity passes the gradient through
# unchanged. Let us confirm the formula on a small sublayer (a two-layer MLP, the
# feed-forward network of section 3):

# %%
sublayer = blocks.FeedForward(4, 8)
x1 = torch.randn(4)  # one token with 4 features
J_F = torch.autograd.functional.jacobian(sublayer, x1)  # (4, 4): ∂F/∂x
# (4, 4): ∂(x + F(x))/∂x
J_res = torch.autograd.functional.jacobian(lambda v: v + sublayer(v), x1)
torch.testing.assert_close(J_res, torch.eye(4) + J_F)
print("∂(x + F(x))/∂x == I + ∂F/∂x:", torch.allclose(J_res, torch.eye(4) + J_F))

# %% [markdown]
# Through $L$ stacked sublayers the chain rule multiplies $L$ such Jacobians. Without
# the identity, the product $\prod_l \partial F_l / \partial x$ shrinks or grows
# geometrically with $L$, at a rate set by how much each sublayer scales what passes
# through it. At the start of training that rate is set by the initialisation, so we
# work it out before we test what the residual connection changes.
#
# ### One sublayer at initialisation
#
# `nn.Linear(fan_in, fan_out)` draws every weight (and bias) uniformly from
# $[-1/\sqrt{\text{fan\_in}},\, 1/\sqrt{\text{fan\_in}}]$, a distribution of variance
# $1/(3\,\text{fan\_in})$. Follow the second moment $q = \mathbb{E}[x_i^2]$ of a token
# through the feed-forward sublayer $d \to 4d \to d$ (the biases are small; we ignore
# them here, exactly so for the gradient, which they do not touch; section 1's table
# shows where they matter for the forward pass):
#
# - `up_proj` sums $d$ products of a weight and an input: $d \cdot \frac{1}{3d}\, q =
#   q/3$;
# - the ReLU zeroes the negative half of a symmetric distribution and keeps half the
#   second moment: $q/6$;
# - `down_proj` sums $4d$ products: $4d \cdot \frac{1}{12 d} \cdot \frac{q}{6} =
#   q/18$.
#
# Backpropagation multiplies by the same matrices, transposed, and the same ReLU mask,
# so the gradient's second moment shrinks by the same factor,
# $\frac{d}{12d} \cdot \frac{1}{2} \cdot \frac{4d}{3d} = \frac{1}{18}$. Measured on one
# sublayer of width 256 and 4,096 random tokens (`deep_stacks.sublayer_gains` sends
# them forward and a random gradient back):

# %% tags=["nbval-ignore-output"]
gains = deep_stacks.sublayer_gains  # (forward, backward): second moment out / in
wide_ff = blocks.FeedForward(256, 4 * 256)  # PyTorch's default initialisation
w_var, (fwd, bwd) = wide_ff.up_proj.weight.var().item(), gains(wide_ff)
print(f"variance of up_proj's weights {w_var:.3e}, 1/(3·fan_in) = {1 / (3 * 256):.3e}")
print(
    f"second moment out/in: forward {fwd:.4f}, backward {bwd:.4f}; 1/18 = {1 / 18:.4f}"
)
assert abs(w_var * 3 * 256 - 1) < 0.02
assert abs(18 * fwd - 1) < 0.1 and abs(18 * bwd - 1) < 0.1

# %% [markdown]
# The gradient's norm therefore shrinks by $\sqrt{18}$ per sublayer. The gradient that
# reaches the first sublayer of a plain stack of 64 passes back through the other 63:

# %%
shrink = math.sqrt(18)  # per sublayer, for the gradient's norm
print(f"√18 = {shrink:.2f}; √18^63 = 10^{63 * math.log10(shrink):.1f}")

# %% [markdown]
# That many orders of magnitude, from the initialisation alone. A fair test of residual
# connections must separate their effect from this one.
#
# ### A variance-preserving initialisation
#
# He et al. {cite}`he2015delving` choose the weights' variance so that the second
# moment survives a layer followed by a ReLU: $2/\text{fan\_in}$, twice what the ReLU
# takes away. `down_proj` has no ReLU after it, so it gets $1/\text{fan\_in}$, and the
# biases start at zero. The sublayer's gain is then
# $d \cdot \frac{2}{d} \cdot \frac{1}{2} \cdot 4d \cdot \frac{1}{4d} = 1$, forward and
# backward. Below, "He" names this initialisation and "default" PyTorch's.


# %% tags=["nbval-ignore-output"]
def he_init_(ff: blocks.FeedForward) -> blocks.FeedForward:
    """Variance-preserving init, in place: 2/fan_in before the ReLU, 1/fan_in after."""
    nn.init.kaiming_normal_(ff.up_proj.weight, nonlinearity="relu")  # 2 / d
    nn.init.normal_(ff.down_proj.weight, std=ff.d_ff**-0.5)  # 1 / (4d)
    nn.init.zeros_(ff.up_proj.bias)
    nn.init.zeros_(ff.down_proj.bias)
    return ff


fwd, bwd = gains(he_init_(wide_ff))
print(f"He init, second moment out/in: forward {fwd:.3f}, backward {bwd:.3f}")
assert abs(fwd - 1) < 0.1 and abs(bwd - 1) < 0.1

# %% [markdown]
# ### Gradients through deep stacks
#
# **Experiment.** Stack $L$ feed-forward sublayers in three ways: *plain*,
# $x \leftarrow F(x)$; *residual*, $x \leftarrow x + F(x)$; and *residual +
# LayerNorm*, $x \leftarrow \mathrm{LayerNorm}(x + F(x))$, the Add & Norm of the block
# (torch's `layer_norm`, which section 2 checks against ours). Initialise each both
# ways. Send a random gradient $g$ down from the top, i.e. backpropagate
# $\ell = \sum g \odot y$ with $y$ the stack's output, and measure the norm of the
# gradient that reaches the first layer's weights,
# $\lVert \partial \ell / \partial W_1^{(1)} \rVert$, and the stack's input,
# $\lVert \partial \ell / \partial x \rVert$. We compute in float64 so that tiny
# gradients do not underflow to zero.
#
# To run all seeds at once, `deep_stacks.make_stacks` stacks the weights of one stack
# per seed along a leading seed axis $S$ (each stack still built from
# `blocks.FeedForward` modules); the matrix products then run every seed's stack side
# by side. `deep_stacks.stack_forward` applies the three update rules above, and
# `deep_stacks.gradients` runs the backward pass and returns, per seed, the two norms,
# the same norm at the input through the skip path alone (used below) and the output's
# standard deviation:

# %%
ARCHS = deep_stacks.ARCHS
INITS = {"default": None, "He": he_init_}  # name -> how to initialise a sublayer
W = deep_stacks.make_stacks(3, 8, he_init_, seeds=range(2))  # 2 seeds, 3 layers, d 8
y = deep_stacks.stack_forward(torch.ones(5, 8), W, "plain")  # 5 tokens
print([tuple(w.shape) for w in W], "->", tuple(y.shape))
grads = partial(deep_stacks.gradients, d=grad_width, seeds=range(n_seeds),
                device=run.device)  # fmt: skip
stats = {(arch, init): torch.stack([grads(L, arch, fn) for L in depths]).cpu()
         for arch in ARCHS for init, fn in INITS.items()}  # fmt: skip
print("per stack, (depths, 4, seeds):", tuple(stats["plain", "He"].shape))

# %% [markdown]
# The gradient at the first layer, as the geometric mean over the seeds:

# %% tags=["nbval-ignore-output"]
# log10 of the geometric mean over the seeds of ‖∂ℓ/∂W1‖, (depths,) per stack
mean = {k: v[:, 0].log10().mean(1) for k, v in stats.items()}
print(deep_stack_readings.gradient_table(stats, depths))
# predicted for plain, default: a factor √18 per sublayer on the way down
drop = (mean["plain", "default"][0] - mean["plain", "default"][-1]).item()
predicted = (depths[-1] - 1) * math.log10(shrink)
print(f"plain, default: {drop:.1f} orders of magnitude lost; predicted {predicted:.1f}")
report.glue("plain_drop", drop, "{:.1f}")
report.glue("plain_predicted", predicted, "{:.1f}")
assert abs(drop - predicted) < 2
for k in [("plain", "He"), *[("residual + LayerNorm", i) for i in INITS]]:
    assert (mean[k] - mean[k][0]).abs().max() < 1, k  # within one order of magnitude
# residual, default: the gradient grows by (19/18)^(1/2) per sublayer (see below)
Ls = torch.tensor(depths, dtype=torch.float64)
growth = mean["residual", "default"] - mean["residual", "default"][0]
assert (growth - (Ls - 1) / 2 * math.log10(19 / 18)).abs().max() < 0.3
assert (mean["residual", "He"][-1] - mean["residual", "He"][0]) > 6

# %% tags=["hide-input"]
deep_stack_readings.plot_gradients(stats, depths)
plt.show()

# %% [markdown]
# **Plain stacks.** With PyTorch's default initialisation the gradient at the first
# layer falls by {glue:text}`plain_drop` orders of magnitude between depth 1 and the
# deepest stack: the {glue:text}`plain_predicted` that the factor 1/18 of one sublayer
# predicts. With He initialisation the same plain stack keeps its gradient within one
# order of magnitude at every depth (dashed blue, right). The geometric collapse is set
# by the initialisation: a variance-preserving one removes it without any residual
# connection (and, below, so does a residual connection without changing the
# initialisation).
#
# **What the residual connection buys.** Unroll the Jacobians of a residual stack, with
# $J_l = \partial F_l / \partial x$:
#
# $$
# \frac{\partial \ell}{\partial x_0}
# = (I + J_1)^\top \cdots (I + J_L)^\top g
# = g + \sum_l J_l^\top g + \dots
# $$
#
# The first term is the gradient from the top, carried down untouched by the skip
# connections; every other term passes through at least one sublayer. At a random
# initialisation those terms are uncorrelated with $g$, so on average they add to its
# squared norm instead of cancelling it: $\lVert \partial \ell / \partial x_0 \rVert
# \gtrsim \lVert g \rVert$, at any depth and whatever the scale of the initialisation.
# The table gives the ratio for every stack at the largest depth (mean over seeds) and
# the smallest at any depth and seed; the *skip term* alone, measured by the same
# backward pass with every sublayer's output detached so that only the skip path
# carries the gradient; and the standard deviation of each stack's output:

# %% tags=["nbval-ignore-output"]
ratio = {k: v[:, 1] for k, v in stats.items()}  # ‖∂ℓ/∂x‖/‖g‖, (depths, seeds)
skip = {k: v[:, 2] for k, v in stats.items()}  # the same, skip path only
out_std = {k: v[:, 3].log().mean(1).exp() for k, v in stats.items()}  # geometric mean
L = depths[-1]
print(deep_stack_readings.input_table(stats, L))
for k in [("residual", "default"), ("residual", "He")]:
    torch.testing.assert_close(skip[k], torch.ones_like(skip[k]))  # the skip term is g
    assert ratio[k].min() >= 1, k  # never below the skip term, at any depth or seed
post = {init: ("residual + LayerNorm", init) for init in INITS}
assert skip[post["He"]][-1].max() < 2 ** (-L / 4)  # the skip term all but vanishes
assert skip[post["default"]][-1].max() < 0.5
assert min(ratio[k].min() for k in post.values()) > 0.1  # carried by the sublayers
report.glue("grad_depth", L)
# the smallest ratios without and with a norm on the skip path; Add & Norm's skip term
report.glue_all(deep_stack_readings.input_readings(stats), "{:.3g}")
# the stream's growth: (1 + 1/18) or (1 + 1) times the second moment per sublayer
growth = {"default": (19 / 18) ** (L / 2), "He": 2 ** (L / 2)}
for init, pred in growth.items():
    print(f"residual, {init}: output std {out_std['residual', init][-1]:.3g}, "
          f"predicted {pred:.3g}")  # fmt: skip
    assert abs(math.log2(out_std["residual", init][-1] / pred)) < 1
assert (out_std["residual + LayerNorm", "He"] - 1).abs().max() < 0.01
# plain, default: the signal dies, each layer's biases add 5/(36 d) to E[x²]
fixed_point = math.sqrt(5 / (34 * grad_width))  # q* = q*/18 + 5/(36 d)
print(f"plain, default: output std {out_std['plain', 'default'][-1]:.3g}, "
      f"the biases' fixed point {fixed_point:.3g}")  # fmt: skip
report.glue("bias_std", out_std["plain", "default"][-1].item(), "{:.3g}")
report.glue("bias_fixed_point", fixed_point, "{:.3g}")
report.glue("signal_std", 18 ** (-L / 2), "{:.0e}")
report.glue("grad_width", grad_width)
assert abs(math.log(out_std["plain", "default"][-1] / fixed_point)) < math.log(1.3)

# %% [markdown]
# Without normalisation the skip term is $g$ itself (a ratio of exactly 1), and the
# residual stacks never fall below it, at any depth or seed, with either
# initialisation.
#
# The plain default stack's output does not vanish with its gradient: its standard
# deviation is {glue:text}`bias_std`, not the {glue:text}`signal_std` that the factor
# 1/18 per sublayer predicts for its signal ($18^{-L/2}$ at depth $L$ =
# {glue:text}`grad_depth`). That is the biases, which the
# gradient calculation could ignore. `up_proj`'s bias adds $1/(3d)$ to the second
# moment before the ReLU and `down_proj`'s adds $1/(12d)$ after it, so one sublayer
# maps $q$ to $q/18 + 5/(36d)$. Once the input's share has died out, the output sits
# at the fixed point $q^* = 5/(34d)$, a standard deviation of
# {glue:text}`bias_fixed_point` for $d$ = {glue:text}`grad_width`: a constant set by
# the biases, the same for every input.
#
# **What it does not buy: a sensible scale.** Every residual layer adds its branch's
# variance to the stream. Under He initialisation the branch is as large as the stream,
# so the second moment doubles with every layer: the output's standard deviation grows
# as $2^{L/2}$ and the gradient with it (the steep dashed curve on the left). PyTorch's
# default makes each branch small, 1/18 of the stream, so the stream grows only as
# $(19/18)^{L/2}$, and the gradient likewise (right panel, dotted). LayerNorm after each
# sum, the Add & Norm of the block, pins the stream at standard deviation 1 and keeps
# the gradient within an order of magnitude of its depth-1 value with either
# initialisation.
#
# In the Add & Norm stack the skip path is no longer an identity: it passes through
# every LayerNorm, and each divides by the standard deviation of its sum, $\sqrt{2}$
# per layer under He initialisation. The skip-term column shows what is left of it at
# the largest depth: almost nothing under He initialisation, much less than $g$ under
# the default. The gradient that still reaches the input is carried by the sublayers.
# Chapter 6 comes back to this, and to the other arrangement, pre-norm, whose skip path
# stays an identity.
#
# ### Does a deep stack train?
#
# A healthy gradient at the start does not guarantee that a stack trains. Nor is a
# small gradient by itself the obstacle with an optimiser like Adam, which rescales
# every parameter's step by the size of that parameter's recent gradients, down to a
# limit, its $\epsilon$, whose effect this section measures. The real test is
# training. Each stack now learns a
# fixed random function, a small "teacher" network $y = 1.5 \tanh(xA)\,B$ with
# $x \in \mathbb{R}^{d}$ (`deep_stacks.teacher_task` draws it and its inputs), from
# fresh random inputs at
# every step, with a linear read-out on top (as a real model has an output layer). The
# loss is the mean squared error as a fraction of the target's variance: 1.0 is no
# better than predicting the average. For each stack, the learning rate of Adam is
# chosen on a dev set of inputs from five, $3 \cdot 10^{-4}$ to $3 \cdot 10^{-2}$; a
# separate test set reports. To save time the search walks the grid: it starts at the
# middle rate and moves to the neighbour with the lower dev loss until neither
# neighbour is lower, training only the rates it visits. That finds the grid's best
# rate whenever the dev loss has a single minimum over the grid.
#
# Seven arms: plain, residual and Add & Norm stacks, each with PyTorch's default
# initialisation and with He's, and one more residual stack. The arms with He
# initialisation separate the skip connection, and the norm, from the initialisation:
# PyTorch's default makes every residual branch small (1/18 of the stream, above), He's
# makes it as large as the stream. But the two initialisations differ in three ways at
# once: the branch's scale, the biases (uniform against zero) and the weights'
# distribution (uniform against normal). The seventh arm isolates the scale: He's
# initialisation with every branch's last layer scaled by $\alpha = 1/\sqrt{18}$, so
# that it starts as small as the default's, with He's normal weights and zero biases
# ("He, α").

# %%
task = deep_stacks.teacher_task(train_width, train_steps, device=run.device)
teacher, train_x, dev_x, test_x = task  # y = 1.5 tanh(x A) B, and its inputs
print(f"{train_steps} batches of {tuple(train_x.shape[1:])}; dev and test sets of")
print(f"{tuple(dev_x.shape)}; targets {tuple(teacher(test_x).shape)}")

# %% [markdown]
# `deep_stacks.train_stacks` trains one stack plus a linear read-out (PyTorch's default
# initialisation) per seed with Adam, one step per batch, and returns the dev and the
# test loss of every seed; `deep_stacks.walk_the_grid` walks the grid of rates with it,
# and `deep_stacks.train_arms` does so for every arm at every depth:


# %% tags=["nbval-ignore-output"]
def he_small_(ff: blocks.FeedForward) -> blocks.FeedForward:
    """He's initialisation with the branch scaled by α = 1/√18, the default's scale."""
    he_init_(ff)
    with torch.no_grad():
        ff.down_proj.weight.mul_(18**-0.5)  # α·F(x): W2 scaled, b2 is zero
    return ff


TRAIN_INITS = {**INITS, "He, α": he_small_}
ARMS = [(arch, init) for arch in ARCHS for init in INITS]  # 3 stacks × 2 inits
ARMS.append(("residual", "He, α"))  # ... and the branch scale on its own
lrs = [3e-4, 1e-3, 3e-3, 1e-2, 3e-2]
task = dict(seeds=range(n_seeds), teacher=teacher, train_x=train_x, eval_x=task[2:])


# per (depth, arm): test losses (seeds,) at the rate chosen on dev, the rate, the
# indices of the rates tried
arms = deep_stacks.train_arms(train_depths, ARMS, TRAIN_INITS, lrs, **task)
test_loss, best_lr, tried = arms
n_runs = sum(len(t) for t in tried.values())
print(f"{n_runs} runs of {n_seeds} seeds (a full grid: {len(lrs) * len(tried)})")
assert n_runs < len(lrs) * len(tried)  # the walk trains fewer than the full grid

# %% tags=["nbval-ignore-output"]
print(f"test loss / variance of the target, mean ± std over {n_seeds} seeds")
print(deep_stack_readings.losses_table(test_loss, best_lr, tried, lrs))
shallow, deep = train_depths[0], train_depths[1:]
# mean test loss of the arms the text quotes, the shallow stacks and the first deep ones
at = {"shallow": shallow, "deep": deep[0]}
report.glue_all(deep_stack_readings.arm_means(test_loss, at), "{:.2f}")
report.glue("deep_depth", deep[0])
report.glue("train_steps", train_steps)
worst = max(test_loss[shallow, arm].mean().item() for arm in ARMS)
report.glue("shallow_worst", worst, "{:.2f}")
assert all(test_loss[shallow, arm].max() < 0.5 for arm in ARMS)  # shallow: all learn
small = [
    ("residual", "default"),
    ("residual + LayerNorm", "default"),
    ("residual", "He, α"),
]  # the arms whose branches start small
for depth in deep:
    plain = torch.cat([test_loss[depth, ("plain", i)] for i in INITS])
    # skip and default init together: every run beats every plain run
    assert test_loss[depth, ("residual", "default")].max() < plain.min()
    assert test_loss[depth, ("plain", "default")].min() > 0.95  # nothing learned
    he = ("plain", "He")
    assert test_loss[depth, he].min() > test_loss[shallow, he].max()
    if run.profile == "quick":  # the prose describes the quick profile's edition
        # the skip connection with He's large branches: worse than the plain He stack,
        # and worse than predicting the average
        res_he = test_loss[depth, ("residual", "He")]
        assert res_he.min() > max(test_loss[depth, he].max(), 1.0)
        # Add & Norm with He's large branches: far behind it with small ones
        ln_he = test_loss[depth, ("residual + LayerNorm", "He")]
        assert ln_he.min() > 2 * test_loss[depth, small[1]].max()
        # He's branches scaled to the default's size: every seed far ahead of He's
        # full-size branches, and most of the gap to the default closed (below)
        assert test_loss[depth, small[2]].max() < 0.5 < 1.0 < res_he.min()
        # every arm behind its own 2-layer version, in every seed; the ones with small
        # branches lose less than half what any other arm loses
        for arm in ARMS:
            assert test_loss[depth, arm].min() > test_loss[shallow, arm].max(), arm
        lost = {a: (test_loss[depth, a] - test_loss[shallow, a]).mean() for a in ARMS}
        others = [a for a in ARMS if a not in small]
        assert max(lost[a] for a in small) < min(lost[a] for a in others) / 2
# the share of the gap between He's residual arm and the default's that scaling He's
# branches by α closes, at the first deep depth
res_he, res_a, res = (test_loss[deep[0], ("residual", i)].mean()
                      for i in ("He", "He, α", "default"))  # fmt: skip
closed = ((res_he - res_a) / (res_he - res)).item()
print(f"depth {deep[0]}: scaling He's branches by α closes {closed:.0%} of the gap")
report.glue("gap_closed", 100 * closed, "{:.0f}")
if run.profile == "quick":
    assert closed > 0.8
at_edge = report.glue("edge_arms", deep_stack_readings.rates_at_edge(best_lr, lrs))
print("chosen rates at an end of the grid:", at_edge)

# %% [markdown]
# At depth 2 every stack learns most of the function, plain ones included: the worst
# test loss (mean over the seeds) is {glue:text}`shallow_worst` of the target's
# variance. At depth {glue:text}`deep_depth` the default-initialised plain stack learns
# nothing: its test loss is that of predicting the average. With He initialisation the
# plain stack has a healthy gradient and does learn something, but after the same
# {glue:text}`train_steps` steps it is at {glue:text}`deep_plain_he`, behind its own
# 2-layer version ({glue:text}`shallow_plain_he`). The residual stack with PyTorch's
# default initialisation reaches {glue:text}`deep_residual`, the Add & Norm stack
# {glue:text}`deep_res_ln` (with a fresh batch at every step nothing is overfitted: the
# test loss measures what training reached). Rates chosen at an end of the grid:
# {glue:text}`edge_arms`. For those, a rate past the end of the grid might do better:
# read their losses as upper bounds.
#
# Why does the default plain stack learn nothing at all? Its gradient is tiny, but Adam
# divides each parameter's step by the size of that parameter's recent gradients, so a
# tiny gradient alone should not stop it. It does stop it, because of the constant in
# that division. Adam keeps running averages $\hat m$ of each parameter's gradient $g$
# and $\hat v$ of $g^2$ and steps by
#
# $$
# \theta \leftarrow \theta - \mathrm{lr}\,\frac{\hat m}{\sqrt{\hat v} + \epsilon},
# \qquad \text{first step: } \mathrm{lr}\,\frac{g}{\lvert g \rvert + \epsilon},
# $$
#
# with $\epsilon = 10^{-8}$ by default (at the first step $\hat m = g$ and
# $\hat v = g^2$). A gradient well above $\epsilon$ gets a step of about lr, whatever
# its size; a gradient far below it gets about $\mathrm{lr} \cdot \lvert g \rvert /
# \epsilon$, a step shrunk by as much as the gradient. The next cell takes the plain
# default stacks as they were trained (depth {glue:text}`deep_depth`, the same width),
# computes the gradient of the training loss on the first batch
# (`deep_stacks.first_layer_gradients`, under a fresh default read-out), and prints each
# layer's mean $\lvert \partial L / \partial W_1 \rvert$ and Adam's first step as a
# fraction of lr, $\lvert g \rvert / (\lvert g \rvert + \epsilon)$, averaged over
# the layer's weights.

# %% tags=["nbval-ignore-output"]
adam_eps = torch.optim.Adam([torch.zeros(1)]).defaults["eps"]  # PyTorch's default ε
seeds, xb = range(n_seeds), train_x[0]  # xb (N, d): the first training batch
g_abs = deep_stacks.first_layer_gradients(deep[0], "plain", None, seeds, teacher, xb)
# g_abs (depth, S·d·4d): each |∂L/∂W1|, one loss per seed, summed as in train_stacks
first_step = (g_abs / (g_abs + adam_eps)).mean(1)  # (depth,): Adam's first step / lr
g_mean = g_abs.mean(1)  # (depth,)
print(f"Adam's ε = {adam_eps:.0e}; plain, default, depth {deep[0]}, first batch")
print(deep_stack_readings.first_step_table(g_mean, first_step))
frozen = int((first_step < 0.01).sum())  # layers that move by under 1 % of lr
report.glue("adam_eps", adam_eps, "{:.0e}")
report.glue("grad_first", g_mean[0].item(), "{:.0e}")
report.glue("grad_last", g_mean[-1].item(), "{:.0e}")
report.glue("step_first", first_step[0].item(), "{:.0e}")
report.glue("step_last", first_step[-1].item(), "{:.2f}")
report.glue("n_frozen", frozen)
assert g_mean[0] < 1e-3 * adam_eps and first_step[0] < 1e-3  # the bottom: frozen
assert first_step[-1] > 0.3 and 2 <= frozen < deep[0]  # the top moves

# %% [markdown]
# The first layer's gradient is {glue:text}`grad_first`, far below
# $\epsilon$ = {glue:text}`adam_eps`, and its first step is {glue:text}`step_first`
# of lr. The lowest {glue:text}`n_frozen` layers move by less than 1 % of lr per step:
# Adam leaves the bottom of the stack where it started. The top layer, with a gradient
# of {glue:text}`grad_last`, moves at {glue:text}`step_last` of lr.
#
# The upper layers move, yet they cannot learn a function of $x$ from what reaches
# them: the input's share of the signal shrinks by $\sqrt{18}$ per sublayer, while the
# biases hold it at the fixed point found above. The next cell measures, in float64
# (`deep_stacks.input_share`), how much the output of such a stack changes from one
# random input to another, relative to its size.

# %% tags=["nbval-ignore-output"]
# 256 random inputs through the plain default stacks: max range / max size of the output
share = deep_stacks.input_share(deep[0], train_width, range(n_seeds))
print(f"plain, default, depth {deep[0]}: the output varies between inputs by "
      f"{share:.1e} of its size")  # fmt: skip
report.glue("share64", share, "{:.1e}")
assert share < 1e-7

# %% [markdown]
# The input moves the output by {glue:text}`share64` of its size: what reaches the top
# of the stack is nearly the same for every input. Only the lower layers, which still
# see $x$, could make it depend on $x$ again, and those are the ones that $\epsilon$
# freezes. If that is the mechanism, a smaller $\epsilon$ should let the same stack
# learn, in the same float32 arithmetic. The control arm trains the plain default
# stacks again with $\epsilon = 10^{-20}$, its rate chosen on dev by the same walk:

# %% tags=["nbval-ignore-output"]
arm = ("plain", "default")
best, runs = deep_stacks.walk_the_grid(deep[0], "plain", None, lrs, 1e-20, **task)
control, base = runs[best][1].cpu(), test_loss[deep[0], arm]
seen = " ".join(f"{lrs[i]:.0e}" for i in sorted(runs))
print(f"plain, default, depth {deep[0]}, test loss / variance per seed:")
print(f"  ε = {adam_eps:.0e}, lr {best_lr[deep[0], arm]:.0e}: {show(base)}")
print(f"  ε = 1e-20, lr {lrs[best]:.0e}: {show(control)}   (tried {seen})")
n_below = int((control < 0.95).sum())
report.glue("deep_plain_default", base.mean().item(), "{:.2f}")
report.glue("ctl_mean", control.mean().item(), "{:.2f}")
report.glue("ctl_range", f"{control.min():.2f}–{control.max():.2f}")
report.glue("ctl_lr", f"{lrs[best]:.0e}")
report.glue("ctl_below", n_below)
report.glue("n_seeds", n_seeds)
if run.profile == "quick":  # the prose describes the quick profile's edition
    assert base.min() > 0.95 and n_below >= 2 and control.mean() < 0.95
    residual_worst = test_loss[deep[0], ("residual", "default")].max()
    assert control.min() > residual_worst + 0.3  # far behind the residual stacks

# %% [markdown]
# With $\epsilon = 10^{-20}$, at rate {glue:text}`ctl_lr`, the same stacks reach
# {glue:text}`ctl_mean` (seeds {glue:text}`ctl_range`; {glue:text}`ctl_below` of
# {glue:text}`n_seeds` below 0.95), against {glue:text}`deep_plain_default` with the
# default $\epsilon$. Apart from $\epsilon$, only the learning rate chosen on dev
# differed, in the same float32 arithmetic and from the same nearly constant start. So
# in the seeds that learned it was Adam's $\epsilon$, meeting gradients of
# {glue:text}`grad_first`, that held the lower layers, and with them the stack, where
# they started. A stack that starts out nearly constant can still learn once its lower
# layers move. A tiny $\epsilon$ is a diagnostic here, not a recipe: the stacks still
# end far behind the residual ones.
#
# The three residual arms without the norm take the initialisation's three differences
# apart. With He's full-size branches the residual stack ends at
# {glue:text}`deep_residual_he`, worse than predicting the average and worse than the
# plain He stack, in every seed: its stream grows as $2^{L/2}$ (the table of output
# standard deviations above), and {glue:text}`train_steps` steps of Adam, at rates up
# to $3 \cdot 10^{-2}$, do not undo that. Scaled by $\alpha$ to the default's size,
# with He's normal weights and zero biases kept, the same branches reach
# {glue:text}`deep_residual_he_a`, against {glue:text}`deep_residual` with the default:
# the scale alone closes {glue:text}`gap_closed` % of the gap between the two. Here the
# branch's starting scale, not the biases or the weights' distribution, is most of
# what separates He's residual stack from the default's.
#
# The Add & Norm stack with He initialisation keeps its stream at standard deviation 1
# and still reaches only {glue:text}`deep_res_ln_he`, behind the default-initialised
# Add & Norm stack in every seed (the plain He stack: {glue:text}`deep_plain_he`).
# Under He initialisation each LayerNorm divides its sum by about $\sqrt 2$, and the
# skip path with it: over $L$ layers the skip term shrinks as $2^{-L/2}$ (section 1's
# table), so this stack starts out much like a plain one. What trained well here is
# the skip connection *together with* branches that start small, without the norm
# (PyTorch's default, or He's scaled by $\alpha$) and with it (the default; the scaled
# arm was trained without the norm only); exercise 4 asks how small a branch should
# start.
#
# He et al. {cite}`he2016deep` saw deeper plain networks train to a *higher training
# error* than shallower ones, and called it degradation. This experiment measures
# something narrower: after a fixed, short budget of {glue:text}`train_steps` steps,
# every arm is behind its own 2-layer version, in every seed (asserted). The three with
# small branches lose least, less than half what any other arm loses: the residual
# stack goes from {glue:text}`shallow_residual` to {glue:text}`deep_residual`, the Add
# & Norm stack from {glue:text}`shallow_res_ln` to {glue:text}`deep_res_ln`, the scaled
# He stack from {glue:text}`shallow_residual_he_a` to {glue:text}`deep_residual_he_a`,
# while the plain He stack goes from {glue:text}`shallow_plain_he` to
# {glue:text}`deep_plain_he`. That
# fits deep stacks that train more slowly as well as ones that train to a worse end
# point; a run this short cannot tell the two apart.

# %% [markdown]
# ## 2. Layer normalisation
#
# LayerNorm {cite}`ba2016layer` standardises each token's feature vector on its own.
# For one token $x \in \mathbb{R}^{d}$ (with $d$ = d_model):
#
# $$
# \mu = \frac{1}{d}\sum_{i=1}^{d} x_i, \qquad
# \sigma^2 = \frac{1}{d}\sum_{i=1}^{d} (x_i - \mu)^2, \qquad
# \mathrm{LayerNorm}(x) = \gamma \odot \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}} + \beta.
# $$
#
# The variance divides by $d$, not $d - 1$. The small $\epsilon$ (here $10^{-5}$) keeps
# the division finite for a constant vector. $\gamma$ and $\beta$ are learned, one
# number per feature, and start at 1 and 0. They let the model choose the scale and
# offset it passes on.


# %% tags=["nbval-ignore-output"]
def layer_norm(
    x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, eps: float = 1e-5
) -> torch.Tensor:
    """Normalise over the last axis (each token's features).
    Shapes: x (..., d), gamma, beta (d,)."""
    mu = x.mean(dim=-1, keepdim=True)  # (..., 1): one mean per token
    # (..., 1): biased variance, divides by d
    var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)
    return gamma * (x - mu) / torch.sqrt(var + eps) + beta  # (..., d)


scales = torch.tensor([0.1, 1.0, 100.0])
# 3 tokens of 8 features, on very different scales
tokens = torch.randn(3, 8) * scales[:, None] + 5
y = layer_norm(tokens, torch.ones(8), torch.zeros(8))  # γ = 1, β = 0
for i, scale in enumerate(scales.tolist()):
    before, after = tokens[i], y[i]
    print(
        f"token at scale {scale:>5g}: "
        f"mean {before.mean():7.2f} -> {show(after.mean(), 2):5.2f}, "
        f"std {before.std(unbiased=False):8.4f} -> {after.std(unbiased=False):.4f}"
    )
assert y.mean(-1).abs().max() < 1e-5  # every token: mean 0 ...
assert (y[1:].std(-1, unbiased=False) - 1).abs().max() < 1e-4  # ... and std 1
assert y[0].std(unbiased=False) < 0.9999  # ... except the smallest, a little below

# %% [markdown]
# Every token now has mean 0 and standard deviation 1, whatever its scale before,
# except that the token at scale 0.1 stays a little below 1. That is $\epsilon$ at
# work: its variance is small enough that adding $\epsilon$ under the root matters,
# and it leaves the standard deviation at $\sqrt{\sigma^2 / (\sigma^2 + \epsilon)}$:

# %% tags=["nbval-ignore-output"]
eps = 1e-5
var = tokens[0].var(unbiased=False)  # σ² of the token at scale 0.1
expected = torch.sqrt(var / (var + eps))  # its standard deviation after LayerNorm
print(f"σ² = {var:.5f} = {var / eps:.0f} ε;  √(σ²/(σ² + ε)) = {expected:.5f}")
report.glue("ln_var", var.item(), "{:.4f}")
report.glue("ln_var_eps", (var / eps).item(), "{:.0f}")
report.glue("ln_shrink", 100 * (1 - expected).item(), "{:.2f}")
torch.testing.assert_close(y[0].std(unbiased=False), expected)

# %% [markdown]
# The variance, {glue:text}`ln_var`, is only {glue:text}`ln_var_eps` times $\epsilon$,
# so $\epsilon$ shrinks this token's standard deviation by
# {glue:text}`ln_shrink` %. For tokens of ordinary scale the effect is invisible. The
# package's `norms.LayerNorm` is the same computation as a module, with $\gamma$ and
# $\beta$ as parameters. It hands the arithmetic to PyTorch's `F.layer_norm`, one fused
# operation instead of the chain of small ones above (faster; chapter 6 times it), so
# what matters is that it agrees with our function, and with PyTorch's own, for any
# $\gamma$ and $\beta$:

# %%
ln = norms.LayerNorm(d_model)
with torch.no_grad():
    ln.weight.normal_(1.0, 0.5)  # a non-trivial γ ...
    ln.bias.normal_(0.0, 0.5)  # ... and β, as after some training
x = torch.randn(2, 5, d_model) * 3 + 1  # (B, T, d_model)
torch.testing.assert_close(layer_norm(x, ln.weight, ln.bias), ln(x))
torch_ln = nn.functional.layer_norm(x, (d_model,), ln.weight, ln.bias)
torch.testing.assert_close(ln(x), torch_ln)
print("ours == norms.LayerNorm == torch's layer_norm")
shapes = {name: tuple(p.shape) for name, p in ln.named_parameters()}
print(shapes, "->", params.count_params(ln), "= 2 · d_model")

# %% [markdown]
# ### LayerNorm is not BatchNorm
#
# BatchNorm {cite}`ioffe2015batch` uses the same formula along a different axis: one
# mean and one variance per **feature**, taken over every token of every sequence in
# the batch. For a tensor of shape (B, T, D):
#
# | | statistics taken over | one $(\mu, \sigma)$ pair per | count |
# |---|---|---|---|
# | LayerNorm | the D features of a token | token | B·T |
# | BatchNorm | the B·T tokens of the batch | feature | D |
#
# Apply both to one tensor and look along each axis:

# %% tags=["nbval-ignore-output"]
scale = torch.tensor([1.0, 5.0, 0.2, 2.0])  # each feature's standard deviation ...
shift = torch.tensor([0.0, 3.0, -1.0, 10.0])  # ... and mean
x = torch.randn(2, 3, 4) * scale + shift  # (B, T, D)
ln_out = norms.LayerNorm(4)(x)
bn = nn.BatchNorm1d(4)  # wants the features on axis 1: (B, D, T)
bn_out = bn(x.transpose(1, 2)).transpose(1, 2)  # (B, T, D) -> (B, D, T) -> (B, T, D)
print("LayerNorm: mean of each token   ", show(ln_out.mean(dim=-1).flatten()))  # B·T
print("           mean of each feature ", show(ln_out.mean(dim=(0, 1))))  # D values
print("BatchNorm: mean of each token   ", show(bn_out.mean(dim=-1).flatten()))
print("           mean of each feature ", show(bn_out.mean(dim=(0, 1))))
assert ln_out.mean(dim=-1).abs().max() < 1e-5  # LayerNorm: every token centred
assert bn_out.mean(dim=(0, 1)).abs().max() < 1e-5  # BatchNorm: every feature
assert ln_out.mean(dim=(0, 1)).abs().max() > 0.1 and bn_out.mean(-1).abs().max() > 0.1

# %% [markdown]
# LayerNorm centres every token; BatchNorm centres every feature. That difference has
# consequences for text. With BatchNorm a token's output depends on the *other*
# sentences in the batch (and, exercise 1 shows, on their padding). LayerNorm does not.
# Change sentence 1
# and watch sentence 0:

# %% tags=["nbval-ignore-output"]
x_other = x.clone()
x_other[1] = 10 * torch.randn(3, 4)  # replace the other sentence in the batch
ln_change = (norms.LayerNorm(4)(x_other)[0] - ln_out[0]).abs().max().item()
bn_other = bn(x_other.transpose(1, 2)).transpose(1, 2)  # (B, T, D)
bn_change = (bn_other[0] - bn_out[0]).abs().max().item()
print(f"change in sentence 0's output: "
      f"LayerNorm {ln_change:.3g}, BatchNorm {bn_change:.3g}")  # fmt: skip
assert ln_change == 0 and bn_change > 0.1

# %% [markdown]
# BatchNorm has a second complication. At evaluation time there may be no batch to take
# statistics from (one sentence at a time), so BatchNorm also keeps *running averages*
# of the statistics it sees in training, and uses those after `bn.eval()`. Each call in
# training mode moves them 10 % of the way towards the current batch's statistics
# (PyTorch's `momentum=0.1`), starting from mean 0 and variance 1. Our `bn` has seen
# two batches so far, `x` and then `x_other`, so its running mean is
# $0.9 \cdot 0.1\, m_1 + 0.1\, m_2$, with $m_1, m_2$ the two batches' feature means:
# still far from the data.

# %%
m1, m2 = x.mean(dim=(0, 1)), x_other.mean(dim=(0, 1))  # (D,): the batches' means
print("running mean == 0.09·m1 + 0.1·m2:",
      torch.allclose(bn.running_mean, 0.09 * m1 + 0.1 * m2))  # fmt: skip

# %% [markdown]
# Evaluation mode would normalise with these half-formed averages. They become useful
# only after many training batches. Feed `bn` 300 more batches of sentences drawn like
# `x` (feature means 0, 3, −1, 10 and standard deviations 1, 5, 0.2, 2), then compare
# the two modes on one new batch:

# %% tags=["nbval-ignore-output"]
sample = lambda B: (torch.randn(B, 3, 4) * scale + shift).transpose(1, 2)  # (B, D, T)
for _ in range(300):  # training mode: each call updates the running averages
    bn(sample(8))
print("running mean:", show(bn.running_mean, 2), " data:", show(shift, 2))
print("running std: ", show(bn.running_var.sqrt(), 2), " data:", show(scale, 2))
batch = sample(8)  # (B, D, T): 8 new sentences
train_mode = bn(batch)  # normalised with this batch's statistics
bn.eval()
eval_mode = bn(batch)  # normalised with the running averages
mu, sd = bn.running_mean[:, None], (bn.running_var[:, None] + bn.eps).sqrt()  # (D, 1)
torch.testing.assert_close(eval_mode, (batch - mu) / sd)  # γ = 1 and β = 0: untrained
change = (train_mode - eval_mode).abs().max().item()
print(
    f"the same batch, training vs evaluation mode: outputs differ by up to {change:.2f}"
)
assert ((bn.running_mean - shift).abs() < 0.3 * scale).all()
assert ((bn.running_var.sqrt() / scale - 1).abs() < 0.3).all() and change > 0.01

# %% [markdown]
# The running averages now track the data's statistics, and evaluation mode normalises
# with them. Even so, a sentence gets a different output in training and in
# evaluation, because a batch's statistics are not the averages. LayerNorm computes the
# same thing in both modes, with no state at all, which is one reason transformers use
# it.
#
# ## 3. The feed-forward sublayer
#
# The second sublayer is a two-layer network applied to every position separately, with
# the same weights at every position:
#
# $$
# \mathrm{FFN}(x) = \max(0,\, x W_1 + b_1)\, W_2 + b_2,
# \qquad W_1 \in \mathbb{R}^{d_\text{model} \times d_\text{ff}},\;
# W_2 \in \mathbb{R}^{d_\text{ff} \times d_\text{model}}.
# $$
#
# The hidden width $d_\text{ff}$ is usually four times d_model (2048 for 512 in the
# paper). Attention mixes information *between* tokens; the feed-forward network
# transforms each token *on its own*. Written out, and compared with
# `blocks.FeedForward` (which stores $W^\top$, as `nn.Linear` does):


# %%
def feed_forward(x, W1, b1, W2, b2):
    """max(0, x W1 + b1) W2 + b2.
    Shapes: x (..., d_model), W1 (d_model, d_ff), W2 (d_ff, d_model)."""
    hidden = torch.relu(x @ W1 + b1)  # (..., d_ff)
    return hidden @ W2 + b2  # (..., d_model)


ff = blocks.FeedForward(d_model, d_ff)
x = torch.randn(2, 5, d_model)  # (B, T, d_model)
up, down = ff.up_proj, ff.down_proj
ff_out = feed_forward(x, up.weight.T, up.bias, down.weight.T, down.bias)
torch.testing.assert_close(ff_out, ff(x))
hidden = tuple(up(x).shape)
print(f"{tuple(x.shape)} -> hidden {hidden} -> {tuple(ff_out.shape)}; "
      "equals blocks.FeedForward")  # fmt: skip

# %% [markdown]
# "Position-wise" is easy to check: the output for token 2 does not change when we feed
# token 2 alone, and shuffling the tokens only shuffles the outputs (equal up to float
# rounding, which depends on how the matrix product is split up).

# %%
alone = ff(x[:, 2:3])  # (B, 1, d_model): token 2 without its neighbours
same = torch.allclose(alone[:, 0], ff(x)[:, 2], atol=1e-6)
print("token 2 alone == token 2 in the sentence:", same)
perm = torch.randperm(5)  # a shuffled token order
same = torch.allclose(ff(x[:, perm]), ff(x)[:, perm], atol=1e-6)
print("FFN(shuffled tokens) == shuffled FFN(tokens):", same)

# %% [markdown]
# ## 4. Add & Norm: the post-norm block
#
# Now the pieces go together. Both sublayers get a residual connection and a LayerNorm
# *after* the addition, which is the original arrangement, called **post-norm**:
#
# $$
# H = \mathrm{LayerNorm}_1\big(X + \mathrm{MultiHead}(X)\big), \qquad
# Y = \mathrm{LayerNorm}_2\big(H + \mathrm{FFN}(H)\big).
# $$
#
# We write it with our own `layer_norm` and `feed_forward`, taking the weights (and the
# multi-head attention of chapter 2) from a package block, and compare with
# `blocks.EncoderBlock`:


# %%
def post_norm_block(
    x: torch.Tensor, block: blocks.EncoderBlock, mask=None
) -> torch.Tensor:
    """Add & Norm around attention, then around the feed-forward network.
    Shapes: (B, T, D) -> (B, T, D)."""
    a = block.attn(x, mask=mask)[0]  # (B, T, D): multi-head self-attention
    h = layer_norm(x + a, block.norm1.weight, block.norm1.bias)  # Add & Norm 1
    up, down = block.ff.up_proj, block.ff.down_proj
    f = feed_forward(h, up.weight.T, up.bias, down.weight.T, down.bias)  # (B, T, D)
    return layer_norm(h + f, block.norm2.weight, block.norm2.bias)  # Add & Norm 2


block = blocks.EncoderBlock(d_model, n_heads, d_ff)
x = torch.randn(2, 5, d_model)  # (B, T, d_model)
torch.testing.assert_close(post_norm_block(x, block), block(x))
print("post_norm_block == blocks.EncoderBlock:", tuple(block(x).shape))

# %% [markdown]
# **Check against PyTorch.** `torch.nn.TransformerEncoderLayer` with `norm_first=False`
# is the same post-norm block. It stores the three input projections as one stacked
# (3·d_model, d_model) matrix; `blocks.load_torch_encoder_layer`
# copies its weights into ours. We compare without a mask and with a padding mask.
# Mind the polarity: our masks say True = *may attend*, while PyTorch's
# `src_key_padding_mask` says True = *ignore this key*, so we pass its negation.

# %%
torch_layer = nn.TransformerEncoderLayer(
    d_model, n_heads, d_ff, dropout=0.0, batch_first=True, norm_first=False
)
ours = blocks.load_torch_encoder_layer(
    blocks.EncoderBlock(d_model, n_heads, d_ff), torch_layer
)
x = torch.randn(3, 6, d_model)  # (B, T, d_model)
lengths = torch.tensor([6, 4, 2])  # real tokens per sentence; the rest is padding
keep = masks.padding_mask(lengths, 6)  # (B, 1, 1, T), True = may attend
torch.testing.assert_close(ours(x), torch_layer(x), atol=1e-5, rtol=1e-5)
real = keep[:, 0, 0]  # (B, T): the real tokens
ref = torch_layer(x, src_key_padding_mask=~real)  # PyTorch: True = ignore
torch.testing.assert_close(ours(x, mask=keep)[real], ref[real], atol=1e-5, rtol=1e-5)
print(
    "EncoderBlock == nn.TransformerEncoderLayer (atol 1e-5), without and with padding"
)

# %% [markdown]
# One property of post-norm is visible directly: the block ends with a LayerNorm, so at
# initialisation ($\gamma = 1, \beta = 0$) every output token has mean 0 and standard
# deviation 1, whatever came in.

# %%
y = block(100 * torch.randn(2, 5, d_model))  # a badly scaled input
print("mean per token:", show(y.mean(-1).flatten()))
print("std per token: ", show(y.std(-1, unbiased=False).flatten()))

# %% [markdown]
# ### Dropout
#
# The block printed at the top of the chapter holds three `Dropout` modules. Dropout
# {cite}`srivastava2014dropout` is a regulariser: in training it sets each entry of a
# tensor to zero with probability $p$ and multiplies the others by $1/(1-p)$, so every
# entry keeps its expected value; in evaluation it does nothing. The original block
# applies it to the output of each sublayer, *before* the output is added to the
# residual stream and normalised (and to the sum of the token and position embeddings),
# with $p = 0.1$ {cite}`vaswani2017attention`:
#
# $$
# H = \mathrm{LayerNorm}\big(X + \mathrm{Dropout}(\mathrm{MultiHead}(X))\big).
# $$
#
# `blocks.EncoderBlock(..., dropout=p)` does exactly that (`dropout1`, `dropout2`,
# drawn in the diagram above) and, like `nn.TransformerEncoderLayer`, also drops
# entries of the feed-forward network's hidden layer (`ff.dropout`) and of the
# attention weights. A module's `.train()` and `.eval()` switch the mode:

# %% tags=["nbval-ignore-output"]
drop = nn.Dropout(p=0.1)  # a new module is in training mode
z = drop(torch.ones(100_000))
zeroed, kept = (z == 0).float().mean().item(), z[z > 0].unique()
print(f"training: {zeroed:.3f} of the entries zeroed, "
      f"the others = {show(kept, 4)} = 1/0.9")  # fmt: skip
print(f"          mean {z.mean():.3f} (the input's mean is 1)")
drop.eval()
print("evaluation: output == input:", torch.equal(drop(torch.ones(5)), torch.ones(5)))
assert abs(zeroed - 0.1) < 0.005 and abs(z.mean() - 1) < 0.01
torch.testing.assert_close(kept, torch.tensor([1 / 0.9]))

# %% [markdown]
# In a block, dropout makes training mode random and evaluation mode deterministic, and
# in evaluation the block computes exactly what the same weights compute without
# dropout:

# %%
noisy = blocks.EncoderBlock(d_model, n_heads, d_ff, dropout=0.1)  # training mode
x = torch.randn(2, 5, d_model)  # (B, T, d_model)
print("training mode, two calls agree:  ", torch.equal(noisy(x), noisy(x)))
noisy.eval()
print("evaluation mode, two calls agree:", torch.equal(noisy(x), noisy(x)))
clean = blocks.EncoderBlock(d_model, n_heads, d_ff, dropout=0.0).eval()
clean.load_state_dict(noisy.state_dict())  # the same weights, no dropout
print("evaluation == no dropout:        ", torch.equal(noisy(x), clean(x)))

# %% [markdown]
# The other arrangement, **pre-norm**, normalises the input of each sublayer instead,
# $x + F(\mathrm{LayerNorm}(x))$, so that the skip path runs from the block's input to
# its output untouched; the package builds it with `norm_first=True`, and Exercise 2
# below asks you to write it. Xiong et al. {cite}`xiong2020layer` found post-norm the
# fragile one in deep transformer stacks (attention and feed-forward sublayers, trained
# with Adam): at initialisation the gradients of its parameters near the output are
# large, so it needs a learning-rate warm-up to train well, and pre-norm can do without
# one. Section 1's Add & Norm stacks, feed-forward sublayers only, trained without
# warm-up; they do not test that finding. Chapter 6 measures both arrangements in full
# blocks.
#
# ## 5. Stacking blocks
#
# A block maps (B, T, d_model) to (B, T, d_model), so its output can be the next block's
# input. The encoder is just $N$ blocks in a row, each with its own weights: $N = 6$ in
# the original paper; GPT-3 stacks 96 {cite}`brown2020gpt3`.
# `blocks.Encoder` does this; we check it against PyTorch's
# `nn.TransformerEncoder` with the weights copied layer by layer:

# %%
n_layers = 6
encoder = blocks.Encoder(n_layers, d_model, n_heads, d_ff)
torch_block = partial(nn.TransformerEncoderLayer, d_model, n_heads, d_ff,
                      dropout=0.0, batch_first=True)  # fmt: skip
torch_encoder = nn.TransformerEncoder(
    torch_block(), n_layers, enable_nested_tensor=False
)
# torch's constructor deep-copies one layer n_layers times: give every layer its own
# random weights
torch_encoder.layers = nn.ModuleList(torch_block() for _ in range(n_layers))
for ours_l, theirs_l in zip(encoder.layers, torch_encoder.layers):
    blocks.load_torch_encoder_layer(ours_l, theirs_l)
x = torch.randn(2, 7, d_model)  # (B, T, d_model)
torch.testing.assert_close(encoder(x), torch_encoder(x), atol=1e-5, rtol=1e-5)
h = x
for i, layer in enumerate(encoder.layers):
    h = layer(h)
    print(f"after block {i + 1}: {tuple(h.shape)}")
print("Encoder == nn.TransformerEncoder")

# %% [markdown]
# ## 6. Counting parameters
#
# Every weight in the block is a matrix or vector whose size is set by d_model and
# d_ff. With $d$ = d_model:
#
# | part | weights | parameters |
# |---|---|---|
# | multi-head attention | $W_Q, W_K, W_V, W_O$ ($d \times d$; chapter 2's $A_Q, A_K, A_V, A_O$ for all heads) and their biases | $4d^2 + 4d$ |
# | feed-forward | $W_1$ ($d \times d_\text{ff}$), $b_1$, $W_2$ ($d_\text{ff} \times d$), $b_2$ | $2 d\, d_\text{ff} + d_\text{ff} + d$ |
# | LayerNorm (×2 per block) | $\gamma, \beta$ | $2d$ each |
# | **block** | | $4d^2 + 2d\,d_\text{ff} + 9d + d_\text{ff}$ |
# | token embeddings | one row per vocabulary entry | $V d$ |
# | **encoder** | embeddings + $N$ blocks | $Vd + N(4d^2 + 2d\,d_\text{ff} + 9d + d_\text{ff})$ |
#
# The number of heads does not appear: heads split d_model into slices, they do not add
# weights (chapter 2). `params` has these closed forms; each
# should equal the count of the module it describes:

# %%
rows = [
    ("multi-head attention", params.mha_params(d_model),
     attention.MultiHeadAttention(d_model, n_heads)),
    ("feed-forward", params.feed_forward_params(d_model, d_ff),
     blocks.FeedForward(d_model, d_ff)),
    ("LayerNorm", params.layer_norm_params(d_model), norms.LayerNorm(d_model)),
    ("encoder block", params.encoder_block_params(d_model, d_ff),
     blocks.EncoderBlock(d_model, n_heads, d_ff)),
    ("nn.TransformerEncoderLayer", params.encoder_block_params(d_model, d_ff),
     torch_layer),
]  # fmt: skip
print(f"d_model={d_model}, d_ff={d_ff}\n{'part':<28}{'formula':>10}{'module':>10}")
for name, formula, module in rows:
    assert formula == params.count_params(module)
    print(f"{name:<28}{formula:>10,}{params.count_params(module):>10,}")

# %% [markdown]
# At the size of the original base model (d_model = 512, d_ff = 2048, 6 layers, a
# shared vocabulary of about 37,000 tokens {cite}`vaswani2017attention`), where do the
# encoder's parameters sit? We build the module, count, and compare with the closed form:

# %%
V, D, D_FF, N = 37_000, 512, 2048, 6
base = nn.ModuleDict(
    {"embed": nn.Embedding(V, D), "encoder": blocks.Encoder(N, D, 8, D_FF)}
)
parts = {
    "token embeddings": params.embedding_params(V, D),
    f"attention ({N} blocks)": N * params.mha_params(D),
    f"feed-forward ({N} blocks)": N * params.feed_forward_params(D, D_FF),
    f"LayerNorms ({2 * N})": 2 * N * params.layer_norm_params(D),
}
total = params.encoder_params(N, D, D_FF, V)
assert total == params.count_params(base) == sum(parts.values())
for name, n in parts.items():
    print(f"{name:<24}{n:>12,}  {100 * n / total:5.1f} %")
print(f"{'total (formula = module)':<24}{total:>12,}")

# %% [markdown]
# Half of this encoder is its embedding table. Of the rest, the feed-forward networks
# hold twice as much as attention ($2 d\, d_\text{ff} = 8d^2$ against $4d^2$ when
# $d_\text{ff} = 4d$), and the LayerNorms hardly register.

# %% [markdown]
# ### No weight knows the sentence length
#
# Nothing in the table depends on $T$, the number of tokens in the input. The same
# matrices are applied to every token (the feed-forward network, the projections
# $W_Q, W_K, W_V, W_O$), and attention's $T \times T$ weights are computed from the
# input, not stored. Take a small model, token embeddings plus an encoder, list its
# parameter shapes, and run it on 10 tokens and on 10,000:


# %%
vocab_size = 1000
# ids (B, T) -> token vectors (B, T, 32) -> 2 blocks of width 32, 2 heads, d_ff 64
model = nn.Sequential(nn.Embedding(vocab_size, 32), blocks.Encoder(2, 32, 2, 64))
model = model.to(run.device).eval()
print(sorted({tuple(p.shape) for p in model.parameters()}), "<- every parameter shape")
n_params = params.count_params(model)
print(
    "closed form:", params.encoder_params(2, 32, 64, vocab_size), " module:", n_params
)

# %%
ids = {}
for T in (10, 10_000):
    ids[T] = torch.randint(0, vocab_size, (1, T), device=run.device)  # (1, T) token ids
    with torch.no_grad():
        out = model(ids[T])  # (1, T, d_model)
    print(
        f"T = {T:>6,}: output {tuple(out.shape)}, finite: {bool(out.isfinite().all())}"
    )
    print(f"{'':>11}parameters {n_params:,}, attention weights per head {T * T:,}")

# %% [markdown]
# The parameter count is the same for both lengths; what grows with $T$ is the work.
# Each head computes $T^2$ attention weights, a million times more for the long input
# (a later chapter deals with that cost). The time one call takes on this machine, the
# median of several calls in CPU seconds (which a busy machine inflates less than the
# wall clock; for 10 tokens it is presumably dominated by the fixed cost of calling a
# few dozen operations, which is why the time grows far less than the $T^2$ weights
# do):

# %% tags=["nbval-ignore-output"]
repeats = {10: 9, 10_000: 3}  # the long call: up to a second on one CPU thread
for T, tokens_T in ids.items():
    with torch.no_grad():  # the calls above were the warm-up
        sec = benchmark.median_time(
            lambda: model(tokens_T), repeats[T], 0, run.device, clock="auto"
        )
    print(f"T = {T:>6,}: {1000 * sec:8.1f} ms (median of {repeats[T]} calls)")

# %% [markdown]
# Only one common part of a transformer ties its parameters to a length: a *learned*
# table of position embeddings (chapter 4), one row per position up to a fixed maximum.
# That caps the input length; it still does not depend on the input. The closed form
# takes it as `max_len`:

# %%
for max_len in (None, 512, 2048):
    n = params.encoder_params(2, 32, 64, vocab_size, max_len=max_len)
    print(f"max_len={str(max_len):>5}: {n:>8,} parameters")

# %% [markdown]
# The same arithmetic scales to the largest models. A GPT-3 block has the same parts as
# an encoder block, a self-attention and a feed-forward sublayer with two LayerNorms;
# GPT-3 puts each LayerNorm before its sublayer (pre-norm) and adds one more after the
# last block, which `final_norm=True` counts. With 96 blocks of width 12,288,
# $d_\text{ff} = 4 \cdot 12{,}288$, a vocabulary of 50,257 tokens and a learned table of
# 2,048 positions, the closed form lands near the 175 billion parameters reported for it
# {cite}`brown2020gpt3` (a later chapter does this count in full, model family by model
# family):

# %%
d3 = 12_288  # GPT-3's d_model
gpt3 = params.encoder_params(96, d3, 4 * d3, 50_257, max_len=2048, final_norm=True)
in_blocks = 96 * params.encoder_block_params(d3, 4 * d3)
print(f"{gpt3:,} parameters = {gpt3 / 1e9:.1f} billion")
print(f"{100 * in_blocks / gpt3:.1f} % of them in the 96 blocks")

# %% [markdown]
# ## Summary
#
# - How fast a plain stack's gradient vanishes is set by its initialisation: PyTorch's
#   default shrinks the gradient's second moment by 1/18 per feed-forward sublayer, a
#   variance-preserving (He) initialisation does not.
# - A residual connection adds a sublayer's input to its output. When nothing sits on
#   the skip path, as in the residual stacks without LayerNorm, its identity path keeps
#   the gradient at the input from falling below the gradient at the top, whatever the
#   initialisation: their smallest ratio, at any depth and seed, was
#   {glue:text}`res_ratio_min`. This chapter's own block is post-norm, and there the
#   guarantee is gone: the skip path runs through every LayerNorm, so at depth
#   {glue:text}`grad_depth` the skip term is {glue:text}`post_skip_he` of $g$ under He
#   initialisation ({glue:text}`post_skip_default` under the default), and the ratio
#   falls as low as {glue:text}`post_ratio_min`; under He initialisation almost all of
#   what still reaches the input is carried by the sublayers. That is
#   why chapter 6's pre-norm block, $x + F(\mathrm{LayerNorm}(x))$, exists: it moves
#   the norm off the skip path, which becomes an identity again.
# - In {glue:text}`train_steps` steps of Adam at depth {glue:text}`deep_depth`, the
#   residual stacks with small branches (PyTorch's default), without and with Add &
#   Norm, reached {glue:text}`deep_residual` and {glue:text}`deep_res_ln`, the plain He
#   stack {glue:text}`deep_plain_he`. With He's large branches, at this short budget,
#   the residual stack reached {glue:text}`deep_residual_he`, worse than the plain one,
#   and the Add & Norm stack {glue:text}`deep_res_ln_he`; He's branches scaled down to
#   the default's size reached {glue:text}`deep_residual_he_a`, so the branch's scale,
#   not the biases or the weights' distribution, made most of that difference. A
#   residual connection does not control the scale: each residual layer adds its
#   branch's variance, which small
#   branches keep small; a LayerNorm after the sum takes the scale back, but under He
#   initialisation it shrinks the skip path with it. Whether a longer run closes these
#   gaps, a run this short cannot say. Every stack, residual or not, was behind its own
#   2-layer version after the same steps.
# - The default plain stack learned nothing largely because of Adam's $\epsilon$ =
#   {glue:text}`adam_eps`: its lowest layers' gradients, about {glue:text}`grad_first`,
#   get steps of about lr·|g|/ε, so they stay where they started, and the input's share
#   of what reaches the top is {glue:text}`share64`. With $\epsilon = 10^{-20}$ the same
#   stacks reached {glue:text}`ctl_mean` ({glue:text}`ctl_below` of
#   {glue:text}`n_seeds` seeds below 0.95).
# - LayerNorm standardises each token over its features (biased variance, learnable
#   $\gamma$ and $\beta$). BatchNorm standardises each feature over the batch, which ties
#   one sentence's output to the others and needs running averages for evaluation.
# - The feed-forward sublayer transforms each token on its own with the same weights.
# - The original block is post-norm: $\mathrm{LayerNorm}(x +
#   \mathrm{Dropout}(\mathrm{Sublayer}(x)))$ after attention and after the feed-forward
#   network; dropout acts in training mode only. Blocks keep the shape, so they stack.
# - Parameters depend on d_model, d_ff, the vocabulary and the number of layers, never
#   on the length of the input.

# %% [markdown]
# ## Exercises
#
# ### Exercise 1: BatchNorm and padding (break and fix)
#
# Section 2 showed that with BatchNorm a token's output depends on the other sentences
# in its batch. Padding is part of the batch too. A colleague tried to remove the
# padding's share:
# `mask` (B, T) is True at real tokens, and the padded positions are set to zero before
# the statistics are taken. **Before running the next cell**, predict: with this
# version, does a sentence's output change when its batch is padded with three more
# positions? And by more or less than with the plain BatchNorm of section 2, which
# ignores the mask? The cell measures both.


# %%
def colleague_bn(x, gamma, beta, mask, eps=1e-5):
    x0 = x * mask[..., None]  # (B, T, D): padded positions set to 0
    mu = x0.mean(dim=(0, 1))  # (D,)
    var = ((x0 - mu) ** 2).mean(dim=(0, 1))  # (D,)
    return gamma * (x - mu) / torch.sqrt(var + eps) + beta


# %% tags=["nbval-ignore-output"]
gen = torch.Generator().manual_seed(4)
real = torch.randn(2, 4, 3, generator=gen) * 2 + 1  # (B, T, D): two 4-token sentences
padded = torch.cat((real, torch.zeros(2, 3, 3)), dim=1)  # (2, 7, 3): 3 <pad> each
mask_4, mask_7 = torch.ones(2, 4, dtype=torch.bool), torch.arange(7).expand(2, 7) < 4
unit, zero = torch.ones(3), torch.zeros(3)  # no learned scale or shift


def plain(x):  # BatchNorm with no mask; F.batch_norm wants (B, D, T)
    return nn.functional.batch_norm(x.mT, None, None, training=True).mT


changes = {
    "colleague": colleague_bn(padded, unit, zero, mask_7)[:, :4]
    - colleague_bn(real, unit, zero, mask_4),
    "plain BatchNorm": plain(padded)[:, :4] - plain(real),
}
for name, change in changes.items():
    print(f"{name:15s}: real tokens move by up to {change.abs().max():.3f} with <pad>")
assert changes["colleague"].abs().max() > 0.1

# %% [markdown]
# Explain the numbers, then write `masked_batch_norm(x, gamma, beta, mask, eps)`:
# training-mode BatchNorm whose per-feature mean and biased variance are taken over the
# real tokens only (what the padded positions hold in the output does not matter). The
# check first runs it with every token real, where it must equal BatchNorm, then with
# padding full of junk values, and names the mistake when it meets a known one (the
# colleague's among them).


# %%
def masked_batch_norm(x, gamma, beta, mask, eps=1e-5):
    # YOUR CODE HERE
    raise NotImplementedError


# %% tags=["solution", "hide-cell"]
def masked_batch_norm(x, gamma, beta, mask, eps=1e-5):
    real = x[mask]  # (N_real, D): the real tokens of every sentence
    mu, var = real.mean(dim=0), real.var(dim=0, unbiased=False)  # (D,) each
    return gamma * (x - mu) / torch.sqrt(var + eps) + beta  # (B, T, D)


# %%
checks.check_masked_batch_norm(masked_batch_norm)

# %% [markdown]
# ### Exercise 2: the pre-norm block (break and fix)
#
# Many later models move the LayerNorm to the *input* of each sublayer and leave the
# residual path untouched:
#
# $$
# H = X + \mathrm{MultiHead}(\mathrm{LayerNorm}_1(X)), \qquad
# Y = H + \mathrm{FFN}(\mathrm{LayerNorm}_2(H)).
# $$
#
# A colleague wrote the block below. It runs and its shapes are right, yet it is not
# pre-norm. **Before running the next cell**, read it and predict: stack 12
# of these blocks at initialisation and feed them tokens of standard deviation 1. Does
# the standard deviation of the stream stay near 1 or grow with the depth, for the
# colleague's block and for a correct pre-norm block? The cell measures both (the
# package's `norm_first=True` block is the correct one).


# %%
def colleague(x, self_attention, feed_forward, norm1, norm2):
    x = norm1(x)
    h = x + self_attention(x)
    h = norm2(h)
    return h + feed_forward(h)


# %% tags=["nbval-ignore-output"]
torch.manual_seed(0)
stack = [blocks.EncoderBlock(d_model, n_heads, d_ff, norm_first=True).eval()
         for _ in range(12)]  # fmt: skip
stream = {"colleague": torch.randn(4, 10, d_model)}  # (B, T, D), std 1
stream["pre-norm"] = stream["colleague"].clone()
with torch.no_grad():
    for i, layer in enumerate(stack, start=1):
        parts = (lambda z, a=layer.attn: a(z)[0], layer.ff, layer.norm1, layer.norm2)
        stream["colleague"] = colleague(stream["colleague"], *parts)
        stream["pre-norm"] = layer(stream["pre-norm"])
        if i in (1, 4, 12):
            stds = ", ".join(f"{k} {v.std():.2f}" for k, v in stream.items())
            print(f"after {i:2d} blocks, std of the stream: {stds}")
assert stream["pre-norm"].std() > stream["colleague"].std() + 0.2  # pre-norm grows

# %% [markdown]
# Explain the two columns, then fix the block: write `pre_norm_block(x, self_attention,
# feed_forward, norm1, norm2)`, each argument after `x` a function from (B, T, D) to
# (B, T, D). The check compares it with `blocks.EncoderBlock(..., norm_first=True)` and
# names the mistake when it meets a known one (the colleague's among them).


# %%
def pre_norm_block(x, self_attention, feed_forward, norm1, norm2):
    # YOUR CODE HERE: the colleague's block, fixed
    raise NotImplementedError


# %% tags=["solution", "hide-cell"]
def pre_norm_block(x, self_attention, feed_forward, norm1, norm2):
    h = x + self_attention(norm1(x))  # (B, T, D): the skip path carries x itself
    return h + feed_forward(norm2(h))  # (B, T, D)


# %%
checks.check_pre_norm_block(pre_norm_block)

# %% [markdown]
# ### Exercise 3: how wide can the feed-forward network be?
#
# You may spend `budget` parameters on a token-embedding table (`vocab_size` rows) plus
# `n_layers` post-norm encoder blocks of width `d_model`. Write
# `max_d_ff(budget, n_layers, d_model, vocab_size)` that returns the largest $d_\text{ff}$
# (a Python `int`) that fits. Start from the table in section 6: how many parameters
# does one more unit of $d_\text{ff}$ cost per block?


# %%
def max_d_ff(budget, n_layers, d_model, vocab_size):
    # YOUR CODE HERE
    raise NotImplementedError


# %% tags=["solution", "hide-cell"]
def max_d_ff(budget, n_layers, d_model, vocab_size):
    # everything but the d_ff terms
    fixed = vocab_size * d_model + n_layers * (4 * d_model**2 + 9 * d_model)
    # each unit of d_ff costs a column of W1, an entry of b1 and a row of W2
    return (budget - fixed) // (n_layers * (2 * d_model + 1))


# %%
checks.check_max_d_ff(max_d_ff)

# %% [markdown]
# ### Exercise 4: how small should a residual branch start?
#
# Section 1 found that a residual stack of He-initialised sublayers doubles the
# second moment of its stream at every layer, $2^L$ over $L$ layers. Many recipes
# scale each branch down at initialisation, $x \leftarrow x + \alpha F(x)$. *Predict*
# first: by what factor does one such layer multiply the second moment? Then write
# `branch_scale(depth, growth)` that returns the $\alpha$ (a float) for which `depth`
# layers multiply it by `growth` in total. The cell after the check *measures* your
# $\alpha$ on the stacks of section 1.


# %%
def branch_scale(depth, growth):
    # YOUR CODE HERE
    raise NotImplementedError


# %% tags=["solution", "hide-cell"]
def branch_scale(depth, growth):
    # each layer: E[(x + αF(x))²] = (1 + α²) E[x²], since F keeps the second moment
    # and is uncorrelated with x at initialisation; so (1 + α²)^depth = growth
    return math.sqrt(growth ** (1 / depth) - 1)


# %%
checks.check_branch_scale(branch_scale)

# %% tags=["nbval-ignore-output"]
depth, alpha = depths[-1], branch_scale(depths[-1], 2.0)
# x <- x + α F(x) through He-initialised stacks: E[y²] / E[x²] of 256 random tokens
growth = deep_stacks.residual_growth(depth, grad_width, he_init_, alpha,
                                     range(n_seeds), run.device)  # fmt: skip
print(f"depth {depth}, α = {alpha:.4f}: the second moment grew by {growth:.2f}")
assert abs(growth - 2) < 0.4

# %% [markdown]
# ## What we added to the package
#
# - `transformer_book.norms.LayerNorm`: layer normalisation over the feature
#   axis, with learnable $\gamma$ (`weight`) and $\beta$ (`bias`).
# - `transformer_book.blocks.FeedForward`: the position-wise feed-forward sublayer.
# - `transformer_book.blocks.EncoderBlock`: attention and feed-forward with Add & Norm;
#   `norm_first=True` gives the pre-norm variant.
# - `transformer_book.blocks.Encoder`: a stack of blocks.
# - `transformer_book.blocks.load_torch_encoder_layer`: copies the weights of
#   `torch.nn.TransformerEncoderLayer` into an `EncoderBlock`.
# - `transformer_book.diagrams.blocks.encoder_block`: the diagram of the block, post-norm
#   or (`norm_first=True`) pre-norm.
# - `transformer_book.deep_stacks`: the deep-stack experiment of section 1
#   (`make_stacks`, `stack_forward`, `gradients`, `teacher_task`, `train_stacks`,
#   `walk_the_grid`, `train_arms`, `first_layer_gradients`, `input_share`,
#   `residual_growth`), and `transformer_book.deep_stack_readings`, what the chapter
#   prints of it (`gradient_table`, `plot_gradients`, `input_table`, `losses_table`,
#   `arm_means`, `rates_at_edge`, `first_step_table`).
# - `transformer_book.params`: closed-form parameter counts (`mha_params`,
#   `feed_forward_params`, `layer_norm_params`, `encoder_block_params`, `encoder_params`)
#   and `count_params` for modules.
