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
# # 1. Self-attention as one matrix formula
#
# A transformer is built around one operation: every word in a sentence looks at every
# other word and takes a weighted average of what it sees. This chapter builds that
# operation from nothing, with no learnable parameters at all.
#
# By the end of it you will be able to
#
# - say what a sequence model must deliver, and what a recurrent network's step-by-step
#   reading costs;
# - use the dot product as a measure of how similar two word vectors are;
# - write self-attention with explicit loops, then as the single expression
#   $\mathrm{softmax}(XX^\top)X$, and check that the two agree;
# - tell apart two reasons for speed: fewer Python calls than a loop (an overhead, not a
#   property of attention), and no chain of steps that must wait for each other (what
#   really separates attention from a recurrent network);
# - prove, and check, that self-attention on its own cannot tell *the man ate the fish*
#   from *the fish ate the man*.

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
import os
from functools import partial

import matplotlib.pyplot as plt
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from transformer_book import (
    attention,
    benchmark,
    checks,
    diagrams,
    params,
    plotting,
    report,
    runtime,
    thread_gain,
)

# %% tags=["parameters"]
device = "auto"  # "auto": CUDA, else Apple MPS, else the CPU
profile = "auto"  # "auto": quick on every device; "full" by name

# %%
# On a CPU, one thread: timings on a busy machine are steadier with it.
run = runtime.setup(device, profile, seed=0, cpu_threads=1)
print(run)
# sentence lengths of the loops-against-matrix timing
lengths = [8, 16, 32, 64, 128]
# sentence lengths, batch size and width of the recurrent-against-attention timing
rnn_lengths = run.pick(
    quick=[16, 32, 64, 128, 256, 512, 1024],
    full=[16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192],
)
rnn_batch, rnn_width = run.pick(quick=8, full=32), 128

# %% [markdown]
# ## What a sequence model has to do
#
# Take the sentence *"We ate at the new restaurant on Main Street and their pasta was
# superb."* To understand *their*, a reader has to connect it to *restaurant*, five
# words earlier. A model that turns each word into a vector has to let the vector for
# *their* draw on the vector for *restaurant*, and how strongly it does so should depend
# on the two words themselves, not on a fixed wiring between positions.
#
# We want a layer that
#
# 1. returns one output vector per input word, so layers can be stacked and each output
#    can be labelled (a slot, a part of speech, the next word);
# 2. lets every output depend on the whole sentence (context);
# 3. can take the order of the words into account.
#
# A recurrent network {cite}`elman1990finding` (or its gated descendants, the LSTM
# {cite}`hochreiter1997lstm` and the GRU {cite}`cho2014gru`) meets all three, but it
# reads the sentence one word at a time: the state after word $t$ needs the state after
# word $t-1$,
#
# $$h_t = \tanh\big(h_{t-1} W_h + x_t W_x\big).$$
#
# A minimal recurrent cell makes that dependence explicit. Its loop cannot be replaced
# by one big operation over all positions: step $t$ cannot start before step $t-1$ has
# finished.

# %%
d = 64
# (B, T, d): one sentence of 128 word vectors
x = torch.randn(1, 128, d, device=run.device)
W_h = torch.randn(d, d, device=run.device) / d**0.5
W_x = torch.randn(d, d, device=run.device) / d**0.5


def rnn(x: torch.Tensor) -> torch.Tensor:
    """h_t = tanh(h_{t-1} W_h + x_t W_x). Shapes: x (B, T, d) -> (B, T, d)."""
    h, states = torch.zeros(x.shape[0], d, device=x.device), []
    for t in range(x.shape[1]):
        h = torch.tanh(h @ W_h + x[:, t] @ W_x)  # needs h from step t - 1
        states.append(h)
    return torch.stack(states, dim=1)  # (B, T, d)


print("steps in sequence:", x.shape[1], "| output shape:", tuple(rnn(x).shape))

# %% [markdown]
# Attention was first added *to* a recurrent network: in neural machine translation, a
# recurrent decoder learned to look back at every state of a recurrent encoder
# {cite}`bahdanau2015neural`. The transformer {cite}`vaswani2017attention` keeps the
# attention and drops the recurrence: every word is compared with every other word at
# the same time. To compare words we need a notion of similarity between their vectors.
#
# ## The dot product measures similarity
#
# For two vectors $a, b \in \mathbb{R}^d$,
#
# $$a \cdot b = \sum_{i=1}^{d} a_i b_i = \lVert a\rVert\,\lVert b\rVert \cos\theta .$$
#
# It is large when the vectors point the same way, near zero when they are unrelated and
# negative when they point in opposite directions. To see that on something readable,
# give a few words hand-made vectors whose four coordinates mean *is a person*, *is an
# animal*, *is food* and *is an action*.

# %%
features = ["person", "animal", "food", "action"]
vocab = {
    "the": [0.1, 0.1, 0.1, 0.1],
    "man": [1.0, 0.2, 0.0, 0.0],
    "fish": [0.0, 0.9, 0.8, 0.0],
    "ate": [0.1, 0.1, 0.7, 1.0],
    "cat": [0.0, 1.0, 0.0, 0.1],
}
E = torch.tensor(list(vocab.values()))  # (V, 4): one row per word
words = list(vocab)
similarity = E @ E.T  # (V, V): every pairwise dot product at once
print("        " + " ".join(f"{w:>6}" for w in words))
for w, row in zip(words, similarity):
    print(f"{w:>6}  " + " ".join(f"{v:6.2f}" for v in row.tolist()))

# %% [markdown]
# *fish* is closest to *cat* (both animals) and to *ate* (food meets eating); *man*'s
# nearest other word is *cat*, and only weakly; the filler word *the* is weakly similar
# to everything. A single matrix product $EE^\top$ produced the whole table.
#
# ## Self-attention, one word at a time
#
# Parameter-free self-attention turns the input vectors $x_1, \dots, x_T$ into outputs
# $y_1, \dots, y_T$. For each position $i$:
#
# 1. score every word against word $i$: $s_{ij} = x_i \cdot x_j$;
# 2. turn the scores into weights that are positive and sum to one:
#    $w_{ij} = \dfrac{e^{s_{ij}}}{\sum_{k} e^{s_{ik}}}$ (the softmax);
# 3. average the input vectors with those weights: $y_i = \sum_j w_{ij}\, x_j$.
#
# Written exactly like that, with Python loops:


# %%
def self_attention_loops(X: torch.Tensor) -> torch.Tensor:
    """Parameter-free self-attention with explicit loops. Shapes: X (T, d) -> (T, d)."""
    T = X.shape[0]
    Y = torch.zeros_like(X)
    for i in range(T):
        scores = torch.stack([X[i] @ X[j] for j in range(T)])  # (T,): s_ij
        weights = torch.exp(scores) / torch.exp(scores).sum()  # (T,): w_ij, sums to 1
        for j in range(T):
            Y[i] += weights[j] * X[j]
    return Y


sentence = ["the", "man", "ate", "the", "fish"]
X = torch.stack([E[words.index(w)] for w in sentence])  # (T=5, 4)
Y_loops = self_attention_loops(X)
print("input shape:", tuple(X.shape), "| output shape:", tuple(Y_loops.shape))

# %% [markdown]
# Each output row is a blend of the input rows: a weighted average, so every coordinate
# lies between the smallest and the largest value of that coordinate in $X$. The output
# is as long as the input (requirement 1) and every $y_i$ depends on every $x_j$
# (requirement 2). The cell below checks the blending claim; its printed numbers may
# differ in the last digit on another machine, so nbval does not compare them.

# %% tags=["nbval-ignore-output"]
lowest, highest = X.min(dim=0).values, X.max(dim=0).values  # (4,) each
assert Y_loops.shape == X.shape
assert ((Y_loops >= lowest - 1e-6) & (Y_loops <= highest + 1e-6)).all()
print("rows of Y lie inside the range of the rows of X:", True)
print(Y_loops.numpy().round(3))

# %% [markdown]
# ## The same thing as one matrix formula
#
# Stack the input vectors as the rows of a matrix $X \in \mathbb{R}^{T\times d}$. Then
# all the scores are the entries of $XX^\top$, the softmax runs along each row, and the
# weighted averages are one more matrix product:
#
# $$Y = \mathrm{softmax}\!\left(XX^\top\right) X, \qquad
#   \underbrace{X}_{T\times d}\;\underbrace{X^\top}_{d\times T} \to T\times T, \qquad
#   \underbrace{W}_{T\times T}\;\underbrace{X}_{T\times d} \to T \times d .$$

# %% tags=["hide-input"] mystnb={"image": {"alt": "The matrix form drawn as grids: X (T by d) times X transposed (d by T) gives the T by T score matrix; a softmax of each row turns it into the weight matrix W, whose rows sum to one; W times X gives Y (T by d). Row 2 is highlighted in X, in the scores, in W and in Y: row 2 of Y is a weighted average of all rows of X, with the weights in row 2 of W."}}
diagrams.attention.self_attention_matrix_form()
plt.show()


# %%
def self_attention_matrix(X: torch.Tensor) -> torch.Tensor:
    """Parameter-free self-attention, softmax(X Xᵀ) X. Shapes: (..., T, d) -> same."""
    # (..., T, T): row i holds the weights of word i
    W = (X @ X.transpose(-2, -1)).softmax(dim=-1)
    return W @ X  # (..., T, d)


Y_matrix = self_attention_matrix(X)
torch.testing.assert_close(Y_matrix, Y_loops)
print("loops and matrix formula agree within 1e-5:", True)

# %% [markdown]
# The package's attention function, which later chapters use everywhere, computes
# $\mathrm{softmax}(QK^\top \cdot s)\,V$. With $Q = K = V = X$ and scale $s = 1$ it is
# exactly our formula, and it also returns the weight matrix so we can look at it:

# %%
Y_pkg, W = attention.scaled_dot_product_attention(X, X, X, scale=1.0)
torch.testing.assert_close(Y_pkg, Y_matrix)
rows_sum_to_one = torch.allclose(W.sum(dim=-1), torch.ones(len(sentence)))
print("weights: shape", tuple(W.shape), "| every row sums to 1:", rows_sum_to_one)

# %% [markdown]
# ## Looking at the weights
#
# The $T\times T$ weight matrix is the *attention map*: row $i$ shows how much word $i$
# draws from each word of the sentence.

# %% tags=["hide-input"]
plt.figure(figsize=plotting.SQUARE)
plotting.attention_map(W, sentence, title="softmax(X Xᵀ) for 'the man ate the fish'")
plt.show()

# %% [markdown]
# Reading the rows: which two words does each word draw on most? The cell asserts what
# the text below says about them.

# %% tags=["nbval-ignore-output"]
top2 = W.topk(2, dim=-1).indices  # (T, 2): the two largest weights of every row
for i, w in enumerate(sentence):
    picks = ", ".join(f"{sentence[j]} ({W[i, j]:.2f})" for j in top2[i].tolist())
    print(f"{w:>5} -> {picks}")
content = [1, 2, 4]  # man, ate, fish
assert all(top2[i, 0] == i for i in content)  # each content word: itself first
assert top2[4, 1] == 2 and top2[2, 1] == 4  # then fish <-> ate
assert W[0].max() - W[0].min() < 0.15  # 'the' spreads its weight almost evenly
assert torch.equal(W[0], W[3])  # the two copies of 'the' have identical rows

# %% [markdown]
# Every content word draws most on itself, because $x_i\cdot x_i = \lVert
# x_i\rVert^2$ tends to be the largest score in its row (exercise 1 asks whether it
# must be); chapter 2 adds learnable projections that free the layer from that. The short vector of *the* gives small
# scores everywhere, so it spreads its weight almost evenly. After itself, *fish* draws
# on *ate* and *ate* on *fish*: without any training, the similarity structure of the
# vectors is all the layer has to go on. Note also that the two copies of *the* have
# identical rows: the layer cannot tell them apart.
#
# ## Why the matrix form is fast: fewer Python calls
#
# The loop version and the matrix version do the same $O(T^2 d)$ arithmetic. What
# differs first is how many times Python calls into torch. Count them: every
# `X[i]`, `@`, `*`, `+=` in the loops is one call, each with a fixed cost of Python and
# dispatch work (of the order of a microsecond) however little arithmetic it does.
# `benchmark.CountTorchCalls` counts the torch calls made inside a `with` block (it
# intercepts every call through torch's `TorchFunctionMode`):

# %%
for T in (4, 8, 16):
    Xr = torch.randn(T, 64)
    with torch.no_grad(), benchmark.CountTorchCalls() as loops:
        self_attention_loops(Xr)
    with torch.no_grad(), benchmark.CountTorchCalls() as matrix:
        self_attention_matrix(Xr)
    formula = 9 * T**2 + 5 * T + 2
    line = f"T = {T:2d}: loops {loops.calls:4d} calls (9T² + 5T + 2 = {formula})"
    print(f"{line}, matrix {matrix.calls} calls")

# %% [markdown]
# Per pair of words $(i, j)$ the loops make nine calls (two indexings and a product for
# the score; three indexings, a multiplication, an in-place addition and a write for
# the average); per word five more (stack, two exponentials, a sum, a division); and two
# to start. The matrix form makes four calls whatever the length.
#
# Before timing anything, a word on clocks. A wall clock also counts the moments in
# which the operating system gives the processor to *other* programs, so on a busy
# machine (these pages are executed on a shared one) every measurement longer than a
# few milliseconds comes out inflated by however busy the machine happens to be. On a
# CPU we therefore time the CPU seconds our own process spends (`time.process_time`;
# torch runs on one thread here, so that is the computation's time). On a GPU,
# `benchmark.median_time` waits for the GPU to finish and reads the wall clock; its
# `clock="auto"` picks the right one for the device.

# %%
median_seconds = partial(benchmark.median_time, device=run.device, clock="auto")
clock = "CPU" if run.device.type == "cpu" else "wall-clock"
print(f"timings on {run.device.type}: {clock} seconds")

# %% [markdown]
# Now time both on random sentences of increasing length, and divide the loop time by
# its number of calls:

# %% tags=["nbval-ignore-output"]
loop_times, matrix_times = [], []
for T in lengths:
    Xr = torch.randn(T, 64, device=run.device)
    loop_times.append(median_seconds(lambda: self_attention_loops(Xr), repeats=3))
    # ~10 µs a call: many repeats, and a warm-up, so that one slow call cannot set it
    matrix_times.append(
        median_seconds(lambda: self_attention_matrix(Xr), repeats=200, warmup=20)
    )
calls = [9 * T**2 + 5 * T + 2 for T in lengths]
per_call = [t / n for t, n in zip(loop_times, calls)]
speedups = [lt / mt for lt, mt in zip(loop_times, matrix_times)]
print("     T |  loops ms | matrix ms | speed-up | loop µs per torch call")
for T, lt, mt, s, pc in zip(lengths, loop_times, matrix_times, speedups, per_call):
    print(f"{T:6d} | {lt * 1e3:9.2f} | {mt * 1e3:9.3f} | {s:8.0f} | {pc * 1e6:6.1f}")
report.glue("speedup_min", min(speedups), "{:.0f}")
report.glue("speedup_max", max(speedups), "{:.0f}")
report.glue("us_per_call_min", min(per_call) * 1e6, "{:.1f}")
report.glue("us_per_call_max", max(per_call) * 1e6, "{:.1f}")
assert min(speedups) > 1  # the matrix form was the faster one at every length

# %% tags=["hide-input"]
plt.figure(figsize=plotting.SINGLE)
times = {"Python loops": loop_times, "softmax(X Xᵀ) X": matrix_times}
title = f"Parameter-free self-attention on {run.device.type}, d = 64"
plotting.curves(lengths, times, xscale="log", yscale="log", xlabel="sentence length T",
                ylabel=f"{clock} seconds (median)", title=title)  # fmt: skip
plt.show()

# %% [markdown]
# On the machine that executed this page, the matrix form was {glue:text}`speedup_min`
# to {glue:text}`speedup_max` times faster over these lengths. Dividing the loop
# version's time by its $9T^2 + 5T + 2$ calls gives between
# {glue:text}`us_per_call_min` and {glue:text}`us_per_call_max` µs per call, of the
# order of a microsecond at every length. That quotient is an average over calls of several
# kinds (indexing, products, in-place additions), not the cost of any one of them. Is
# it the arithmetic, or the trip from Python into torch? Time the two apart: 10,000
# calls that each compute one dot product of two word vectors (64 multiply-adds),
# against one product $(100\times 64)(64\times 100)$ that computes 10,000 such dot
# products in a single call:

# %% tags=["nbval-ignore-output"]
a, b = torch.randn(2, 64, device=run.device)  # two word vectors
X100 = torch.randn(100, 64, device=run.device)


def many_calls():
    for _ in range(10_000):
        a @ b  # one call, one dot product


one_call = median_seconds(many_calls, repeats=5) / 10_000
per_dot = median_seconds(lambda: X100 @ X100.T, repeats=50) / 10_000
print(f"one call of one dot product:          {one_call * 1e6:6.2f} µs")
print(f"one dot product inside a large product: {per_dot * 1e9:6.2f} ns")
report.glue("us_one_call", one_call * 1e6, "{:.1f}")
report.glue("ns_per_dot", per_dot * 1e9, "{:.0f}")
assert one_call > 20 * per_dot  # the call, not its arithmetic, is the cost

# %% [markdown]
# One call took {glue:text}`us_one_call` µs; the same arithmetic inside a large
# product took {glue:text}`ns_per_dot` ns. Almost all of a small call's time is Python
# and dispatch work, and the loop version makes $9T^2 + 5T + 2$ such calls.
#
# So this speed-up measures **Python and dispatch overhead**, not the absence of a
# sequential chain: the scores of all pairs are independent, each row's weights wait
# only for that row's scores, and the additions into $y_i$ could run in any order: no
# chain grows with $T$. The structural difference between
# attention and recurrence is the next section.
#
# ## What separates attention from recurrence: no chain of steps
#
# Vaswani et al. {cite}`vaswani2017attention` (their Table 1) compare layer types by
# three numbers, for a sequence of $n$ words of width $d$ (and kernel width $k$ for a
# convolution, neighbourhood $r$ for restricted attention):
#
# | layer | complexity per layer | sequential operations | maximum path length |
# |---|---|---|---|
# | self-attention | $O(n^2 \cdot d)$ | $O(1)$ | $O(1)$ |
# | recurrent | $O(n \cdot d^2)$ | $O(n)$ | $O(n)$ |
# | convolutional | $O(k \cdot n \cdot d^2)$ | $O(1)$ | $O(\log_k n)$ |
# | self-attention restricted to $r$ neighbours | $O(r \cdot n \cdot d)$ | $O(1)$ | $O(n/r)$ |
#
# *Sequential operations* count the steps that must run one after the other, however
# many processors you have. *Maximum path length* is the number of steps a signal
# needs to travel between the two most distant positions: short paths make long-range
# dependencies easier to learn.

# %% tags=["hide-input"] mystnb={"image": {"alt": "Two panels. Left, a recurrent layer: inputs x1 to x5 each feed a state h1 to h5, and each state feeds the next, so the states are computed one after another in five steps and x1 reaches h5 only through five steps (that path is highlighted). Right, self-attention: every input x1 to x5 is connected to every output y1 to y5, all outputs are computed at once, and x1 reaches y5 in one step."}}
diagrams.attention.recurrence_vs_attention()
plt.show()

# %% [markdown]
# The sequential column can be measured. Autograd records every operation that
# produced a tensor, with links to the operations whose results it used. The longest
# chain of links is the **critical path**: operations on it must run one after another,
# whatever the hardware. For the recurrent cell above it grows with $T$; for
# self-attention it does not (`benchmark.critical_path` walks autograd's graph from
# the output back to the inputs, keeping the longest chain to every operation):

# %%
for T in (8, 32, 128):
    xs = torch.randn(1, T, d, device=run.device, requires_grad=True)  # (B, T, d)
    rec = benchmark.critical_path(rnn(xs))
    att = benchmark.critical_path(self_attention_matrix(xs))
    line = f"T = {T:3d}: recurrent cell {rec:3d} operations in sequence"
    print(f"{line} (3T + 3 = {3 * T + 3}), self-attention {att}")

# %% [markdown]
# The recurrent cell's chain is $3T + 3$ operations long: a product, an addition and
# a tanh per step (at the first step the product is $x_1 W_x$, since the zero start
# state has no history in autograd's graph), plus two operations at the start (the
# input tensor itself and the selection of its first word) and the final stack.
# Self-attention's has the same length for every $T$ (its batched products count a few
# reshapes). The chain from the first word to the last output is the path of the
# table's last column: $T$ steps through the recurrent states, one step through
# attention.
#
# Does that show up in time? PyTorch's `nn.GRU` runs its loop over time steps in C++
# (in cuDNN on a GPU): no Python call per step, though every step still launches a
# few small operations, and the chain of $T$ steps remains. We time one
# GRU layer against one multi-head attention layer (chapter 2's, with its four
# projections) on a batch of sentences, for growing $T$. The two differ in arithmetic
# too, and the table says how: per token, the GRU does $12d^2$ floating-point operations
# (three gates, each with an input and a hidden product), attention $8d^2 + 4Td$ (four
# projections, then $QK^\top$ and the weighted sum). Attention does *more* arithmetic as
# soon as $T > d$. The two formulas are `params.gru_flops` and `params.attention_flops`;
# we check them against torch's FLOP counter first. The counter sees the products of
# the layer's explicit path (`need_weights=True`); the timings below run its default
# path, PyTorch's fused kernel (chapter 2), which does the same products block by
# block without writing the $T\times T$ weights out, so the same count applies.


# %%
gru = nn.GRU(rnn_width, rnn_width, batch_first=True)
mha = attention.MultiHeadAttention(rnn_width, n_heads=4)
xs = torch.randn(2, 32, rnn_width)  # (B, T, d), counted on the CPU
with FlopCounterMode(display=False) as count_gru, torch.no_grad():
    gru(xs)
with FlopCounterMode(display=False) as count_mha, torch.no_grad():
    mha(xs, need_weights=True)  # the explicit path, whose products torch can count
same_gru = count_gru.get_total_flops() == params.gru_flops(2, 32, rnn_width)
same_mha = count_mha.get_total_flops() == params.attention_flops(2, 32, rnn_width)
print("formula = count, GRU:", same_gru)
print("formula = count, attention:", same_mha)
gru, mha = gru.to(run.device), mha.to(run.device)

# %% tags=["nbval-ignore-output"]
rnn_times, att_times = [], []
with torch.no_grad():
    for T in rnn_lengths:
        xs = torch.randn(rnn_batch, T, rnn_width, device=run.device)  # (B, T, d)
        rnn_times.append(median_seconds(lambda: gru(xs)))
        att_times.append(median_seconds(lambda: mha(xs)))
flops = {"GRU": params.gru_flops, "attention": params.attention_flops}
times = {"GRU": rnn_times, "attention": att_times}
rates = {k: [flops[k](rnn_batch, T, rnn_width) / t for T, t in zip(rnn_lengths, ts)]
         for k, ts in times.items()}  # fmt: skip
print(f"B = {rnn_batch}, d = {rnn_width}, {run.device.type}")
print("     T |   GRU ms | attention ms | GRU GFLOP/s | attention GFLOP/s")
for i, T in enumerate(rnn_lengths):
    print(
        f"{T:6d} | {rnn_times[i] * 1e3:8.2f} | {att_times[i] * 1e3:12.2f} | "
        f"{rates['GRU'][i] / 1e9:11.1f} | {rates['attention'][i] / 1e9:17.1f}"
    )
# the two longest lengths together: one length's single median is a noisy point
last = rnn_lengths[-2:]
ratio = sum(rnn_times[-2:]) / sum(att_times[-2:])  # GRU seconds / attention seconds
verdict = (
    f"about as fast as the GRU ({ratio:.2f} times its speed)"
    if 1 / 1.15 < ratio < 1.15  # within 15 %: too close to call from two points
    else report.times_faster(ratio) + " than the GRU"
)
rate = {k: sum(flops[k](rnn_batch, T, rnn_width) for T in last) / sum(ts[-2:])
        for k, ts in times.items()}  # fmt: skip
rate_ratio = rate["attention"] / rate["GRU"]
print(f"at T = {last[0]} and {last[1]} together: attention was {verdict},")
print(f"at {rate_ratio:.1f} times the GRU's FLOP per second")
report.glue("att_verdict", verdict)
report.glue("rate_ratio", rate_ratio, "{:.1f}")
# the prose compares arithmetic: attention does more than the GRU exactly when T > d
for T in rnn_lengths:
    more = params.attention_flops(1, T, rnn_width) > params.gru_flops(1, T, rnn_width)
    assert more == (rnn_width < T)

# %% tags=["hide-input"]
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=plotting.WIDE)
axes = dict(xscale="log", xticks=rnn_lengths[::2], xlabel="sentence length T")
plotting.curves(rnn_lengths, {"GRU": rnn_times, "attention": att_times}, ax1,
                yscale="log", ylabel=f"{clock} seconds (median)",
                title="Time per layer", **axes)  # fmt: skip
gflops = {name: [r / 1e9 for r in rate] for name, rate in rates.items()}
plotting.curves(rnn_lengths, gflops, ax2, ylabel="GFLOP per second",
                title="Arithmetic rate", **axes)  # fmt: skip
fig.suptitle(f"One layer, B = {rnn_batch}, d = {rnn_width}, on {run.device.type}")
fig.tight_layout()
plt.show()

# %% [markdown]
# Read the right panel first. The arithmetic rate says how well a layer keeps the
# hardware busy. Half of the GRU's work, the products with the hidden state, comes in
# $T$ small products of $B$ rows each, one after the other, and small products tend to
# use a processor poorly. Attention's work comes in products over many rows at once:
# each projection takes all $B \cdot T$ tokens in one product, and the fused kernel
# computes $QK^\top$ and the weighted sum over blocks of queries and keys. On the
# machine that executed this page (its device is printed by the chapter's first code
# cell), over the two longest lengths together attention ran at
# {glue:text}`rate_ratio` times the GRU's rate; measured in time, which also counts
# how much arithmetic each layer does, it was {glue:text}`att_verdict`. Time is
# arithmetic divided by rate; past $T = d$ the GRU does less arithmetic than
# attention, and whether the arithmetic or the rate matters more depends on the
# hardware and on $T$.
#
# When a layer runs on a single CPU thread, as in this page's CPU timings, the chain of
# $T$ steps costs no
# *waiting*: one thread runs everything one after the other anyway. It still costs
# *efficiency*: the chain is what forces the GRU's hidden-state work into $T$ small
# products, and the right panel is consistent with that (its rates also hold work the
# chain does not force, such as the GRU's input products, which torch batches over all
# $T$ steps). A second cost shows when
# more workers are available. Attention's work for a whole sentence is one batch of
# large matrix products, which can be split among threads; a GRU's is $T$ steps, each a
# small product of $B$ rows that needs the previous step's result, so extra threads can
# only share out the work inside one small step. The next cell times the forward pass
# of each layer (a copy on the CPU, whatever device the page runs on: threads are a CPU
# setting) at $T$ = 256 with one thread and with every thread this machine offers,
# by the wall clock (CPU seconds would add up the threads' work and hide any gain). On
# a shared machine the load changes while the cell runs, so the four measurements take
# turns, round after round, and the cell reports each layer's gain (time on one thread
# over time on all of them) as the median over the rounds with its smallest and
# largest value. It also prints the machine's load: threads only help when cores are
# idle. (`thread_gain.timing_rounds` takes the turns and leaves the GRU out of a round
# in which attention found the cores busy; `thread_gain.verdict` says what the rounds
# support.)

# %% tags=["nbval-ignore-output"]
T_par, n_all = 256, runtime.thread_count(os.cpu_count() or 1)  # every core, or the cap
cpu = torch.device("cpu")  # thread counts only change what runs on the CPU
xs = torch.randn(rnn_batch, T_par, rnn_width)  # (B, T, d), on the CPU
mha_cpu, gru_cpu = (copy.deepcopy(layer).to(cpu) for layer in (mha, gru))
threads, rounds = sorted({1, n_all}), 7
layers = {"attention": lambda: mha_cpu(xs), "GRU": lambda: gru_cpu(xs)}  # the probe
with torch.no_grad():
    par_times = thread_gain.timing_rounds(layers, threads, rounds, cpu)
gain = thread_gain.gains(par_times, n_all)  # one thread / all threads, per round
load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
print(f"B = {rnn_batch}, T = {T_par}, d = {rnn_width}, forward, cpu, "
      f"wall-clock ms (median of {rounds} rounds); load average {load:.1f} on "
      f"{os.cpu_count()} cores")  # fmt: skip
header = " | ".join(f"{n} thread(s)" for n in threads)
print(f"   layer   | {header} | gain [min, max]")
for name in ("GRU", "attention"):
    cells = " | ".join(f"{1e3 * par_times[name, n].nanmedian():11.2f}" for n in threads)
    g = gain[name][~gain[name].isnan()]
    spread = f"{g.median():.2f} [{g.min():.2f}, {g.max():.2f}]" if len(g) else "-"
    print(f"{name:10s} | {cells} | {spread}")
assert not gain["attention"].isnan().any()  # the probe is timed in every round
summary = thread_gain.verdict(gain, n_all)
print(summary)
report.glue("thread_summary", summary)

# %% [markdown]
# {glue:text}`thread_summary` However many cores a CPU has, it offers little parallel
# hardware next to a GPU. On a GPU, with thousands of cores, a GRU step of $B$ rows is
# expected to keep few of them busy while the next step waits, and attention's products
# to fill them. The full profile (`profile = "full"` on a GPU) measures that case
# with the timing cells above. In training, where the whole sentence is known in
# advance, attention processes all positions at once while the recurrent layer still
# takes its $T$ steps: that is the advantage the transformer was designed for
# {cite}`vaswani2017attention`.
#
# ## Order is invisible to self-attention
#
# Swap the subject and the object: *the fish ate the man*. The sentence contains the
# same words, only in a different order. Write the reordering as a permutation matrix
# $P$: a $T\times T$ matrix of zeros with a single 1 in every row and column, so that
# $PX$ holds the rows of $X$ in the new order. Then, with $A = XX^\top$,
#
# $$(PX)(PX)^\top = P\,XX^\top P^\top = PAP^\top .$$
#
# Multiplying by $P$ on the left reorders the *rows* of $A$; multiplying by $P^\top$ on
# the right reorders the *entries within every row* in the same way. The softmax works
# on each row separately, so it does not care in which order the rows come, and it
# treats the entries of a row alike, so reordering them just reorders its output. Hence
#
# $$\mathrm{softmax}(PAP^\top) = P\,\mathrm{softmax}(A)\,P^\top .$$
#
# Finally, $P^\top P = I$ (undoing a reordering restores the order), so
#
# $$\mathrm{softmax}\big((PX)(PX)^\top\big)\,PX
#   = P\,\mathrm{softmax}(A)\,P^\top P\,X = P\,\mathrm{softmax}(XX^\top)X .$$
#
# The outputs for the reordered sentence are the *same vectors*, merely reordered. The
# middle step holds for any square matrix $A$, not only for $XX^\top$; check it on a
# random one:

# %%
gen = torch.Generator().manual_seed(0)
A = torch.randn(6, 6, generator=gen)  # any scores, not even symmetric
P = torch.eye(6)[torch.randperm(6, generator=gen)]  # (6, 6): a permutation matrix
torch.testing.assert_close(P.T @ P, torch.eye(6))
torch.testing.assert_close((P @ A @ P.T).softmax(dim=-1), P @ A.softmax(dim=-1) @ P.T)
print("Pᵀ P = I, and softmax(P A Pᵀ) = P softmax(A) Pᵀ (within 1e-5):", True)

# %% [markdown]
# Now the two sentences. The permutation that turns *the man ate the fish* into *the
# fish ate the man* swaps positions 1 and 4, counting from 0 as Python does (*man* and
# *fish*):

# %%
swapped = ["the", "fish", "ate", "the", "man"]
# where each word of the new sentence came from
perm = [sentence.index(w) if w != "the" else i for i, w in enumerate(swapped)]
perm = torch.tensor(perm)
X_swapped = X[perm]  # (T, 4): the same rows in the new order
Y_swapped = self_attention_matrix(X_swapped)
torch.testing.assert_close(Y_swapped, Y_matrix[perm])
print("permutation:", perm.tolist())
for w in ["man", "fish"]:
    a, b = Y_matrix[sentence.index(w)], Y_swapped[swapped.index(w)]
    print(f"output for '{w}' in both sentences identical: {torch.allclose(a, b)}")

# %% [markdown]
# The vector the layer produces for *man* is identical whether the man eats or is
# eaten. Averaged into one sentence vector, the two sentences become indistinguishable:

# %% tags=["nbval-ignore-output"]
mean_1, mean_2 = Y_matrix.mean(dim=0), Y_swapped.mean(dim=0)  # (4,) each
torch.testing.assert_close(mean_1, mean_2)
print("mean output, 'the man ate the fish':", mean_1.numpy().round(4))
print("mean output, 'the fish ate the man':", mean_2.numpy().round(4))

# %% [markdown]
# The property holds for any input and any permutation, not just this sentence. A
# random check over a batch:

# %%
gen = torch.Generator().manual_seed(1)
Xb = torch.randn(16, 10, 8, generator=gen)  # (B, T, d): 16 random "sentences"
# (B, T): one permutation per sentence
order = torch.stack([torch.randperm(10, generator=gen) for _ in range(16)])


def permute(t: torch.Tensor) -> torch.Tensor:
    """Reorder the rows of every sentence by `order`. Shapes: (B, T, d) -> (B, T, d)."""
    return torch.gather(t, 1, order[..., None].expand_as(t))


torch.testing.assert_close(
    self_attention_matrix(permute(Xb)), permute(self_attention_matrix(Xb))
)
print("attention(permute(X)) == permute(attention(X)): 16 random sentences, True")

# %% [markdown]
# So requirement 3, order, is not met yet. Chapter 4 fixes it by adding information
# about each word's position. Chapter 2 first makes the layer learnable.
#
# ## Exercises
#
# Each exercise has a stub to complete and a check that runs your function on random
# inputs against the reference; when an answer is wrong, the check says what is
# typically wrong with it. The worked solutions are folded away below each stub.
#
# ### Exercise 1: can a word outweigh itself? (predict, then construct)
#
# In *the man ate the fish*, every content word put its largest weight on itself.
# **Predict** before you write code: is that guaranteed? In a sentence of two words
# $x$ and $y$, can the row of $x$ in $\mathrm{softmax}(XX^\top)$ put more weight on $y$
# than on $x$ itself? If so, what must $y$ be like? (Compare the two scores of that
# row, $x\cdot x$ and $x\cdot y$, and recall $x\cdot y = \lVert x\rVert\,\lVert
# y\rVert\cos\theta$.)
#
# Then write `outweigh(x)`: given a word vector $x$ of shape $(d,)$, return a $y$ of
# the same shape that wins the row of $x$. The check tries it on several random words
# and, if it fails, says why.


# %%
def outweigh(x):
    # YOUR CODE HERE
    raise NotImplementedError


# %% tags=["solution", "hide-cell"]
def outweigh(x):
    return 2 * x  # x · 2x = 2‖x‖² > ‖x‖² = x · x


# %%
checks.check_outweigh_self(outweigh)

# %% [markdown]
# ### Exercise 2: sentences that see each other (break and fix)
#
# A colleague batched the chapter's layer by stacking all sentences into one long
# matrix, so that a single product handles the whole batch:


# %%
def flat_self_attention(X: torch.Tensor) -> torch.Tensor:
    """Meant to be softmax(X Xᵀ) X for every sentence of X (B, T, d). It has a bug."""
    flat = X.reshape(-1, X.shape[-1])  # (B·T, d)
    return self_attention_matrix(flat).reshape(X.shape)  # (B, T, d)


# %% [markdown]
# **Predict** before you run the next cell: if only sentence 2 of a batch changes, does
# the output for sentence 1 change?

# %%
gen = torch.Generator().manual_seed(2)
batch = torch.randn(2, 5, 4, generator=gen)  # (B, T, d)
edited = batch.clone()
edited[1] = torch.randn(5, 4, generator=gen)  # change sentence 2 only
same = torch.allclose(flat_self_attention(batch)[0], flat_self_attention(edited)[0])
print("output for sentence 1 unchanged:", same)

# %% [markdown]
# It changes: the $(B\cdot T)\times(B\cdot T)$ score matrix of the flat version also
# scores every word against the words of *other* sentences. Calling
# `self_attention_matrix` on the (B, T, d) batch itself would fix it (its products are
# batched over the first axis). Fix it differently here, keeping the single flat
# product: a boolean **mask** says which keys each query may
# use (True = may attend), and masked scores get weight 0 (chapter 2 builds masks in
# general). Write `same_sentence_mask(B, T)` returning the $(B\cdot T)\times(B\cdot T)$
# boolean mask that is True exactly where the query's and the key's rows of the flat
# matrix belong to the same sentence. Before writing code, sketch it for $B = 2$,
# $T = 3$: what shape do the True entries make?


# %%
def same_sentence_mask(B, T):
    # YOUR CODE HERE
    raise NotImplementedError


# %% tags=["solution", "hide-cell"]
def same_sentence_mask(B, T):
    sentence = torch.arange(B * T) // T  # row k of the flat matrix: sentence k // T
    return sentence[:, None] == sentence[None, :]  # (B·T, B·T), block diagonal


# %%
checks.check_same_sentence_mask(same_sentence_mask)

# %% [markdown]
# ### Exercise 3: similarity that ignores length
#
# The dot product grows with the length of the vectors, so one long vector can take
# most of the weight in every row. Replace it by the cosine similarity divided by a
# temperature $\tau$: $\mathrm{softmax}(\hat X \hat X^\top / \tau)\,X$, where $\hat X$
# holds the rows of $X$ scaled to unit length. Write `cosine_attention(X, tau)` for
# $X$ of shape $(B, T, d)$.


# %%
def cosine_attention(X, tau):
    # YOUR CODE HERE
    raise NotImplementedError


# %% tags=["solution", "hide-cell"]
def cosine_attention(X, tau):
    Xn = X / X.norm(dim=-1, keepdim=True)  # (B, T, d), unit rows
    W = (Xn @ Xn.transpose(-2, -1) / tau).softmax(dim=-1)  # (B, T, T)
    return W @ X  # (B, T, d)


# %%
checks.check_cosine_attention(cosine_attention)

# %% [markdown]
# ## What we added to the package
#
# - `transformer_book.attention.scaled_dot_product_attention(q, k, v, mask=None,
#   bias=None, scale=None)`: the general form of this chapter's formula, returning
#   `(output, weights)`; chapter 2 explains the scale, the mask and the bias.
# - `transformer_book.plotting.attention_map(weights, tokens)`: the heatmap used above.
# - `transformer_book.benchmark.median_time(fn, clock="auto")`: the timer behind the
#   speed comparisons (CPU time on a CPU, synchronised wall-clock time on a GPU);
#   `benchmark.CountTorchCalls` and `benchmark.critical_path`, the two counts that
#   explain them; `params.gru_flops` and `params.attention_flops`, the arithmetic of
#   one layer.
# - `transformer_book.report.times_faster`: a measured speed ratio in words.
# - `transformer_book.thread_gain`: `timing_rounds`, `gains` and `verdict`, what more
#   threads buy a layer, measured in turns on a shared machine.
# - `transformer_book.plotting.curves`: the timing figures' boilerplate.
# - `transformer_book.diagrams.attention.self_attention_matrix_form()` and
#   `recurrence_vs_attention()`: the two diagrams of this chapter.
