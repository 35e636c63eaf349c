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
# Chapter 1's self-attention has nothing to learn: the similarity of two words is fixed
# by their vectors. This chapter gives it parameters and turns it into the multi-head
# attention layer used by every transformer. By the end of it you will be able to
#
# - explain queries, keys and values with the search-engine analogy and compute
#   $\mathrm{softmax}(QK^\top/\sqrt{d_k})\,V$;
# - show with numbers why the scores are divided by $\sqrt{d_k}$;
# - mask positions out of attention;
# - build multi-head attention (per-head projections, concatenation, output
#   projection), find each head's columns inside the projection matrices, and check the
#   layer equal to PyTorch's `nn.MultiheadAttention` (to 1e-5);
# - train heads to specialise and read off what each one attends to;
# - measure what attention costs in time and memory, and what a fused kernel saves.

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
import copy
import math

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn

from transformer_book import (
    attention,
    benchmark,
    checks,
    diagrams,
    grouped_heads,
    masks,
    neighbours,
    plotting,
    report,
    runtime,
)

# %% tags=["parameters"]
device = "auto"  # "auto": CUDA, else Apple MPS, else the CPU
profile = "auto"  # "auto": quick on every device; "full" by name

# %%
# On a CPU, one thread: the tiny models here gain nothing from more, and timings on a
# busy machine are steadier.
run = runtime.setup(device, profile, seed=0, cpu_threads=1)
print(run)
train_steps = run.pick(quick=200, full=2000)  # heads experiment
n_seeds = run.pick(quick=3, full=5)  # initialisations of the heads experiment
cost_lengths = run.pick(
    quick=[128, 256, 512, 1024, 2048], full=[512, 1024, 2048, 4096, 8192, 16384]
)

# %% [markdown]
# ## Three roles for every word
#
# Think of a video site. You type a **query**. Every video has a **key**, its title,
# which the site compares with your query, and a **value**, the video itself, which is
# what you get back. Attention is a soft version of that lookup: instead of returning
# the single best match it returns a blend of all values, weighted by how well each key
# matches the query.
#
# A tiny library of three "videos" makes the idea concrete. The query is close to the
# second key, so the result is mostly the second value:

# %% tags=["nbval-ignore-output"]
keys = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])  # (3, 2): three titles
# (3, 3): their contents
values = torch.tensor([[10.0, 0.0, 0.0], [0.0, 10.0, 0.0], [0.0, 0.0, 10.0]])
query = torch.tensor([[0.2, 3.0]])  # (1, 2): a search request close to title 2
out, w = attention.scaled_dot_product_attention(query, keys, values, scale=1.0)
print("weights:", w[0].numpy().round(3), "-> result:", out[0].numpy().round(2))
assert w[0].argmax() == 1 and w[0, 1] > 0.9  # mostly the second video
torch.testing.assert_close(out, w @ values)  # a blend of the values

# %% [markdown]
# In self-attention, every word plays all three roles. Three learnable matrices $A_Q$,
# $A_K$ (each $d_\text{model}\times d_k$) and $A_V$ ($d_\text{model}\times d_v$) turn
# the input rows into queries, keys and values,
#
# $$Q = XA_Q,\qquad K = XA_K,\qquad V = XA_V,\qquad
#   Y = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right)V .$$
#
# The diagram follows one query (row 2) through the computation: its scores against
# every key, the softmax of that row, and the weighted average of the rows of $V$.

# %% tags=["hide-input"] mystnb={"image": {"alt": "Data flow of scaled dot-product attention. X (T by d) is multiplied by three weight matrices A_Q, A_K and A_V to give Q and K (T by d_k) and V (T by d_v). Q and K enter a box computing Q K transposed over the square root of d_k, which gives a T by T score matrix; a softmax of each row turns it into the weight matrix W, whose rows sum to one; W times V gives the output (T by d_v). Row 2 is highlighted in Q, in the scores, in W and in the output: query 2's weights mix the rows of V into row 2 of the output."}}
diagrams.attention.scaled_dot_product_attention()
plt.show()

# %% [markdown]
# Because the query and key of a word are now *different* vectors, a word no longer has
# to be most similar to itself, and training can decide what "similar" should mean.
# With random matrices (five draws, to see how much the answer depends on the draw),
# the share of words whose strongest weight falls on themselves drops to about chance:

# %% tags=["nbval-ignore-output"]
d_model, d_k, T = 32, 32, 12
X = torch.randn(200, T, d_model)  # (B, T, d_model): 200 random sentences
_, W_plain = attention.scaled_dot_product_attention(X, X, X, scale=1.0)  # chapter 1
on_itself = lambda W: (W.argmax(dim=-1) == torch.arange(T)).float().mean().item()
shares = []
for seed in range(5):
    gen = torch.Generator().manual_seed(seed)
    A_Q, A_K, A_V = (
        torch.randn(d_model, d_k, generator=gen) / math.sqrt(d_model) for _ in range(3)
    )
    _, W_proj = attention.scaled_dot_product_attention(X @ A_Q, X @ A_K, X @ A_V)
    shares.append(on_itself(W_proj))
shares = torch.tensor(shares)
print(f"largest weight on the word itself, parameter-free: {on_itself(W_plain):.1%}")
spread = f"min–max {shares.min():.1%}–{shares.max():.1%}"
print(f"with random A_Q, A_K, A_V: mean {shares.mean():.1%} over 5 draws, {spread}")
print(f"chance: {1 / T:.1%}")
assert on_itself(W_plain) > 0.95 and shares.max() < 2 / T

# %% [markdown]
# ## Why divide by $\sqrt{d_k}$
#
# If the entries of $q$ and $k$ are independent with mean 0 and variance 1, their dot
# product $q\cdot k = \sum_{i=1}^{d_k} q_i k_i$ is a sum of $d_k$ terms of variance 1,
# so its standard deviation is $\sqrt{d_k}$ {cite}`vaswani2017attention`. Wide heads
# produce large scores, and the softmax of large scores puts almost all the weight on
# one key. That is bad for learning: the gradient of a saturated softmax is close to
# zero. Dividing by $\sqrt{d_k}$ brings the standard deviation back to 1 whatever the
# width. We measure the largest weight in a row, and the gradient that reaches the
# scores, for growing $d_k$:


# %%
def saturation(
    d_k: int, scale: float, n_keys: int = 16, trials: int = 2000
) -> tuple[float, float]:
    """Mean largest softmax weight and mean gradient norm at the scores, random q, k."""
    q, k = torch.randn(trials, 1, d_k), torch.randn(trials, n_keys, d_k)
    # (trials, 1, n_keys)
    scores = (q @ k.transpose(-2, -1) * scale).requires_grad_()
    w = scores.softmax(dim=-1)
    w.mul(torch.randn_like(w)).sum().backward()  # a random downstream gradient
    return w.max(dim=-1).values.mean().item(), scores.grad.norm(dim=-1).mean().item()


# %% tags=["nbval-ignore-output"]
dims = [4, 16, 64, 256, 1024]
rows = [(d, *saturation(d, 1.0), *saturation(d, 1 / math.sqrt(d))) for d in dims]
print("       |      unscaled: q·k      |     scaled: q·k/√d_k")
print("   d_k | max weight | grad norm | max weight | grad norm")
for d, mw, g, mws, gs in rows:
    print(f"{d:6d} | {mw:10.3f} | {g:9.4f} | {mws:10.3f} | {gs:9.4f}")
_, unscaled_w, unscaled_g, scaled_w, scaled_g = (torch.tensor(c) for c in zip(*rows))
assert (unscaled_w.diff() > 0).all() and unscaled_w[-1] > 0.9  # towards one-hot
assert unscaled_g[-1] < unscaled_g[0] / 4  # the gradient collapses
assert unscaled_w[1] < 0.75 < unscaled_w[2]  # 16 keys pass 0.75 between d_k 16 and 64
assert scaled_w.max() - scaled_w.min() < 0.05  # scaled: the same at every width
assert scaled_g.max() / scaled_g.min() < 1.2

# %% tags=["hide-input"]
fig, axes = plt.subplots(1, 2, figsize=plotting.WIDE)
axes[0].axhline(1 / 16, color="gray", ls=":", label="uniform over 16 keys")
plotting.curves(dims, {"q·k": unscaled_w, "q·k / √d_k": scaled_w}, axes[0],
                xscale="log", xlabel="d_k", ylabel="mean largest weight",
                title="Softmax saturation")  # fmt: skip
plotting.curves(dims, {"q·k": unscaled_g, "q·k / √d_k": scaled_g}, axes[1],
                xscale="log", yscale="log", xlabel="d_k", ylabel="mean ‖∂loss/∂scores‖",
                title="Gradient at the scores")  # fmt: skip
axes[1].set_yticks([0.03, 0.1, 0.3], ["0.03", "0.1", "0.3"])
fig.tight_layout()
plt.show()

# %% [markdown]
# Unscaled, the largest weight climbs towards 1 (a hard, one-hot choice) and the
# gradient collapses as $d_k$ grows; scaled, both stay put. The cell above asserts
# both halves of that sentence.
#
# ## Masks: keys a query may not see
#
# Sentences in a batch have different lengths, so shorter ones are padded, and later
# chapters forbid a word to look at the future. Both are expressed by a boolean mask
# with **True = may attend**: before the softmax, every forbidden score is set to
# $-\infty$, so it gets weight exactly 0. `transformer_book.masks` builds the common
# masks:

# %%
lengths = torch.tensor([5, 3])
pad = masks.padding_mask(lengths, n_keys=5)  # (B, 1, 1, T): True for real tokens
print("padding mask, sentence of length 3:", pad[1, 0, 0].tolist())
print("causal mask, 4 positions:\n", masks.causal_mask(4).int())

# %% [markdown]
# Applied to the second sentence, the two padded keys get weight exactly 0 and the
# three real ones share all of it. The package's function also handles a query that
# may attend to *nothing*: its output is zero rather than the NaN a softmax over only
# $-\infty$ would give.

# %%
q = k = v = torch.randn(2, 5, 8)  # (B, T, d)
# mask (B, 1, T) broadcasts over the queries
out, w = attention.scaled_dot_product_attention(q, k, v, mask=pad[:, 0])
print("sentence 2, query 1: weights on the padded keys", w[1, 0, 3:].tolist())
real_sum = w[1, 0, :3].sum()
print("weights on the real keys sum to 1:",
      torch.isclose(real_sum, torch.tensor(1.0)).item())  # fmt: skip
nothing = torch.zeros(1, 5, dtype=torch.bool)  # (Tq=1, Tk=5): this query sees no key
out_1, _ = attention.scaled_dot_product_attention(q[:1, :1], k[:1], v[:1], mask=nothing)
print("fully masked row -> output", out_1.flatten().tolist())

# %% [markdown]
# ## Checking against PyTorch
#
# PyTorch ships the same computation as one fused call,
# `torch.nn.functional.scaled_dot_product_attention`, which never hands back the
# weights. It uses the same mask convention (True = may attend). Our explicit version,
# and the package's fast path (`need_weights=False`, which calls the fused kernel), must
# agree with it to float32 precision:

# %%
gen = torch.Generator().manual_seed(0)
q, k, v = (torch.randn(2, 4, 7, 16, generator=gen) for _ in range(3))  # (B, H, T, Dh)
# (T, T) & (B, 1, 1, T) -> (B, 1, T, T)
mask = masks.causal_mask(7) & masks.padding_mask(torch.tensor([7, 4]), 7)
ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
explicit, _ = attention.scaled_dot_product_attention(q, k, v, mask=mask)
fused, _ = attention.scaled_dot_product_attention(
    q, k, v, mask=mask, need_weights=False
)
torch.testing.assert_close(explicit, ref, atol=1e-5, rtol=0)
torch.testing.assert_close(fused, ref, atol=1e-5, rtol=0)
print("explicit and fused paths agree with torch within 1e-5:", True)

# %% [markdown]
# ## Many heads
#
# One attention pattern per layer is limiting: a word may need to look at its verb
# *and* at the noun it refers to. Multi-head attention runs $H$ attentions side by
# side, each with its own $A_Q^{(h)}, A_K^{(h)}, A_V^{(h)}$ of width
# $d_k = d_\text{model}/H$, then concatenates their outputs and mixes them with an
# output matrix $A_O$:
#
# $$\mathrm{head}_h = \mathrm{softmax}\!\left(\frac{XA_Q^{(h)}\,(XA_K^{(h)})^\top}
#   {\sqrt{d_k}}\right)XA_V^{(h)},\qquad
#   Y = \big[\mathrm{head}_1, \dots, \mathrm{head}_H\big]\,A_O .$$
#
# A layer does not store $3H$ small matrices. It stores one
# $d_\text{model}\times d_\text{model}$ matrix per role, the $H$ per-head matrices side
# by side: head $h$ owns columns $h\,d_k$ to $(h+1)\,d_k - 1$. One product then
# computes every head's queries at once, and a reshape cuts them apart. On the way
# out, the concatenation meets $A_O$, whose rows $h\,d_k$ to $(h+1)\,d_k - 1$ read
# head $h$. One detail trips many readers: `nn.Linear` stores its weight as (out, in)
# and computes $x\,W^\top$, so $A_Q$ is `q_proj.weight.T`, and head $h$'s block is
# `q_proj.weight.T[:, h*d_k:(h+1)*d_k]`.

# %% tags=["hide-input"] mystnb={"image": {"alt": "Multi-head attention with three heads of width 2 and d_model 6. Top row: X (B, T, 6) times A_Q = q_proj.weight.T, a 6 by 6 matrix whose column pairs are coloured blue, red and green for heads 0, 1 and 2, gives Q with the same coloured column pairs; split_heads (a view to (B, T, H, d_k) and a transpose) cuts Q into three separate (T, 2) grids, one per head. Middle: attention runs in every head at once, with K and V split the same way. Bottom row: the three head outputs are merged (transpose and reshape) into one (B, T, 6) concatenation with coloured column pairs, which is multiplied by A_O = o_proj.weight.T, whose row pairs are coloured by head, giving Y (B, T, d_model)."}}
diagrams.attention.multi_head_attention()
plt.show()

# %% [markdown]
# First with a loop over heads, taking each head's matrices out of the package's module
# by exactly that slicing, so each step is visible:


# %%
def multi_head_loop(X, A_Q, A_K, A_V, A_O):
    """Shapes: X (T, d_model); A_Q/A_K/A_V lists of H (d_model, d_k); A_O (H·d_k, d)."""
    heads = [
        attention.scaled_dot_product_attention(X @ Aq, X @ Ak, X @ Av)[0]
        for Aq, Ak, Av in zip(A_Q, A_K, A_V)
    ]
    # (T, H·d_k) @ (H·d_k, d_model) -> (T, d_model)
    return torch.cat(heads, dim=-1) @ A_O


d_model, H = 16, 4
d_k = d_model // H
mha = attention.MultiHeadAttention(d_model, H, bias=False)
# head h's (d_model, d_k) block: columns h·d_k ... (h+1)·d_k - 1 of weight.T
per_head = lambda lin: [lin.weight.T[:, h * d_k : (h + 1) * d_k] for h in range(H)]
X = torch.randn(6, d_model)  # (T, d_model)
A_Q, A_K, A_V = (per_head(p) for p in (mha.q_proj, mha.k_proj, mha.v_proj))
Y_loop = multi_head_loop(X, A_Q, A_K, A_V, mha.o_proj.weight.T)
Y_module, _ = mha(X[None])  # the module works on batches: (1, T, d_model)
torch.testing.assert_close(Y_module[0], Y_loop)
print("loop over heads == MultiHeadAttention:", tuple(Y_module.shape))

# %% [markdown]
# The module avoids the loop. One $d_\text{model}\times d_\text{model}$ projection
# computes the queries of all heads at once; `split_heads` views the feature axis as
# $H$ slices of width $d_k$ and moves the head axis forward, so the attention of all
# heads is one batched matrix product; `merge_heads` undoes it:

# %%
x = torch.randn(2, 6, d_model)  # (B, T, d_model)
q_all = mha.q_proj(x)  # (B, T, H·d_k)
q_heads = q_all.view(2, 6, H, d_k).transpose(1, 2)  # (B, T, H, d_k) -> (B, H, T, d_k)
torch.testing.assert_close(q_heads, attention.split_heads(q_all, H))
# and back: (B, H, T, d_k) -> (B, T, H·d_k)
torch.testing.assert_close(attention.merge_heads(q_heads), q_all)
print(f"split: {tuple(q_all.shape)} -> {tuple(q_heads.shape)}; merge restores it")

# %% [markdown]
# ## Equal to `nn.MultiheadAttention`
#
# PyTorch's layer stores the three input projections stacked in one `in_proj_weight`
# and the output projection in `out_proj`. Copy our weights into it and the outputs
# must match. One trap: its `key_padding_mask` uses the **opposite** convention,
# True = *ignore*, so our mask is passed negated.

# %%
d_model, H, B, T = 32, 4, 3, 9
ours = attention.MultiHeadAttention(d_model, H).eval()
theirs = nn.MultiheadAttention(d_model, H, batch_first=True).eval()
with torch.no_grad():
    projections = (ours.q_proj, ours.k_proj, ours.v_proj)
    theirs.in_proj_weight.copy_(torch.cat([p.weight for p in projections]))
    theirs.in_proj_bias.copy_(torch.cat([p.bias for p in projections]))
    theirs.out_proj.weight.copy_(ours.o_proj.weight)
    theirs.out_proj.bias.copy_(ours.o_proj.bias)

x = torch.randn(B, T, d_model)
keep = masks.padding_mask(torch.tensor([9, 6, 2]), T)  # (B, 1, 1, T), True = may attend
out_ours, w_ours = ours(x, mask=keep, need_weights=True)
ignore = ~keep[:, 0, 0]  # (B, T), True = ignore: PyTorch's convention
out_theirs, w_theirs = theirs(
    x, x, x, key_padding_mask=ignore, average_attn_weights=False
)
torch.testing.assert_close(out_ours, out_theirs, atol=1e-5, rtol=0)
torch.testing.assert_close(w_ours, w_theirs, atol=1e-5, rtol=0)
print("outputs and weights agree with nn.MultiheadAttention within 1e-5:", True)

# %% [markdown]
# ## What heads learn
#
# An untrained head has no reason to favour any particular offset. To see heads specialise, train a two-head layer on a
# task that needs two different lookups: at every position, name the token **before**
# it and the token **after** it (wrapping around at the ends). Positions are not part
# of attention yet (chapter 4), so each input vector is the concatenation of a one-hot
# token and a one-hot position.
#
# `transformer_book.neighbours` holds the task and the model: `make_batch` draws random
# sequences of 8 token types and 8 positions with the two targets,
# `NeighbourModel` is one two-head `MultiHeadAttention` with a linear read-out per
# target, `train_neighbours(make_batch, seed, steps)` trains one from a seed (AdamW at
# learning rate 0.01 with `training.train`, cycling over 50 batches of 64 sequences
# for `steps` steps, the loss summing the two targets' cross-entropies) and
# evaluates it on 1000 fresh sequences, and `weight_at(w, offset)` measures, for
# each head, the mean weight it puts on position $(i + \text{offset}) \bmod T$:

# %%
n_tokens, T = neighbours.N_TOKENS, neighbours.LENGTH
x, (before, after) = neighbours.make_batch(1, torch.Generator().manual_seed(0))
print("input:", tuple(x.shape), "= (B, T, one-hot token | one-hot position)")
print("tokens:         ", x[0, :, :n_tokens].argmax(-1).tolist())
print("token before i: ", before[0].tolist())
print("token after i:  ", after[0].tolist())

# %% [markdown]
# Train from several seeds: a head that specialises in one seed might be luck. For
# every seed, the table shows the held-out accuracy and the weight the best head for
# each lookup puts on its neighbour.

# %% tags=["nbval-ignore-output"]
runs = [
    neighbours.train_neighbours(neighbours.make_batch, seed, train_steps)
    for seed in range(n_seeds)
]
# best (seeds, 4): accuracy before, after; weight on i-1, on i+1 of the best head
best, heads, table = neighbours.seed_table(runs)
print("\n".join(table))
assert all(h_prev != h_next for h_prev, h_next in heads)  # two heads, two lookups
print(f"min over seeds: accuracy {best[:, :2].min():.1%}", end=", ")
print(f"weight on the neighbour {best[:, 2:].min():.2f}")
report.glue("heads_min_weight", best[:, 2:].min().item(), "{:.2f}")
same = len(set(heads)) == 1
report.glue("assignment", "the same in every seed" if same else "not the same")
assert best[:, :2].min() > 0.99 and best[:, 2:].min() > 0.6

# %% tags=["hide-input"]
labels = [f"p{i}" for i in range(T)]
plotting.attention_maps(runs[0][3][0], labels, title="seed 0, head")
plt.show()

# %% [markdown]
# In every seed the two heads split the work: one attends from position $i$ to $i-1$,
# the other to $i+1$ (the wrap-around shows in the corners of the maps), each putting
# at least {glue:text}`heads_min_weight` of its weight on its neighbour. The output
# projection then routes each head's finding to the classifier that needs it.
#
# Which head takes which lookup is not fixed by the architecture: the heads are
# interchangeable. Swap head 0's and head 1's blocks of columns in $A_Q$, $A_K$ and
# $A_V$ (in `q_proj`, `k_proj` and `v_proj`, whose `weight` stores $A^\top$, they are
# blocks of rows, with the matching entries of the biases) and the matching blocks of
# rows in $A_O$ (columns of `o_proj.weight`), and the layer computes the same function,
# with the two attention maps trading places. `grouped_heads.permute_heads` does
# exactly that, here on a copy of seed 0's trained layer:

# %%
trained = runs[0][0].eval()
swapped = copy.deepcopy(trained)
grouped_heads.permute_heads(swapped.attn, [1, 0])  # head 1, then head 0
x, _ = neighbours.make_batch(4, torch.Generator().manual_seed(1))
(logits, w), (logits_swapped, w_swapped) = trained(x), swapped(x)
for a, b in zip(logits, logits_swapped):
    torch.testing.assert_close(a, b)
torch.testing.assert_close(w_swapped, w[:, [1, 0]])  # (B, 2, T, T), heads swapped
print("heads swapped: same predictions, the two attention maps trade places:", True)

# %% [markdown]
# Every trained layer therefore has a twin with the opposite assignment and the same
# loss, so training has no reason to prefer either. On the seeds above the assignment
# came out {glue:text}`assignment` (the last column of the table); so few seeds say
# nothing about how often the other one would turn up.
#
# ## What attention costs
#
# The explicit computation materialises the scores, an $(H, T, T)$ tensor per
# sequence, then the softmax weights, another one of the same size: memory grows as
# $T^2$. A fused kernel such as PyTorch's `scaled_dot_product_attention` (flash
# attention and its relatives {cite}`dao2022flashattention,rabe2021selfattention`)
# computes the same output in tiles with a running softmax, so the full tensor never
# exists. Chapter 8 writes that algorithm out; here we measure the difference, for one
# sequence with 4 heads of width 64.
#
# Memory here is the **peak**: the most tensor memory the computation holds at one
# moment, above what existed before it started (`transformer_book.benchmark.peak_bytes`;
# on a CPU it replays the allocations and frees torch's profiler records, on a GPU it
# asks the allocator). That is the number that decides whether a computation fits. The
# *sum* of all allocations (`benchmark.allocated_bytes` on a CPU) would also count
# temporaries freed before the next one is made; chapter 8 compares the two.
#
# Time, as in chapter 1, is CPU seconds on a CPU (the machine that executes these pages
# is shared, and a wall clock would also count other programs' turns) and wall-clock
# seconds on a GPU. `benchmark.time_and_peak` measures both for every function and
# length (the median time by `benchmark.median_time` with `clock="auto"`, the peak by
# `peak_bytes`); on a Mac's MPS device, which keeps no peak counter, it measures the
# memory of the same computation on the CPU, and the table says so:

# %%
clock = "CPU" if run.device.type == "cpu" else "wall-clock"
memory_on = benchmark.memory_device(run.device).type  # MPS keeps no peak: the CPU
print(f"timings on {run.device.type}: {clock} seconds; peak memory on {memory_on}")

# %% tags=["nbval-ignore-output"]
H, Dh = 4, 64


def explicit(q, k, v):
    """softmax(q kᵀ/√d_k) v, keeping the weights. Shapes: (B, H, T, Dh) -> same."""
    scores = (q * Dh**-0.5) @ k.transpose(-2, -1)  # (B, H, T, T): q scaled first
    weights = scores.softmax(dim=-1)  # (B, H, T, T)
    return weights @ v, weights


fns = {  # (q, k, v) -> output, with and without the (H, T, T) weights kept
    "naive": explicit,
    "fused": lambda q, k, v: attention.scaled_dot_product_attention(
        q, k, v, need_weights=False
    ),
}
# inputs (B, H, T, Dh); (name, T) -> (median seconds, peak bytes)
qkv = lambda T: [torch.randn(1, H, T, Dh, device=run.device) for _ in "qkv"]  # noqa
inputs = qkv(64)
package = attention.scaled_dot_product_attention(*inputs)  # its explicit path
for mine, theirs in zip(explicit(*inputs), package):  # output, then weights
    torch.testing.assert_close(mine, theirs)
torch.testing.assert_close(explicit(*inputs)[0], fns["fused"](*inputs)[0])
measured = benchmark.time_and_peak(fns, qkv, cost_lengths, run.device, repeats=5)
cost = [
    dict(T=T, naive_s=measured["naive", T][0], fused_s=measured["fused", T][0],
         naive_mb=measured["naive", T][1] / 2**20,
         fused_mb=measured["fused", T][1] / 2**20,
         scores_mb=H * T**2 * 4 / 2**20,  # one float32 (H, T, T)
         qkv_mb=3 * H * T * Dh * 4 / 2**20)
    for T in cost_lengths
]  # fmt: skip
print(f"{clock} time on {run.device.type}, peak memory on {memory_on}")
print("     T | explicit ms | fused ms | explicit MiB | fused MiB | (H,T,T) MiB")
for c in cost:
    print(
        f"{c['T']:6d} | {c['naive_s'] * 1e3:11.2f} | {c['fused_s'] * 1e3:8.2f} "
        f"| {c['naive_mb']:12.1f} | {c['fused_mb']:9.1f} | {c['scores_mb']:11.1f}"
    )
last = cost[-1]
speedups = [c["naive_s"] / c["fused_s"] for c in cost]
print("fused speed-up per length:", " ".join(f"{s:.1f}" for s in speedups))
report.glue("fused_speed", report.times_faster(speedups[-1]))
report.glue("fused_speed_min", min(speedups), "{:.1f}")
report.glue("fused_speed_max", max(speedups), "{:.1f}")
report.glue("cost_device", str(run.device.type))
report.glue("memory_ratio", last["naive_mb"] / last["fused_mb"], "{:.0f}")
# the explicit path holds scores and weights at once: two (H, T, T) tensors, and
# little more than those
assert all(2 * c["scores_mb"] <= c["naive_mb"] < 3 * c["scores_mb"] for c in cost)
# the fused kernel never holds one; at every length its peak is below Q, K and V
assert last["fused_mb"] < last["scores_mb"]
assert all(0.2 * c["qkv_mb"] < c["fused_mb"] < c["qkv_mb"] for c in cost)

# %% tags=["hide-input"]
fig, axes = plt.subplots(1, 2, figsize=plotting.WIDE)
Ts, kept = [c["T"] for c in cost], "explicit (weights kept)"
column = lambda key: [c[key] for c in cost]  # noqa: E731
log = dict(xscale="log", yscale="log", xlabel="sequence length T")
times = {kept: column("naive_s"), "fused kernel": column("fused_s")}
plotting.curves(Ts, times, axes[0], ylabel=f"{clock} seconds (median)", title="Time",
                **log)  # fmt: skip
axes[1].loglog(Ts, column("scores_mb"), "k:", label="one float32 (H, T, T) tensor")
plotting.curves(Ts, {kept: column("naive_mb"), "fused kernel": column("fused_mb")},
                axes[1], ylabel="MiB (peak)", title="Memory", **log)  # fmt: skip
mib = column("fused_mb") + column("naive_mb")
decades = range(math.floor(math.log10(min(mib))), math.floor(math.log10(max(mib))) + 1)
axes[1].set_yticks([10.0**e for e in decades], [f"{10.0**e:g}" for e in decades])
fig.suptitle(f"Attention over one sequence, H = {H}, d_k = {Dh}, on {run.device.type}")
fig.tight_layout()
plt.show()

# %% [markdown]
# The explicit version's peak follows the $T^2$ line of the score tensor at a little
# over twice its height: the scores and the weights are alive at the same moment, and
# the output adds a little (the cell asserts both). The fused kernel never holds a
# $T\times T$ tensor; its peak grows like the size of $Q$, $K$ and $V$ and stays below
# it at every length (asserted), and at the longest length the explicit version needed
# {glue:text}`memory_ratio` times as much.
#
# Time depends on the machine. The explicit computation writes the $(H, T, T)$ scores,
# reads them for the softmax, writes the weights and reads them again for the weighted
# sum. (The function `explicit` above scales $q$ before the product, a pass over a
# $(T, d_k)$ tensor per head, as the package's explicit path does; scaling the scores
# after the product would add a pass over an $(H, T, T)$ tensor that has nothing to do
# with fusion. The cell asserts that the two give the same output and weights.) On the
# machine that executed this page ({glue:text}`cost_device`), the
# explicit computation took {glue:text}`fused_speed_min` to
# {glue:text}`fused_speed_max` times as long as the fused kernel over these lengths
# (each length a single median of five runs; the cell prints every ratio), and at the
# longest length the fused kernel was {glue:text}`fused_speed`. The ratio need not grow
# steadily with $T$: with one median per length, these numbers show where the fused
# kernel was faster here, not how its advantage scales.
#
# ## Exercises
#
# ### Exercise 1: when does the softmax saturate? (predict, then measure)
#
# Without the scaling, the largest weight grows with $d_k$; the table above shows that
# over 16 keys its mean passes 0.75 somewhere between $d_k = 16$ and $d_k = 64$.
# **Predict first**, without code: with only 4 keys, is a narrower or a wider head
# enough to pass 0.75? With 64 keys? Write your two guesses down, with a reason (think
# of what the top score has to beat).
#
# Now measure. Write `saturation_width(n_keys, threshold)` that returns the smallest
# $d_k$ in $1, 2, 4, \dots, 256$ at which the mean largest weight of the *unscaled*
# softmax over `n_keys` random keys (the chapter's `saturation` function with
# `scale=1.0` and its 2000 trials) exceeds `threshold`, or `None` if none does. The
# check runs it for 4, 16 and 64 keys; compare its answers with your guesses.


# %%
def saturation_width(n_keys, threshold):
    # YOUR CODE HERE
    raise NotImplementedError


# %% tags=["solution", "hide-cell"]
def saturation_width(n_keys, threshold):
    for d in [2**i for i in range(9)]:
        if saturation(d, 1.0, n_keys=n_keys)[0] > threshold:
            return d
    return None


# %%
checks.check_saturation_width(saturation_width)

# %% [markdown]
# ### Exercise 2: a head that looks two back (break and fix)
#
# A colleague wants one head that looks **two tokens back** and one that looks one
# ahead. They reused `neighbours.make_batch` and wrote:


# %%
def make_batch_two_back(batch_size: int, gen: torch.Generator):
    """Meant to ask for the token two places before and the one after. It has a bug."""
    x, (_, after) = neighbours.make_batch(batch_size, gen)
    tokens = x[..., :n_tokens].argmax(dim=-1)  # (B, T): the tokens again
    return x, [tokens.roll(-2, dims=1), after]


# %% [markdown]
# **Predict** where the first target's head will attend, then train and look:

# %% tags=["nbval-ignore-output"]
_, _, acc, w_bug = neighbours.train_neighbours(make_batch_two_back, 0, train_steps)
print("\n".join(neighbours.offset_lines(w_bug, (-2, +1, +2))))
print("held-out accuracy on the two targets:", [round(a, 3) for a in acc])
report.glue("bug_accuracy", min(acc), "{:.1%}")
assert min(acc) > 0.99  # it learned the task it was given ...
assert neighbours.weight_at(w_bug, +2).max() > 0.6  # ... with a head two *ahead*

# %% tags=["hide-input"]
plotting.attention_maps(w_bug[0], labels, title="two back? head")
plt.show()

# %% [markdown]
# The model learned its task: its held-out accuracy on the worse of its two targets is
# {glue:text}`bug_accuracy`. But the task was not the one intended: one head looks two
# positions *ahead*. Write `shift_targets(tokens, offset)` that returns, at every
# position $i$, the token at position $(i + \text{offset}) \bmod T$ of the same
# sequence, for tokens of shape $(B, T)$; then the targets for "two back" are
# `shift_targets(tokens, -2)`.


# %%
def shift_targets(tokens, offset):
    # YOUR CODE HERE
    raise NotImplementedError


# %% tags=["solution", "hide-cell"]
def shift_targets(tokens, offset):
    # roll(s) moves entries s places to the right: position i gets the token at i - s
    return tokens.roll(-offset, dims=1)


# %%
checks.check_shift_targets(shift_targets)

# %% [markdown]
# With the fixed targets, one head now looks two back:


# %% tags=["nbval-ignore-output"]
def make_batch_fixed(batch_size: int, gen: torch.Generator):
    """The token two places before and the token after, at every position."""
    x, _ = neighbours.make_batch(batch_size, gen)
    tokens = x[..., :n_tokens].argmax(dim=-1)  # (B, T)
    return x, [shift_targets(tokens, -2), shift_targets(tokens, +1)]


_, _, acc, w_fix = neighbours.train_neighbours(make_batch_fixed, 0, train_steps)
print("\n".join(neighbours.offset_lines(w_fix, (-2, +1, +2))))
print("held-out accuracy:", [round(a, 3) for a in acc])
weight_at = neighbours.weight_at
assert weight_at(w_fix, -2).max() > 0.6 and weight_at(w_fix, +1).max() > 0.6
assert min(acc) > 0.99

# %% [markdown]
# ### Exercise 3: counting parameters
#
# Write `mha_parameters(d_model, n_heads)`: how many parameters does
# `MultiHeadAttention(d_model, n_heads)` (with biases) have? Does the number of heads
# matter?


# %%
def mha_parameters(d_model, n_heads):
    # YOUR CODE HERE
    raise NotImplementedError


# %% tags=["solution", "hide-cell"]
def mha_parameters(d_model, n_heads):
    return 4 * (d_model * d_model + d_model)  # q, k, v, o projections, each with bias


# %%
checks.check_mha_parameter_count(mha_parameters)

# %% [markdown]
# ## What we added to the package
#
# - `transformer_book.attention.scaled_dot_product_attention`: scale, boolean mask
#   (True = may attend), additive bias, zero output for fully masked queries, and a
#   fused path when `need_weights=False`.
# - `transformer_book.attention.MultiHeadAttention(d_model, n_heads)` with `q_proj`,
#   `k_proj`, `v_proj`, `o_proj`, and the reshapes `split_heads` / `merge_heads`.
# - `transformer_book.masks.padding_mask`, `padding_mask_from_ids`, `causal_mask`.
# - `transformer_book.training.train`: the small training loop used for the two-head
#   model; `transformer_book.neighbours`: its task, model and the measure `weight_at`,
#   read over seeds by `seed_table` and over offsets by `offset_lines`.
# - `transformer_book.grouped_heads.permute_heads`: a layer's heads reordered, the
#   function it computes unchanged.
# - `transformer_book.benchmark.peak_bytes` (the peak memory measured here) and
#   `allocated_bytes` (the sum of allocations on a CPU; chapter 8 compares the two).
# - `transformer_book.plotting.curves`: the figures' boilerplate.
# - `transformer_book.diagrams.attention.scaled_dot_product_attention()` and
#   `multi_head_attention()`: the two diagrams of this chapter.
