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
# # 2. Queries, keys, values and many heads
#
# Chapter 1's self-attention has nothing to learn: the similarity of two words is fixed by
# their vectors. This chapter gives it parameters and turns it into the multi-head
# attention layer used by every transformer. By the end of it you will be able to
#
# - explain queries, keys and values with the search-engine analogy and compute
#   $\mathrm{softmax}(QK^\top/\sqrt{d_k})\,V$;
# - show with numbers why the scores are divided by $\sqrt{d_k}$;
# - mask positions out of attention;
# - build multi-head attention (per-head projections, concatenation, output projection),
#   look at what each head attends to, and check it equal to PyTorch's
#   `nn.MultiheadAttention` (to 1e-5);
# - measure what attention costs in time and memory, and what a fused kernel saves.

# %% tags=["remove-cell"]
# Colab only: install this book's package (does nothing anywhere else).
import sys

if "google.colab" in sys.modules:
    import subprocess

    repo = "https://github.com/transformers-step-by-step/transformers-step-by-step"
    pip = [sys.executable, "-m", "pip", "install", "-q"]
    subprocess.run([*pip, f"transformer-book @ git+{repo}"], check=True)

# %%
import math

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn

from transformer_book import (
    attention,
    benchmark,
    checks,
    masks,
    plotting,
    runtime,
    training,
)

# %% tags=["parameters"]
device = "auto"  # "auto": cuda when available, else cpu
profile = "auto"  # "auto": full on a GPU, quick on a CPU

# %%
run = runtime.setup(device, profile, seed=0)
print(run)
train_steps = run.pick(quick=200, full=2000)  # heads experiment
cost_lengths = run.pick(
    quick=[128, 256, 512, 1024, 2048], full=[512, 1024, 2048, 4096, 8192, 16384]
)

# %% [markdown]
# ## Three roles for every word
#
# Think of a video site. You type a **query**. Every video has a **key**, its title, which
# the site compares with your query, and a **value**, the video itself, which is what you
# get back. Attention is a soft version of that lookup: instead of returning the single best
# match it returns a blend of all values, weighted by how well each key matches the query.
#
# A tiny library of three "videos" makes the idea concrete. The query is close to the
# second key, so the result is mostly the second value:

# %%
keys = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])  # (3, 2): three titles
values = torch.tensor(
    [[10.0, 0.0, 0.0], [0.0, 10.0, 0.0], [0.0, 0.0, 10.0]]
)  # (3, 3): their contents
query = torch.tensor([[0.2, 3.0]])  # (1, 2): a search request close to title 2
out, w = attention.scaled_dot_product_attention(query, keys, values, scale=1.0)
print(
    "weights:",
    [round(v, 3) for v in w[0].tolist()],
    "-> result:",
    [round(v, 2) for v in out[0].tolist()],
)

# %% [markdown]
# In self-attention, every word plays all three roles. Three learnable matrices $A_Q$,
# $A_K$, $A_V$ (each $d_\text{model}\times d_k$) turn the input rows into queries, keys and
# values,
#
# $$Q = XA_Q,\qquad K = XA_K,\qquad V = XA_V,\qquad Y = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right)V .$$
#
# Because the query and key of a word are now *different* vectors, a word no longer has to
# be most similar to itself, and training can decide what "similar" should mean. With
# random matrices, the share of words whose strongest weight falls on themselves drops
# sharply:

# %%
d_model, d_k, T = 32, 32, 12
X = torch.randn(200, T, d_model)  # (B, T, d_model): 200 random sentences
A_Q, A_K, A_V = (torch.randn(d_model, d_k) / math.sqrt(d_model) for _ in range(3))
_, W_plain = attention.scaled_dot_product_attention(
    X, X, X, scale=1.0
)  # parameter-free, as in chapter 1
_, W_proj = attention.scaled_dot_product_attention(X @ A_Q, X @ A_K, X @ A_V)
diagonal_share = lambda W: (W.argmax(dim=-1) == torch.arange(T)).float().mean().item()
print(
    f"rows whose largest weight is on the word itself: parameter-free {diagonal_share(W_plain):.1%}, "
    f"with A_Q, A_K, A_V {diagonal_share(W_proj):.1%} (chance: {1 / T:.1%})"
)

# %% [markdown]
# ## Why divide by $\sqrt{d_k}$
#
# If the entries of $q$ and $k$ are independent with mean 0 and variance 1, their dot
# product $q\cdot k = \sum_{i=1}^{d_k} q_i k_i$ is a sum of $d_k$ terms of variance 1, so its
# standard deviation is $\sqrt{d_k}$ {cite}`vaswani2017attention`. Wide heads produce large
# scores, and the softmax of large scores puts almost all the weight on one key. That is
# bad for learning: the gradient of a saturated softmax is close to zero. Dividing by
# $\sqrt{d_k}$ brings the standard deviation back to 1 whatever the width. We measure the
# largest weight in a row, and the gradient that reaches the scores, for growing $d_k$:


# %%
def saturation(
    d_k: int, scale: float, n_keys: int = 16, trials: int = 2000
) -> tuple[float, float]:
    """Mean largest softmax weight and mean gradient norm w.r.t. the scores, for random q, k."""
    q, k = torch.randn(trials, 1, d_k), torch.randn(trials, n_keys, d_k)
    scores = (q @ k.transpose(-2, -1) * scale).requires_grad_()  # (trials, 1, n_keys)
    w = scores.softmax(dim=-1)
    w.mul(torch.randn_like(w)).sum().backward()  # a random downstream gradient
    return w.max(dim=-1).values.mean().item(), scores.grad.norm(dim=-1).mean().item()


dims = [4, 16, 64, 256, 1024]
rows = [(d, *saturation(d, 1.0), *saturation(d, 1 / math.sqrt(d))) for d in dims]
print(
    "  d_k | max weight, unscaled | grad norm, unscaled | max weight, /sqrt(d_k) | grad norm, /sqrt(d_k)"
)
for d, mw, g, mws, gs in rows:
    print(f"{d:5d} | {mw:20.3f} | {g:19.4f} | {mws:22.3f} | {gs:21.4f}")

# %% tags=["hide-input"]
fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
axes[0].semilogx(dims, [r[1] for r in rows], "o-", label="q·k")
axes[0].semilogx(dims, [r[3] for r in rows], "s-", label="q·k / √d_k")
axes[0].axhline(1 / 16, color="gray", ls=":", label="uniform over 16 keys")
axes[0].set(xlabel="d_k", ylabel="mean largest weight", title="Softmax saturation")
axes[1].loglog(dims, [r[2] for r in rows], "o-", label="q·k")
axes[1].loglog(dims, [r[4] for r in rows], "s-", label="q·k / √d_k")
axes[1].set(
    xlabel="d_k", ylabel="mean ‖∂loss/∂scores‖", title="Gradient reaching the scores"
)
for ax in axes:
    ax.legend()
fig.tight_layout()
plt.show()

# %% [markdown]
# Unscaled, the largest weight climbs towards 1 (a hard, one-hot choice) and the gradient
# collapses as $d_k$ grows; scaled, both stay put.
#
# ## Masks: keys a query may not see
#
# Sentences in a batch have different lengths, so shorter ones are padded, and later
# chapters forbid a word to look at the future. Both are expressed by a boolean mask with
# **True = may attend**: before the softmax, every forbidden score is set to $-\infty$, so
# it gets weight exactly 0. `transformer_book.masks` builds the common masks:

# %%
lengths = torch.tensor([5, 3])
pad = masks.padding_mask(lengths, n_keys=5)  # (B, 1, 1, T): True for real tokens
print("padding mask, sentence of length 3:", pad[1, 0, 0].tolist())
print("causal mask, 4 positions:\n", masks.causal_mask(4).int())

# %% [markdown]
# The package's function also handles a query that may attend to *nothing*: its output is
# zero rather than the NaN a softmax over only $-\infty$ would give.

# %%
q = k = v = torch.randn(2, 5, 8)  # (B, T, d)
out, w = attention.scaled_dot_product_attention(
    q, k, v, mask=pad[:, 0]
)  # mask (B, 1, T) broadcasts over queries
print("weights of sentence 2, query 1:", [round(x, 3) for x in w[1, 0].tolist()])
nothing = torch.zeros(1, 5, dtype=torch.bool)  # (Tq=1, Tk=5): this query may see no key
print(
    "fully masked row -> output",
    attention.scaled_dot_product_attention(q[:1, :1], k[:1], v[:1], mask=nothing)[0]
    .flatten()
    .tolist(),
)

# %% [markdown]
# ## Checking against PyTorch
#
# PyTorch ships the same computation as one fused call,
# `torch.nn.functional.scaled_dot_product_attention`, which never hands back the weights.
# It uses the same mask convention (True = may attend). Our explicit version, and the
# package's fast path (`need_weights=False`, which calls the fused kernel), must agree with
# it to float32 precision:

# %%
gen = torch.Generator().manual_seed(0)
q, k, v = (torch.randn(2, 4, 7, 16, generator=gen) for _ in range(3))  # (B, H, T, Dh)
mask = masks.causal_mask(7) & masks.padding_mask(
    torch.tensor([7, 4]), 7
)  # (T, T) & (B, 1, 1, T) -> (B, 1, T, T)
ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
explicit, _ = attention.scaled_dot_product_attention(q, k, v, mask=mask)
fused, _ = attention.scaled_dot_product_attention(
    q, k, v, mask=mask, need_weights=False
)
torch.testing.assert_close(explicit, ref, atol=1e-5, rtol=0)
torch.testing.assert_close(fused, ref, atol=1e-5, rtol=0)
print(
    f"explicit vs torch: {(explicit - ref).abs().max():.1e}, fused path vs torch: {(fused - ref).abs().max():.1e}"
)

# %% [markdown]
# ## Many heads
#
# One attention pattern per layer is limiting: a word may need to look at its verb *and*
# at the noun it refers to. Multi-head attention runs $H$ attentions side by side, each
# with its own $A_Q^{(h)}, A_K^{(h)}, A_V^{(h)}$ of width $d_k = d_\text{model}/H$, then
# concatenates their outputs and mixes them with an output matrix $A_O$:
#
# $$\mathrm{head}_h = \mathrm{softmax}\!\left(\frac{XA_Q^{(h)}\,(XA_K^{(h)})^\top}{\sqrt{d_k}}\right)XA_V^{(h)},\qquad
#   Y = \big[\mathrm{head}_1, \dots, \mathrm{head}_H\big]\,A_O .$$
#
# First with a loop over heads, so each step is visible:


# %%
def multi_head_loop(X, A_Q, A_K, A_V, A_O):
    """Shapes: X (T, d_model); A_Q/A_K/A_V lists of H (d_model, d_k) matrices; A_O (H·d_k, d_model)."""
    heads = [
        attention.scaled_dot_product_attention(X @ Aq, X @ Ak, X @ Av)[0]
        for Aq, Ak, Av in zip(A_Q, A_K, A_V)
    ]
    return (
        torch.cat(heads, dim=-1) @ A_O
    )  # (T, H·d_k) @ (H·d_k, d_model) -> (T, d_model)


d_model, H = 16, 4
d_k = d_model // H
mha = attention.MultiHeadAttention(d_model, H, bias=False)
# The module stores all heads' A_Q side by side in one (d_model, d_model) matrix; head h owns columns h·d_k ... (h+1)·d_k.
per_head = lambda lin: [lin.weight.T[:, h * d_k : (h + 1) * d_k] for h in range(H)]
X = torch.randn(6, d_model)  # (T, d_model)
Y_loop = multi_head_loop(
    X,
    per_head(mha.q_proj),
    per_head(mha.k_proj),
    per_head(mha.v_proj),
    mha.o_proj.weight.T,
)
Y_module, _ = mha(X[None])  # the module works on batches: (1, T, d_model)
torch.testing.assert_close(Y_module[0], Y_loop)
print("loop over heads == MultiHeadAttention:", tuple(Y_module.shape))

# %% [markdown]
# The module avoids the loop. One $d_\text{model}\times d_\text{model}$ projection computes
# the queries of all heads at once; a reshape then cuts the feature axis into $H$ slices of
# width $d_k$ and moves the head axis forward, so the attention of all heads is one batched
# matrix product:

# %%
x = torch.randn(2, 6, d_model)  # (B, T, d_model)
q_all = mha.q_proj(x)  # (B, T, H·d_k)
q_heads = q_all.view(2, 6, H, d_k).transpose(1, 2)  # (B, T, H, d_k) -> (B, H, T, d_k)
torch.testing.assert_close(q_heads, attention.split_heads(q_all, H))
torch.testing.assert_close(
    attention.merge_heads(q_heads), q_all
)  # and back: (B, H, T, d_k) -> (B, T, H·d_k)
print(
    "split:",
    tuple(q_all.shape),
    "->",
    tuple(q_heads.shape),
    "; merge restores the original",
)

# %% [markdown]
# ## Equal to `nn.MultiheadAttention`
#
# PyTorch's layer stores the three input projections stacked in one `in_proj_weight` and
# the output projection in `out_proj`. Copy our weights into it and the outputs must match.
# One trap: its `key_padding_mask` uses the **opposite** convention, True = *ignore*, so our
# mask is passed negated.

# %%
d_model, H, B, T = 32, 4, 3, 9
ours = attention.MultiHeadAttention(d_model, H).eval()
theirs = nn.MultiheadAttention(d_model, H, batch_first=True).eval()
with torch.no_grad():
    theirs.in_proj_weight.copy_(
        torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight])
    )
    theirs.in_proj_bias.copy_(
        torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias])
    )
    theirs.out_proj.weight.copy_(ours.o_proj.weight)
    theirs.out_proj.bias.copy_(ours.o_proj.bias)

x = torch.randn(B, T, d_model)
keep = masks.padding_mask(torch.tensor([9, 6, 2]), T)  # (B, 1, 1, T), True = may attend
out_ours, w_ours = ours(x, mask=keep, need_weights=True)
out_theirs, w_theirs = theirs(
    x, x, x, key_padding_mask=~keep[:, 0, 0], average_attn_weights=False
)  # True = ignore
torch.testing.assert_close(out_ours, out_theirs, atol=1e-5, rtol=0)
torch.testing.assert_close(w_ours, w_theirs, atol=1e-5, rtol=0)
print(
    f"max |difference|: output {(out_ours - out_theirs).abs().max():.1e}, weights {(w_ours - w_theirs).abs().max():.1e}"
)

# %% [markdown]
# ## What heads learn
#
# Random heads attend diffusely. To see heads specialise, train a two-head layer on a task
# that needs two different lookups: at every position, name the token **before** it and the
# token **after** it (wrapping around at the ends). Positions are not part of attention yet
# (chapter 4), so each input vector is the concatenation of a one-hot token and a one-hot
# position.

# %%
n_tokens, T = 8, 8
d_model = n_tokens + T  # one-hot token | one-hot position


def make_batch(batch_size: int, gen: torch.Generator):
    tokens = torch.randint(n_tokens, (batch_size, T), generator=gen)  # (B, T)
    x = torch.cat(
        [
            F.one_hot(tokens, n_tokens),
            F.one_hot(torch.arange(T), T).expand(batch_size, T, T),
        ],
        dim=-1,
    )
    return (
        x.float(),
        tokens.roll(1, dims=1),
        tokens.roll(-1, dims=1),
    )  # inputs, previous token, next token


class NeighbourModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = attention.MultiHeadAttention(d_model, n_heads=2)
        self.prev_head, self.next_head = (
            nn.Linear(d_model, n_tokens),
            nn.Linear(d_model, n_tokens),
        )

    def forward(self, x):
        h, w = self.attn(x, need_weights=True)  # (B, T, d_model), (B, 2, T, T)
        return self.prev_head(h), self.next_head(h), w


def loss_fn(model, batch):
    x, prev, nxt = batch
    lp, ln, _ = model(x)
    return F.cross_entropy(lp.flatten(0, 1), prev.flatten()) + F.cross_entropy(
        ln.flatten(0, 1), nxt.flatten()
    )


gen = torch.Generator().manual_seed(0)
model = NeighbourModel()
history = training.train(
    model, [make_batch(64, gen) for _ in range(50)], loss_fn, steps=train_steps, lr=1e-2
)
x, prev, nxt = make_batch(1000, gen)
with torch.no_grad():
    lp, ln, w = model(x)
print(
    f"loss {history[0]:.2f} -> {history[-1]:.3f}; held-out accuracy: previous token "
    f"{(lp.argmax(-1) == prev).float().mean():.1%}, next token {(ln.argmax(-1) == nxt).float().mean():.1%}"
)

# %% tags=["hide-input"]
labels = [f"p{i}" for i in range(T)]
plotting.attention_maps(w[0], labels, title="head")
plt.show()

# %% [markdown]
# Each head has settled on one lookup: one attends from position $i$ to $i-1$, the other to
# $i+1$ (the wrap-around shows in the corners). The output projection then routes each
# head's finding to the classifier that needs it. Measured on the batch above, the share of
# each head's weight that lands on the two neighbours:

# %%
offsets = {"i-1": torch.arange(T).roll(1), "i+1": torch.arange(T).roll(-1)}
for h in range(2):
    shares = {
        name: w[:, h, torch.arange(T), idx].mean().item()
        for name, idx in offsets.items()
    }
    print(
        f"head {h}: "
        + ", ".join(f"weight on {name} = {s:.2f}" for name, s in shares.items())
    )

# %% [markdown]
# ## What attention costs
#
# The explicit computation materialises the $T\times T$ score matrix (per head), and the
# softmax another one: memory grows as $T^2$. A fused kernel such as PyTorch's
# `scaled_dot_product_attention` (flash attention and its relatives
# {cite}`dao2022flashattention,rabe2021selfattention`) computes the same output in tiles
# with a running softmax, so the full matrix never exists. A later chapter writes that
# algorithm out; here we measure the difference, for one sequence with 4 heads of width 64.

# %%
cost = []
for seq_len in cost_lengths:
    q, k, v = (
        torch.randn(1, 4, seq_len, 64, device=run.device) for _ in range(3)
    )  # (B, H, T, Dh)
    naive = lambda: attention.scaled_dot_product_attention(q, k, v, need_weights=True)
    fused = lambda: attention.scaled_dot_product_attention(q, k, v, need_weights=False)
    cost.append(
        dict(
            T=seq_len,
            naive_s=benchmark.median_time(naive, device=run.device),
            fused_s=benchmark.median_time(fused, device=run.device),
            naive_mb=benchmark.allocated_bytes(naive, run.device) / 2**20,
            fused_mb=benchmark.allocated_bytes(fused, run.device) / 2**20,
            scores_mb=4 * seq_len**2 * 4 / 2**20,
        )
    )  # one float32 (H, T, T) matrix
print("lengths measured:", [c["T"] for c in cost])

# %% tags=["hide-input"]
fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
Ts = [c["T"] for c in cost]
axes[0].loglog(Ts, [c["naive_s"] for c in cost], "o-", label="explicit (weights kept)")
axes[0].loglog(Ts, [c["fused_s"] for c in cost], "s-", label="fused kernel")
axes[0].set(
    xlabel="sequence length T",
    ylabel="seconds (median)",
    title=f"Time, {run.device.type}",
)
axes[1].loglog(Ts, [c["naive_mb"] for c in cost], "o-", label="explicit (weights kept)")
axes[1].loglog(Ts, [c["fused_mb"] for c in cost], "s-", label="fused kernel")
axes[1].loglog(Ts, [c["scores_mb"] for c in cost], "k:", label="one T×T score matrix")
axes[1].set(xlabel="sequence length T", ylabel="MiB allocated", title="Memory")
for ax in axes:
    ax.legend()
fig.tight_layout()
plt.show()

# %% tags=["nbval-ignore-output"]
print(
    "     T | explicit ms | fused ms | time ratio | explicit MiB | fused MiB | memory ratio"
)
for c in cost:
    print(
        f"{c['T']:6d} | {c['naive_s'] * 1e3:11.2f} | {c['fused_s'] * 1e3:8.2f} | {c['naive_s'] / c['fused_s']:10.1f} "
        f"| {c['naive_mb']:12.1f} | {c['fused_mb']:9.1f} | {c['naive_mb'] / c['fused_mb']:12.1f}"
    )

# %% [markdown]
# The explicit version's memory follows the $T^2$ line of the score matrix (a small
# multiple of it: scores, softmax and output each need space), while the fused kernel's
# stays close to the size of $Q$, $K$ and $V$ themselves. At the longer lengths the fused
# kernel is also faster, since it makes fewer passes over memory; at the shortest ones the two
# are within the noise of the measurement. Timings depend on the machine that executed this
# page, so they are printed above rather than quoted.
#
# ## Exercises
#
# ### Exercise 1: masked, scaled attention
#
# Write `masked_attention(q, k, v, mask)` returning `(output, weights)` for $q$ of shape
# $(\dots, T_q, d_k)$, $k$ of shape $(\dots, T_k, d_k)$, $v$ of shape $(\dots, T_k, d_v)$ and a boolean
# mask broadcastable to $(\dots, T_q, T_k)$ with True = may attend. Every query may attend
# to at least one key.


# %%
def masked_attention(q, k, v, mask):
    # YOUR CODE HERE
    raise NotImplementedError


# %% tags=["solution", "hide-cell"]
def masked_attention(q, k, v, mask):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., Tq, Tk)
    weights = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1)
    return weights @ v, weights


# %%
checks.check_masked_attention(masked_attention)

# %% [markdown]
# ### Exercise 2: splitting into heads
#
# Write `split_into_heads(x, n_heads)` that turns $(B, T, D)$ into $(B, H, T, D/H)$, where head
# $h$ holds features $h\cdot D/H$ to $(h+1)\cdot D/H - 1$ of every token. (A plain
# `reshape(B, H, T, D // H)` has the right shape but the wrong contents; the check tells you
# if you fell for it.)


# %%
def split_into_heads(x, n_heads):
    # YOUR CODE HERE
    raise NotImplementedError


# %% tags=["solution", "hide-cell"]
def split_into_heads(x, n_heads):
    B, T, D = x.shape
    return x.view(B, T, n_heads, D // n_heads).transpose(1, 2)  # (B, H, T, Dh)


# %%
checks.check_split_heads(split_into_heads)

# %% [markdown]
# ### Exercise 3: counting parameters
#
# Write `mha_parameters(d_model, n_heads)`: how many parameters does
# `MultiHeadAttention(d_model, n_heads)` (with biases) have? Does the number of heads matter?


# %%
def mha_parameters(d_model, n_heads):
    # YOUR CODE HERE
    raise NotImplementedError


# %% tags=["solution", "hide-cell"]
def mha_parameters(d_model, n_heads):
    return 4 * (d_model * d_model + d_model)  # q, k, v, o projections, each with a bias


# %%
checks.check_mha_parameter_count(mha_parameters)

# %% [markdown]
# ## What we added to the package
#
# - `transformer_book.attention.scaled_dot_product_attention`: scale, boolean mask
#   (True = may attend), additive bias, zero output for fully masked queries, and a fused
#   path when `need_weights=False`.
# - `transformer_book.attention.MultiHeadAttention(d_model, n_heads)` with `q_proj`,
#   `k_proj`, `v_proj`, `o_proj`, and the reshapes `split_heads` / `merge_heads`.
# - `transformer_book.masks.padding_mask`, `padding_mask_from_ids`, `causal_mask`.
# - `transformer_book.training.train`: the small training loop used for the two-head model.
# - `transformer_book.benchmark.allocated_bytes`: the memory measurement.
