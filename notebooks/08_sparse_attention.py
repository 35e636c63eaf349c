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
# # 8. Sparse and sliding-window attention; exact attention in tiles
#
# Self-attention lets every token look at every other token. For a sequence of $T$ tokens
# that is $T^2$ scores per head and per layer, and at the context lengths of today's
# models (tens or hundreds of thousands of tokens) the square is what hurts. This chapter
# takes two routes out. The first changes the model: each token attends only to a window
# of nearby tokens, and depth or a few global layers carry information further. The
# second keeps the model and changes the computation: exact attention, computed one tile
# at a time, so the $T \times T$ matrix never exists.
#
# By the end of it you will be able to
#
# - measure the quadratic cost of attention in time and memory;
# - build sliding-window masks (causal and two-sided) and Longformer's global tokens, and
#   count the scores they save;
# - measure with gradients how far back a stack of windowed layers can see, and reconcile
#   it with the formula $L\,(w-1)+1$ and with Mistral's "131K tokens";
# - show on a trained model what interleaving local and global layers buys;
# - compute exact attention in tiles with a running maximum and a running sum (the online
#   softmax behind FlashAttention), and measure its peak memory against $T$.

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
import functools
import math

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

from transformer_book import (
    attention,
    benchmark,
    checks,
    diagrams,
    masks,
    neighbours,
    plotting,
    report,
    runtime,
    tiled_attention,
    training,
)

# %% tags=["parameters"]
device = "auto"  # "auto": CUDA, else Apple MPS, else the CPU
profile = "auto"  # "auto": quick on every device; "full" by name

# %%
run = runtime.setup(device, profile, seed=0, cpu_threads=1)  # tiny models: 1 thread
print(run)
# cost measurements: one head of width 64 at these sequence lengths
cost_lengths = run.pick(
    quick=[128, 256, 512, 1024, 2048], full=[1024, 2048, 4096, 8192, 16384]
)
block_size = run.pick(quick=64, full=128)  # tile size of tiled attention
tile_window = run.pick(quick=256, full=512)  # the windowed tiled variant's window
# the local/global experiment (section 4)
vocab_size, seq_len, window, near, far = 16, 32, 8, 4, 16
d_model, n_heads = 32, 4
n_steps, batch_size, lr = run.pick(quick=160, full=1000), 32, run.pick(5e-3, 2e-3)
n_seeds = run.pick(quick=3, full=5)

# %% [markdown]
# ## 1. What full attention costs
#
# The explicit computation of chapter 2,
#
# $$\mathrm{softmax}\!\Big(\frac{QK^\top}{\sqrt{d_k}}\Big)V,$$
#
# forms the score matrix $QK^\top$ of shape $(T, T)$ and its softmax, another $(T, T)$
# matrix. Doubling $T$ quadruples both, and the work to fill them. We measure time and
# the peak memory of one head of width 64, causal, at growing $T$.
# `benchmark.peak_bytes` reports the most tensor memory the computation holds at one
# moment (section 5 explains why that, and not the total it allocates, is the number
# that decides whether a computation fits). `benchmark.median_time(..., clock="auto")`
# counts the CPU seconds of this process on a CPU (the wall clock of a GPU): with torch
# on one thread, as here, that is the time spent computing, which other programs
# disturb less than the wall clock (they still share caches and memory bandwidth).


# %%
def qkv(T: int, d: int = 64, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """Random queries, keys and values for one sequence and one head, (1, 1, T, d)."""
    gen = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(1, 1, T, d, generator=gen).to(run.device) for _ in "qkv")


def explicit(q, k, v):
    mask = masks.causal_mask(q.shape[-2], device=q.device)
    return attention.scaled_dot_product_attention(q, k, v, mask=mask)[0]


q, k, v = qkv(8)
print("output:", tuple(explicit(q, k, v).shape), "from", 8 * 8, "scores")
print(f"one fp32 T x T matrix at T = 131,072: {131_072**2 * 4 / 2**30:.0f} GiB")

# %% tags=["nbval-ignore-output"]
# (method, T) -> (median seconds, peak bytes): CPU seconds on a CPU, else wall-clock;
# the peak on memory_on (the device itself; the CPU on a Mac's MPS, which keeps none)
memory_on = benchmark.memory_device(run.device).type
cost = benchmark.time_and_peak({"explicit": explicit}, qkv, cost_lengths, run.device)
for which, where in (("time", run.device.type), ("peak", memory_on)):
    print("\n".join(benchmark.cost_table(cost, cost_lengths, which, where)))
T1, T2 = cost_lengths[-2:]  # the last doubling: x of T^x for time and peak
time_growth, growth = benchmark.growth_exponents(cost, T1, T2)["explicit"]
print(
    f"from T = {T1} to {T2}: memory grows as T^{growth:.2f},",
    f"time as T^{time_growth:.2f}",
)
assert 1.8 < growth < 2.2, "the explicit path's memory should grow as T²"
report.glue("time_growth", time_growth, "{:.1f}")

# %% [markdown]
# The memory grows as $T^2$: a few $(T, T)$ matrices of 4-byte floats (scores, masked
# scores, weights) plus boolean masks. At $T = 131{,}072$ a single one of them takes
# 64 GiB (printed above), per head and per layer. The time grows too, as
# $T^{\,x}$ with $x =$ {glue:text}`time_growth` over the last doubling here: filling a
# $(T, T)$ matrix is $T^2$ work, and caches and memory traffic move the measured
# exponent around that.
#
# ## 2. Sliding-window attention
#
# Longformer {cite}`beltagy2020longformer` and Mistral {cite}`jiang2023mistral` let each
# token attend only to its neighbourhood. In a causal model, the query at position $p$
# sees the key at position $j$ when
#
# $$0 \le p - j < w,$$
#
# itself and the $w - 1$ tokens before it. (As for `masks.causal_mask`, the queries are
# the *last* positions when there are fewer queries than keys, as when new tokens are
# decoded against a cache of earlier ones, chapter 9: query $i$ sits at
# $p = i + T_k - T_q$.) Written straight from the formula:

# %%
T, w = 8, 3
p = torch.arange(T)[:, None]  # (T, 1): query positions
j = torch.arange(T)[None, :]  # (1, T): key positions
mine = (p - j >= 0) & (p - j < w)  # (T, T)
assert torch.equal(mine, masks.sliding_window_mask(T, window=w))
print(mine.int())

# %% [markdown]
# Every query sees at most $w$ keys instead of up to $T$. With $w \ge T$ no key is ever
# cut off and the window is exactly the causal mask, which gives the same attention:

# %%
q, k, v = qkv(50)
for w in (49, 50, 64):
    mask = masks.sliding_window_mask(50, window=w, device=q.device)
    same_mask = torch.equal(mask, masks.causal_mask(50, device=q.device))
    out = attention.scaled_dot_product_attention(q, k, v, mask=mask)[0]
    print(f"w = {w}: mask == causal mask: {same_mask};", end=" ")
    print(f"same output: {torch.equal(out, explicit(q, k, v))}")

# %% [markdown]
# An encoder has no causal constraint, and its window looks both ways, $|p - j| < w$.
# Longformer adds *global tokens* on top: a few chosen positions (the `[CLS]` token of a
# classifier, the question in question answering) attend to every token and every token
# attends to them, so information can cross the whole sequence in two steps.

# %%
two_sided = masks.sliding_window_mask(8, window=2, causal=False)
longformer = masks.with_global_tokens(two_sided, [0])
print(longformer.int())
print("scores computed:", int(two_sided.sum()), "->", int(longformer.sum()), "of", 64)

# %% [markdown]
# The three patterns side by side, for 10 tokens:

# %% tags=["hide-input"] mystnb={"image": {"alt": "Three 10 by 10 grids of queries (rows) against keys (columns). Left: full causal attention fills the lower triangle, 55 scores. Middle: a causal sliding window of 3 fills a band of width 3 along the diagonal, 27 scores. Right: a two-sided window of 3 fills a band of width 5 around the diagonal, and position 0, a global token, fills the whole first row and first column, 58 scores."}}
diagrams.masks.sparse_patterns(T=10, window=3, global_positions=(0,))
plt.show()

# %% [markdown]
# **What the window saves.** A causal window of $w$ computes $w$ scores for every query
# except the first $w - 1$, which have fewer keys:
#
# $$\#\text{scores} = wT - \frac{w(w-1)}{2} \quad\text{against}\quad
# \frac{T(T+1)}{2}\ \text{for full causal attention.}$$
#
# The count grows linearly in $T$. The formula agrees with the masks, and at Mistral's
# window of 4096 the saving grows with the context:


# %%
def window_scores(T: int, w: int) -> int:
    w = min(w, T)
    return w * T - w * (w - 1) // 2


for T, w in ((10, 3), (50, 7), (64, 64), (100, 200)):
    assert window_scores(T, w) == int(masks.sliding_window_mask(T, window=w).sum())
print("   T      window 4096      full causal   full / window")
for T in (4096, 32_768, 131_072):
    ws, full = window_scores(T, 4096), T * (T + 1) // 2
    print(f"{T:7d} {ws:16,d} {full:16,d} {full / ws:11.1f}")

# %% [markdown]
# A dense implementation that merely *masks* the scores saves nothing: the scores are
# still computed, then thrown away. The saving is real only when the computation skips
# the masked blocks, as the tiled implementation of section 5 does.
#
# (Conventions differ by one between libraries. Hugging Face's causal sliding-window
# mask, the one its Mistral uses, has the same window as ours, $p - j < w$; its
# bidirectional sliding-window mask $w$ allows $|p - j| \le w$, which is our two-sided
# window $w + 1$. `tests/test_masks.py` checks both against
# `transformers.masking_utils`.)
#
# ## 3. How far back can a stack of windows see?
#
# One windowed layer lets the output at position $t$ depend on the inputs $t - w + 1,
# \dots, t$. A second layer looks $w - 1$ further back, because each of those $w$
# positions has itself mixed in its own window. This is the receptive field of a stack of
# convolutions in computer vision, and after $L$ layers it holds
#
# $$\text{receptive field} = L\,(w - 1) + 1 \text{ positions (capped at } t + 1).$$
#
# Instead of trusting the argument, measure it: build $L$ windowed layers (pre-norm
# encoder blocks from chapter 3 with random weights, RoPE for positions, in float64),
# backpropagate from the output at the last position $t$, and count the input positions
# that receive a non-zero gradient. `blocks.WindowedStack(windows, d_model, n_heads)`
# builds such a stack: one causal pattern per layer, an int $w$ in `windows` for a
# window of the last $w$ keys (the mask above), `None` for full causal attention;
# `neighbours.input_gradient(windows, T, seed)` builds one from a seed and returns the
# size of that gradient at every input position.


# %%
print("window  layers  measured  L(w-1)+1")
for w in (3, 5, 8):
    for L in (1, 2, 3, 4):
        measured = int((neighbours.input_gradient([w] * L) > 0).sum())
        print(f"{w:6d} {L:7d} {measured:9d} {L * (w - 1) + 1:9d}")
        assert measured == L * (w - 1) + 1

# %% [markdown]
# The measured field equals the formula in every case. A single full-attention layer
# anywhere in the stack opens it to the whole prefix:

# %%
for windows in ([5, 5, None], [None, 5, 5], [5, None, 5]):
    reach = int((neighbours.input_gradient(windows) > 0).sum())
    print(f"windows {str(windows):16s}: output 47 depends on {reach} of 48 inputs")

# %% [markdown]
# That the gradient is non-zero does not mean it is large. Inside the field, the
# gradient of a randomly initialised stack is concentrated on the nearest positions,
# while the far edge of the field, reached along a single path (every layer stepping
# back the full $w - 1$), gets much less, and less with every layer. The plot shows
# three random stacks per depth (seeds 0, 1, 2; `neighbours.gradient_by_distance`
# measures them), and the cell asserts it for each:
# the far edge gets under 1/100 of what the output's own input gets once $L \ge 2$, and
# every added layer divides the far edge's share by more than 5.

# %% tags=["hide-input"]
# (L, seed) -> g, g[d] the gradient d = t - s back; L -> per seed, far edge / g[0]
back, edge_share = neighbours.gradient_by_distance(5, (1, 2, 3, 4), seeds=(0, 1, 2))
fig, ax = plt.subplots(figsize=plotting.SINGLE)
for (L, seed), g in back.items():
    d = torch.arange(len(g))[g > 0]  # the distances inside the field
    ax.semilogy(d, g[d], "o-", ms=3, lw=1, color=plotting.PALETTE[L - 1],
                label=f"L = {L}" if seed == 0 else None)  # fmt: skip
for L in (2, 3, 4):
    assert max(edge_share[L]) < 0.01 and max(edge_share[L]) < min(edge_share[L - 1]) / 5
ax.set(
    xlabel="distance back from the output position, t - s",
    ylabel="|∂ output_t / ∂ input_s|",
    title="Gradient reaching each input, window w = 5 (3 seeds)",
)
ax.legend()
plt.show()

# %% [markdown]
# **Mistral's 131K.** Mistral 7B {cite}`jiang2023mistral` uses a window of $w = 4096$ in
# all of its 32 layers, and its paper puts the theoretical attention span at about
# $4096 \times 32 \approx 131\text{K}$ tokens. The exact count from the formula:

# %%
w, L = 4096, 32
field = L * (w - 1) + 1
print(f"paper:  w x L       = {w * L:,} tokens")
print(f"exact:  L (w-1) + 1 = {field:,} positions, reaching {field - 1:,} tokens back")
diff = w * L - (field - 1)
print(f"difference: {diff} tokens = L, one per layer ({diff / (w * L):.2%})")

# %% [markdown]
# The two agree to a fraction of a percent. The paper describes each position
# attending to the positions from $i - w$ to $i$, a window that looks $w$ back per
# layer; the implemented mask
# (Hugging Face's, and ours) holds $w$ keys *including* the token itself, so each layer
# looks $w - 1$ back. Either way, "131K" is an upper bound on what *can* flow, not a
# promise of what does: the plot above shows how quickly the influence fades with
# distance in a random stack, and a trained model has to learn to relay information
# through every layer on the way.
#
# ## 4. Interleaving local and global layers
#
# Many recent models mix the two kinds of layer: most layers attend within a window,
# and some attend to everything, e.g. Gemma 2 alternates local and global layers
# {cite}`gemma2024gemma2`. The local layers are cheap; the global ones keep the whole
# context in reach. A small experiment shows both sides.
#
# **Task.** Random sequences of 16 token types. At every position the model must output
# two tokens: the one `near` = 4 places back, inside one window, and the one `far` = 16
# places back. Every model has 2 layers, and the local ones use a window of $w = 8$, so
# two local layers see $2 \cdot 7 + 1 = 15$ positions: the far token is out of reach by
# construction, the near one is not. `neighbours.copy_batch` draws the sequences and
# their two targets (-100 where a position has nothing that far back):


# %%
def make_batch(n: int, gen: torch.Generator) -> tuple[torch.Tensor, ...]:
    """(n, T) token ids, then the targets near and far places back (n, T) each."""
    return neighbours.copy_batch(n, gen, vocab_size, seq_len, offsets=(near, far))


ids, y_near, y_far = make_batch(1, torch.Generator().manual_seed(1))
print("tokens  ", ids[0, :20].tolist())
print("near (4)", y_near[0, :20].tolist())
print("far (16)", y_far[0, :20].tolist())
print("field of 2 local layers:", 2 * (window - 1) + 1, "positions; far needs", far + 1)

# %% [markdown]
# **Models.** Token embedding, two pre-norm blocks with RoPE (the `WindowedStack` of section 3),
# and two linear read-outs, one per target. Three layer patterns: local + local,
# local + global, global + global. **Cost** is the number of scores per sequence, counted
# from the masks:

# %%
PATTERNS = {
    "local + local": [window, window],
    "local + global": [window, None],
    "global + global": [None, None],
}
n_scores = {
    name: sum(window_scores(seq_len, seq_len if w is None else w) for w in windows)
    for name, windows in PATTERNS.items()
}
for name, n in n_scores.items():
    share = n / n_scores["global + global"]
    print(f"{name:15s}: {n:5d} scores per sequence ({share:.0%} of two global layers)")
mixed_share = n_scores["local + global"] / n_scores["global + global"]
one_local, one_global = (window_scores(seq_len, w) for w in (window, seq_len))
saving = 1 - one_local / one_global
print(f"one layer: local {one_local}, global {one_global} scores ({saving:.0%} fewer)")
report.glue_all({"mixed_share": mixed_share, "local_saving": saving}, "{:.0%}")

# %% [markdown]
# At $T = 32$ a window of 8 already spares a local layer {glue:text}`local_saving` of
# a global layer's scores, and the saving grows with $T$. At long contexts a local
# layer costs about $wT$ scores against a global layer's $T^2/2$, so a mix of
# $n_\text{local}$ local and $n_\text{global}$ global layers costs, as a share of
# all-global,
#
# $$\frac{n_\text{local}\,(wT - w(w-1)/2) + n_\text{global}\,T(T+1)/2}
#        {(n_\text{local} + n_\text{global})\,T(T+1)/2}
#   \;\xrightarrow{T \to \infty}\; \frac{n_\text{global}}{n_\text{local} +
#   n_\text{global}}:$$
#
# the local layers become free, and the global ones are what is left. With a window of
# 4,096:


# %%
def mix_share(T, w, n_local, n_global):
    """Scores of n_local windowed + n_global causal layers / all of them causal."""
    full = window_scores(T, T)
    return (n_local * window_scores(T, w) + n_global * full) / (
        (n_local + n_global) * full
    )


print("        T   1 local : 1 global   5 local : 1 global")
for T in (4096, 32_768, 131_072, 1_048_576):
    one, five = mix_share(T, 4096, 1, 1), mix_share(T, 4096, 5, 1)
    print(f"{T:9,d} {one:16.0%} {five:20.0%}")
print(f"{'limit':>9s} {1 / (1 + 1):16.0%} {1 / (5 + 1):20.0%}")  # n_global / n_layers
long_one, long_five = (mix_share(131_072, 4096, n, 1) for n in (1, 5))
report.glue_all({"long_one": long_one, "long_five": long_five}, "{:.0%}")
assert 0.5 < long_one < 0.55 and abs(mix_share(10**9, 4096, 5, 1) - 1 / 6) < 1e-4

# %% [markdown]
# Every model sees the same training batches; the seed sets the initial weights
# (`neighbours.train_copy` builds a `neighbours.CopyModel` and trains it on the sum of
# the two cross-entropies, `neighbours.copy_loss`). The test set is fresh data;
# accuracy (`neighbours.copy_accuracy`) counts the positions that have an answer.

# %%
gen = torch.Generator().manual_seed(0)  # the training batches, one after the other
train_batches = [training.to_device(make_batch(batch_size, gen), run.device)
                 for _ in range(n_steps)]  # fmt: skip
test_set = training.to_device(make_batch(512, torch.Generator().manual_seed(123)),
                              run.device)  # fmt: skip

# %%
sizes = dict(vocab_size=vocab_size, d_model=d_model, n_heads=n_heads)
results = {}  # (pattern, seed) -> (near accuracy, far accuracy) on the test set
for name, windows in PATTERNS.items():
    for seed in range(n_seeds):
        model = neighbours.train_copy(
            windows, seed, train_batches, n_steps, lr, **sizes
        )
        results[name, seed] = neighbours.copy_accuracy(model, test_set)
print("trained:", len(results), "models")

# %% tags=["nbval-ignore-output"]
# (pattern, 0 for near or 1 for far) -> the test accuracy of each seed
summary = {(name, h): [results[name, s][h] for s in range(n_seeds)]
           for name in PATTERNS for h in (0, 1)}  # fmt: skip
print(f"{'pattern':15s} | scores | near: mean ± std (min–max) | far: the same")
for name in PATTERNS:
    row = [report.mean_spread(summary[name, h]) for h in (0, 1)]
    print(f"{name:15s} | {n_scores[name]:6d} | {row[0]:28s} | {row[1]}")
local_far = max(summary["local + local", 1])
assert min(summary["local + local", 0]) > 0.9, "local layers solve the near task"
assert local_far < 2 / vocab_size, "the far token is out of reach: chance level"
for name in ("local + global", "global + global"):
    assert min(summary[name, 1]) > 5 * local_far, f"{name} reaches the far token"
report.glue("local_far", local_far, "{:.3f}")
report.glue("chance", 1 / vocab_size, "{:.3f}")

# %% tags=["hide-input"]
fig, axes = plt.subplots(1, 2, figsize=plotting.WIDE, sharey=True)
for ax, h, title in zip(axes, (0, 1), (f"near: {near} back", f"far: {far} back")):
    accs = {"test accuracy": [summary[name, h] for name in PATTERNS]}
    plotting.seed_dots(list(PATTERNS), accs, ax, title=f"{title} (window {window})")
    ax.axhline(1 / vocab_size, color="grey", ls=":", label="chance")
    ax.legend(loc="center left")
fig.tight_layout()
plt.show()

# %% [markdown]
# Reading the table:
#
# - Two local layers solve the near task and stay at chance on the far one (best seed
#   {glue:text}`local_far`, chance {glue:text}`chance`), as the receptive field
#   predicted: no amount of training can fetch a token the mask never lets through.
# - Replacing one local layer by a global one puts the far token in reach, and the far
#   accuracy jumps on every seed, at {glue:text}`mixed_share` of the scores of two
#   global layers here. At long contexts that share falls only towards one half, the
#   fraction of layers that are global ({glue:text}`long_one` at $T$ = 131,072 with a
#   4,096 window, in the table above); five local layers per global one bring it
#   towards one sixth ({glue:text}`long_five` there). The global layers set the cost.
# - Seeds vary (the min-max columns): on this short training budget a seed can learn
#   the far copy only in part. The comparison we assert is the one the spread supports:
#   every seed of the models with a global layer beats every seed of the all-local model
#   on the far token. We claim no ranking between the two models that have a global
#   layer.
#
# ## 5. Exact attention in tiles
#
# The second route keeps full attention and changes how it is computed. The obstacle is
# the softmax: its denominator needs *every* score of the row before any weight is known.
# The **online softmax** {cite}`milakov2018online` removes the obstacle. Read a row of
# scores $s_1, s_2, \dots$ in blocks and keep two numbers: the largest score so far, $m$,
# and the sum of exponentials measured against it, $\ell = \sum_j e^{s_j - m}$. When a
# block brings a larger maximum $m'$, the old sum is moved to the new reference,
#
# $$\ell \leftarrow \ell\, e^{m - m'} + \sum_{j \in \text{block}} e^{s_j - m'}, \qquad
# m \leftarrow m'.$$
#
# After the last block, $e^{s_j - m}/\ell$ is exactly $\mathrm{softmax}(s)_j$. (Subtracting
# the maximum is also what keeps $e^{s}$ from overflowing.) On one row of 12 scores in
# blocks of 4:

# %% tags=["nbval-ignore-output"]
scores = torch.tensor([1.0, 3.0, 0.5, 2.0, 7.0, 6.5, 1.0, 0.0, 4.0, 9.0, 2.0, 8.5])
m, ell = float("-inf"), 0.0
for start in range(0, 12, 4):
    block = scores[start : start + 4]
    m_new = max(m, block.max().item())
    ell = ell * math.exp(m - m_new) + torch.exp(block - m_new).sum().item()
    m = m_new
    print(f"after scores {start:2d}-{start + 3:2d}: m = {m:.1f}, l = {ell:.4f}")
online = torch.exp(scores - m) / ell
torch.testing.assert_close(online, scores.softmax(dim=0))
print("exp(s - m) / l equals softmax(s):", torch.allclose(online, scores.softmax(0)))

# %% [markdown]
# Attention needs one more running quantity: the output. Keep it unnormalised,
# $o = \sum_j e^{s_j - m} v_j$, rescale it by the same $e^{m - m'}$ whenever the maximum
# moves, and divide by $\ell$ once at the end. FlashAttention {cite}`dao2022flashattention`
# organises exactly this around tiles, so that only the current *tile* of scores exists.
# We use the loop order of FlashAttention-2 {cite}`dao2024flashattention2`: a block of
# queries visits the blocks of keys and values one tile at a time (the first version
# ran the loops the other way round, key blocks outside). Rabe and Staats
# {cite}`rabe2021selfattention` showed the same memory saving with a different
# organisation. In a causal model, the tiles above the diagonal are skipped.

# %% tags=["hide-input"] mystnb={"image": {"alt": "Left: a 4 by 4 grid of tiles of the causal score matrix, query blocks down, key blocks across. Tiles above the diagonal are hatched (skipped). In the third query block, the first tile is light pink (already folded into the running statistics), the second is dark pink (the tile in memory now) and the third is still to come. Right: the steps applied to each tile, top to bottom: compute the tile S = Q_i K_j transposed over root d; m' = max(m, rowmax S); l becomes l times e to the m minus m' plus the row sums of e to the S minus m'; o becomes o times e to the m minus m' plus e to the S minus m' times V_j, and m becomes m'; after the last tile, out = o / l. A note says that per query block only m and l (b numbers each), o (b by d) and one tile are in memory."}}
diagrams.tiling.tiled_attention()
plt.show()

# %% [markdown]
# `tiled_attention.tiled_attention(q, k, v, block_size, causal, scale)`, in the module
# `transformer_book.tiled_attention`, implements it. For each block of queries $Q_i$ it
# starts from $m = -\infty$, $\ell = 0$, $o = 0$ (one $m$ and $\ell$ per query) and, for
# each block of keys and values $K_j, V_j$ that some query of the block may see, applies
# the steps of the diagram:
#
# $$S = Q_i K_j^\top / \sqrt{d_k} \ (\text{masked entries} = -\infty), \qquad
# m' = \max\big(m, \operatorname{rowmax} S\big),$$
#
# $$\ell \leftarrow \ell\, e^{m - m'} + \operatorname{rowsum} e^{S - m'}, \qquad
# o \leftarrow o\, e^{m - m'} + e^{S - m'} V_j, \qquad m \leftarrow m',$$
#
# and writes $o / \ell$ for the block after its last key tile. A row that has so far met
# only masked keys still has $m' = -\infty$; the function subtracts 0 there instead of
# $m'$, so that $e^{-\infty - (-\infty)}$ never makes a NaN (exercise 3 writes that
# step), and a query with no key at all gets zeros. It is exact, not an approximation:
# it agrees with the explicit path for any tile size (1, sizes that do not divide $T$,
# sizes larger than $T$), for fewer queries than keys, causal or not:

# %%
print(" Tq  Tk  causal  block sizes 1, 7, 16, 64: agree within 1e-5")
for Tq, Tk in ((40, 40), (17, 40)):
    q, _, _ = qkv(Tq, seed=1)
    _, k, v = qkv(Tk, seed=2)
    for causal in (False, True):
        mask = masks.causal_mask(Tq, Tk, device=q.device) if causal else None
        ref = attention.scaled_dot_product_attention(q, k, v, mask=mask)[0]
        outs = [tiled_attention.tiled_attention(q, k, v, b, causal=causal)
                for b in (1, 7, 16, 64)]  # block sizes  # fmt: skip
        agree = [torch.allclose(out, ref, atol=1e-5) for out in outs]
        print(f"{Tq:3d} {Tk:3d}  {causal!s:6s}  {agree}")

# %% [markdown]
# `tests/test_tiled_attention.py` also checks it against torch's fused kernel, with
# scores large enough to overflow a naive $e^{s}$, with sliding windows, and its
# gradients against the explicit path's.
#
# **Memory.** Now the measurement the tiling is for: peak memory against $T$, next to
# the explicit path of section 1 and torch's fused `scaled_dot_product_attention`. A
# fourth curve passes a sliding window (`tile_window` keys, printed below) to the tiled
# function: key tiles outside every query's window are skipped, so its work grows
# linearly in $T$ once $T$ is larger than the window.

# %% tags=["nbval-ignore-output"]
windowed_name = f"tiled, window {tile_window}"
tiled = functools.partial(
    tiled_attention.tiled_attention, block_size=block_size, causal=True
)
candidates = {
    "tiled": tiled,
    windowed_name: functools.partial(tiled, window=tile_window),
    "torch SDPA": functools.partial(F.scaled_dot_product_attention, is_causal=True),
}
cost |= benchmark.time_and_peak(candidates, qkv, cost_lengths, run.device)
print("measured", len(cost), "(method, length) pairs")

# %% tags=["hide-input"]
METHODS = ["explicit", *candidates]
fig, axes = plt.subplots(1, 2, figsize=plotting.WIDE)
Ts = torch.tensor(cost_lengths, dtype=torch.float64)
axes[0].plot(Ts, Ts**2 * 4 / 2**20, "k:", label="one T×T fp32 matrix")
for ax, i, scale, what, title in (
    (axes[0], 1, 2**-20, "peak MiB", f"Peak memory, {memory_on}"),
    (axes[1], 0, 1e3, "ms (median)", f"Time, {run.device.type}"),
):  # i: which measure of cost[name, T] = (seconds, peak bytes)
    ys = {n: [cost[n, T][i] * scale for T in cost_lengths] for n in METHODS}
    plotting.curves(cost_lengths, ys, ax, styles=("o-", "s-", "D-", "^-"),
                    xscale="log", yscale="log", xlabel="sequence length T",
                    ylabel=what, title=title)  # fmt: skip
fig.tight_layout()
plt.show()

# %% tags=["nbval-ignore-output"]
print("\n".join(benchmark.cost_table(cost, cost_lengths, "peak", memory_on)))
x_of = benchmark.growth_exponents(cost, T1, T2)  # name -> (time x, peak x) of T^x
exponent = {n: peak_x for n, (_, peak_x) in x_of.items()}
print(
    "growth exponent of the peak, last doubling:",
    {n: round(e, 2) for n, e in exponent.items()},
)
big = cost_lengths[-1]
ratio = cost["explicit", big][1] / cost["tiled", big][1]
assert exponent["explicit"] > 1.8 and exponent["tiled"] < 1.3, "T² against T"
assert ratio > 50, "at the largest T the tiled peak is a small fraction"
mib = {n: cost[n, big][1] / 2**20 for n in METHODS}  # peak MiB at the largest T
report.glue("big_T", big)
report.glue_all({"explicit_mib": mib["explicit"], "peak_ratio": ratio}, "{:.0f}")
report.glue_all({"tiled_mib": mib["tiled"], "sdpa_mib": mib["torch SDPA"]}, "{:.2f}")

# %% [markdown]
# The work is easier to count than to time on a shared machine. A tile is computed when
# some query of its block may see some key of its block; counting those tiles from the
# masks (`tiled_attention.tiles_visited`) gives the work of the two tiled variants
# exactly:


# %%
print(f"{'T':>6s} | all tiles | causal | causal, window {tile_window}")
windowed = {}  # T -> tiles the windowed variant computes
for T in cost_lengths:
    full = tiled_attention.tiles_visited(masks.causal_mask(T), block_size)
    local = masks.sliding_window_mask(T, window=tile_window)
    windowed[T] = tiled_attention.tiles_visited(local, block_size)
    print(f"{T:6d} | {(T // block_size) ** 2:9d} | {full:6d} | {windowed[T]:18d}")

# %% [markdown]
# At $T$ = {glue:text}`big_T` the explicit path holds {glue:text}`explicit_mib` MiB at
# its peak, the tiled one {glue:text}`tiled_mib` MiB ({glue:text}`peak_ratio` times
# less), and torch's fused kernel {glue:text}`sdpa_mib` MiB. The tiled peak grows at
# most linearly: it is the $(T, d)$ output plus, for one block of queries, the running
# statistics and a tile or two of scores, whose size does not depend on $T$.
#
# The time panel tells a different story, and an honest one. The measured times, as
# multiples of the explicit path's and as growth exponents over the last doubling:

# %% tags=["nbval-ignore-output"]
T0 = cost_lengths[0]
slower = {T: cost["tiled", T][0] / cost["explicit", T][0] for T in (T0, big)}
t_exp = {n: time_x for n, (time_x, _) in x_of.items()}
print(
    f"tiled / explicit time: {slower[T0]:.2f} at T = {T0}, {slower[big]:.2f} at {big}"
)
print("time grows as T^x, x =", {n: round(e, 2) for n, e in t_exp.items()})
sdpa_speed = cost["explicit", big][0] / cost["torch SDPA", big][0]
print(f"explicit / torch SDPA time at T = {big}: {sdpa_speed:.1f}")
report.glue("sdpa_speed", report.times_faster(sdpa_speed))
assert windowed[T2] < 2.5 * windowed[T1], "the windowed work grows linearly in T"
report.glue("small_T", T0)
report.glue_all({"slower_small": slower[T0], "slower_big": slower[big],
                 "exp_tiled": t_exp["tiled"], "exp_window": t_exp[windowed_name]},
                "{:.1f}")  # fmt: skip
# one doubling's timings are noisy: say whether they showed the predicted difference
follows = t_exp[windowed_name] < t_exp["tiled"] - 0.2
report.glue("window_verdict", "as the tile count predicts" if follows else (
    "so on this machine one doubling's timings did not show what the tile count "
    "predicts"))  # fmt: skip

# %% [markdown]
# Our tiled function is a Python loop that launches a few small operations per tile:
# it took {glue:text}`slower_small` times the explicit path's time at
# $T$ = {glue:text}`small_T` and {glue:text}`slower_big` times at $T$ = {glue:text}`big_T`.
# Tiling by itself saves memory; it does the same arithmetic, so whatever it gains or
# loses in time comes from how the loop runs, not from less work. FlashAttention gains speed as well by running
# the whole loop inside one GPU kernel that keeps each tile in fast on-chip memory;
# torch's SDPA calls fused kernels of that kind where it has them, and at
# $T$ = {glue:text}`big_T` it ran {glue:text}`sdpa_speed` than the explicit path on the
# machine that executed this page. The windowed variant shows the other half of the
# cost model: its number of tiles grows linearly in $T$ (counted above), and its time
# grew as $T^{\,x}$ with $x =$ {glue:text}`exp_window` over the last doubling, against
# {glue:text}`exp_tiled` for the full tiled version, {glue:text}`window_verdict`.
#
# **Measure the right thing.** Why `peak_bytes` and not the total allocated? On the CPU,
# `benchmark.allocated_bytes` adds up every allocation, freed or not. The tiled
# computation allocates a new tile at every step and frees it right after, so the total
# grows close to quadratically (a pure $T^2$ would multiply it by 4 per doubling) even
# though little is ever held at once:

# %% tags=["nbval-ignore-output"]
totals = {}
with torch.no_grad():
    for T in (256, 512):
        q, k, v = (t.cpu() for t in qkv(T))  # the CPU's measures, on any machine
        run_it = functools.partial(tiled, q, k, v, block_size=64)
        totals[T] = benchmark.allocated_bytes(run_it, "cpu") / 2**20
        peak = benchmark.peak_bytes(run_it, "cpu") / 2**20
        print(f"T = {T}: allocated in total {totals[T]:5.1f} MiB, peak {peak:4.2f} MiB")
        assert peak < totals[T] / 4, "the total counts every tile; the peak a few"
print(f"doubling T multiplies the total by {totals[512] / totals[256]:.1f}")
assert totals[512] / totals[256] > 3, "the total grows quadratically"

# %% [markdown]
# (This cell measures on the CPU wherever it runs. On CUDA, `allocated_bytes` reports
# the allocator's peak, so there the two measures agree; on Apple's MPS neither can be
# measured, and `benchmark` says so.)
#
# ## Exercises
#
# ### Exercise 1: a sliding window for cached decoding
#
# Write `window_mask(n_queries, n_keys, window)`: the causal sliding-window mask when the
# queries are the last `n_queries` of `n_keys` positions (during generation, one new
# token attends to a cache of earlier keys, chapter 9). Query $i$ sits at
# $p = i + n_\text{keys} - n_\text{queries}$ and sees key $j$ iff $0 \le p - j < w$.
# Return a boolean tensor of shape (n_queries, n_keys); use only `torch`. Predict first:
# one new token decoded against 10,000 cached ones with Mistral's $w = 4096$ (a
# (1, 10001) mask): how many keys does it see, and which cached keys could a model
# with only windowed layers throw away for good?


# %%
def window_mask(n_queries, n_keys, window):
    # YOUR CODE HERE
    raise NotImplementedError


# %% tags=["solution", "hide-cell"]
def window_mask(n_queries, n_keys, window):
    p = torch.arange(n_queries)[:, None] + (n_keys - n_queries)  # (Tq, 1)
    d = p - torch.arange(n_keys)  # (Tq, Tk): p - j
    return (d >= 0) & (d < window)


# %%
checks.check_sliding_window_mask(window_mask)

# %% [markdown]
# Your prediction, measured with the package's mask (the window is the last $w$
# positions, the new token included). Every later query sits further right, so in a
# model whose every layer is windowed each layer needs only its last $w$ keys and
# values: Mistral keeps them in a rolling buffer of $w$ slots {cite}`jiang2023mistral`.

# %%
decode = masks.sliding_window_mask(1, 10_001, window=4096)  # (1, 10001)
seen = decode[0].nonzero().flatten()
print(
    f"keys seen: {int(decode.sum()):,}, positions {int(seen[0]):,}..{int(seen[-1]):,}"
)
print(f"never seen again by this or a later query: 0..{int(seen[0]) - 1:,}")

# %% [markdown]
# ### Exercise 2: predict the receptive field
#
# Write `earliest_input(t, windows)`: the smallest input position that can influence the
# output at position $t$ of a causal stack whose layer $l$ uses a sliding window
# `windows[l]`, or full causal attention where `windows[l]` is `None`. Predict first:
# what is it for $t = 100$ and `[4, None, 4]`? Then check your function against the
# answer the check computes by following the masks layer by layer (and, if you like,
# against `input_gradient` of section 3).


# %%
def earliest_input(t, windows):
    # YOUR CODE HERE
    raise NotImplementedError


# %% tags=["solution", "hide-cell"]
def earliest_input(t, windows):
    if None in windows:  # a global layer sees the whole prefix
        return 0
    return max(0, t - sum(w - 1 for w in windows))


# %%
checks.check_earliest_input(earliest_input)

# %% [markdown]
# ### Exercise 3: merge two partial softmaxes
#
# Tiled attention repeats one step: combine what is known about one set of keys with what
# is known about another. For a set of keys $S$, let $m = \max_{j \in S} s_j$,
# $\ell = \sum_{j\in S} e^{s_j - m}$ and $o = \sum_{j \in S} e^{s_j - m} v_j$ (one row per
# query: $m$ and $\ell$ of shape (n, 1), $o$ of shape (n, d)). Write
# `merge(m1, l1, o1, m2, l2, o2)` returning $(m, \ell, o)$ of the union of two disjoint
# sets, so that $o / \ell$ is the attention output over both. Mind the rows whose second
# set is fully masked ($m_2 = -\infty$, $\ell_2 = 0$, $o_2 = 0$), and the rows whose two
# sets both are: a query whose first key tiles all lie outside its causal or sliding
# window has met only masked keys, and the merge must hand on $m = -\infty$, $\ell = 0$,
# $o = 0$ rather than NaN ($e^{-\infty - (-\infty)}$ is undefined).


# %%
def merge(m1, l1, o1, m2, l2, o2):
    # YOUR CODE HERE
    raise NotImplementedError


# %% tags=["solution", "hide-cell"]
def merge(m1, l1, o1, m2, l2, o2):
    m = torch.maximum(m1, m2)
    # both sets fully masked: m = -inf, and exp(-inf - (-inf)) would be NaN. Measure
    # from 0 there instead (tiled_attention's guard): exp(-inf) = 0 keeps l = o = 0.
    m_ref = m.masked_fill(m == float("-inf"), 0.0)
    a, b = torch.exp(m1 - m_ref), torch.exp(m2 - m_ref)  # move both to the new maximum
    return m, l1 * a + l2 * b, o1 * a + o2 * b


# %%
checks.check_merge_softmax(merge)

# %% [markdown]
# ## What we added to the package
#
# `transformer_book.masks`:
#
# - `sliding_window_mask(n_queries, n_keys, window=..., causal=True)`: each query sees
#   the keys within `window` positions (itself included), causal or two-sided; equal to
#   `causal_mask` for `window >= n_keys` and to Hugging Face's sliding-window masks;
# - `with_global_tokens(mask, positions)`: Longformer's global tokens on top of any mask.
#
# `transformer_book.tiled_attention.tiled_attention(q, k, v, block_size, causal, scale,
# window)`: exact attention tile by tile with the online softmax; peak memory linear in
# $T$; key tiles outside a window are skipped. `tiled_attention.tiles_visited(mask,
# block_size)` counts the tiles it computes.
#
# `transformer_book.neighbours`: `input_gradient` (which inputs reach the last output of
# a `blocks.WindowedStack`; `gradient_by_distance` reads it by distance over depths and
# seeds), and the near/far copy task: `copy_batch`, `CopyModel`, `copy_loss`,
# `copy_accuracy`, `train_copy`.
#
# `transformer_book.benchmark.peak_bytes(fn)`: the most tensor memory `fn` holds at one
# moment (from the profiler's allocation and free events on a CPU, from the allocator's
# peak on a GPU); `benchmark.cost_table` and `benchmark.growth_exponents` print the
# times and peaks of `benchmark.time_and_peak` and how they grow with $T$.
#
# `transformer_book.diagrams.masks.sparse_patterns` and
# `transformer_book.diagrams.tiling.tiled_attention`; `transformer_book.checks`:
# `check_sliding_window_mask`, `check_earliest_input`, `check_merge_softmax`.
