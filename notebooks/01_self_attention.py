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
# - say what a sequence model must deliver and why a recurrent network is awkward to batch;
# - use the dot product as a measure of how similar two word vectors are;
# - write self-attention with explicit loops, then as the single expression
#   $\mathrm{softmax}(XX^\top)X$, and check that the two agree;
# - measure how much faster the matrix form is;
# - show that self-attention on its own cannot tell *the man ate the fish* from
#   *the fish ate the man*.

# %% tags=["remove-cell"]
# Colab only: install this book's package (does nothing anywhere else).
import sys

if "google.colab" in sys.modules:
    import subprocess

    repo = "https://github.com/transformers-step-by-step/transformers-step-by-step"
    pip = [sys.executable, "-m", "pip", "install", "-q"]
    subprocess.run([*pip, f"transformer-book @ git+{repo}"], check=True)

# %%
import matplotlib.pyplot as plt
import torch

from transformer_book import attention, benchmark, checks, plotting, runtime

# %% tags=["parameters"]
device = "auto"  # "auto": cuda when available, else cpu
profile = "auto"  # "auto": full on a GPU, quick on a CPU

# %%
run = runtime.setup(device, profile, seed=0)
print(run)
lengths = run.pick(
    quick=[8, 16, 32, 64, 128], full=[8, 16, 32, 64, 128, 256, 512]
)  # timing sweep

# %% [markdown]
# ## What a sequence model has to do
#
# Take the sentence *"We ate at the new restaurant on Main Street and their pasta was
# superb."* To understand *their*, a reader has to connect it to *restaurant*, five words
# earlier. A model that turns each word into a vector has to let the vector for *their*
# draw on the vector for *restaurant*, and how strongly it does so should depend on the two
# words themselves, not on a fixed wiring between positions.
#
# We want a layer that
#
# 1. returns one output vector per input word, so layers can be stacked and each output
#    can be labelled (a slot, a part of speech, the next word);
# 2. lets every output depend on the whole sentence (context);
# 3. can take the order of the words into account.
#
# A recurrent network {cite}`hochreiter1997lstm` meets all three, but it reads the sentence
# one word at a time:
# the state after word $t$ needs the state after word $t-1$. Below, a minimal recurrent
# cell makes that dependence explicit: the loop cannot be replaced by one big operation
# over all positions, so the work for a long sentence is a long chain of small steps.

# %%
d = 64
x = torch.randn(
    1, 128, d, device=run.device
)  # (B, T, d): one sentence of 128 word vectors
W_h, W_x = (
    torch.randn(d, d, device=run.device) / d**0.5,
    torch.randn(d, d, device=run.device) / d**0.5,
)


def rnn(x: torch.Tensor) -> torch.Tensor:
    """h_t = tanh(h_{t-1} W_h + x_t W_x): step t cannot start before step t-1 has finished."""
    h, states = torch.zeros(x.shape[0], d, device=x.device), []
    for t in range(x.shape[1]):
        h = torch.tanh(h @ W_h + x[:, t] @ W_x)
        states.append(h)
    return torch.stack(states, dim=1)  # (B, T, d)


print(
    "sequential steps for 128 words:",
    x.shape[1],
    "| output shape:",
    tuple(rnn(x).shape),
)

# %% [markdown]
# Attention {cite}`bahdanau2015neural,vaswani2017attention` takes the opposite route: every
# word is compared with every other word at the same time. To compare words we need a notion of similarity between their vectors.
#
# ## The dot product measures similarity
#
# For two vectors $a, b \in \mathbb{R}^d$,
#
# $$a \cdot b = \sum_{i=1}^{d} a_i b_i = \lVert a\rVert\,\lVert b\rVert \cos\theta .$$
#
# It is large when the vectors point the same way, near zero when they are unrelated and
# negative when they point in opposite directions. To see that on something readable, give
# a few words hand-made vectors whose four coordinates mean *is a person*, *is an animal*,
# *is food* and *is an action*.

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
# *fish* is closest to *cat* (both animals) and to *ate* (food meets eating), *man*'s
# nearest other word is *cat*, and only weakly; the filler word *the* is weakly similar to everything. A single
# matrix product $EE^\top$ produced the whole table.
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
print(Y_loops)

# %% [markdown]
# Each output row is a blend of the input rows. The output is as long as the input
# (requirement 1) and every $y_i$ depends on every $x_j$ (requirement 2).
#
# ## The same thing as one matrix formula
#
# Stack the input vectors as the rows of a matrix $X \in \mathbb{R}^{T\times d}$. Then
# all the scores are the entries of $XX^\top$, the softmax runs along each row, and the
# weighted averages are one more matrix product:
#
# $$Y = \mathrm{softmax}\!\left(XX^\top\right) X, \qquad
#   \underbrace{X}_{T\times d}\;\underbrace{X^\top}_{d\times T} \to T\times T, \qquad
#   \underbrace{W}_{T\times T}\;\underbrace{X}_{T\times d} \to T \times d .$$


# %%
def self_attention_matrix(X: torch.Tensor) -> torch.Tensor:
    """Parameter-free self-attention as softmax(X Xᵀ) X. Shapes: X (..., T, d) -> (..., T, d)."""
    W = (X @ X.transpose(-2, -1)).softmax(
        dim=-1
    )  # (..., T, T): row i = weights of word i
    return W @ X  # (..., T, d)


Y_matrix = self_attention_matrix(X)
torch.testing.assert_close(Y_matrix, Y_loops)
print(
    "loops and matrix formula agree; max difference:",
    (Y_matrix - Y_loops).abs().max().item(),
)

# %% [markdown]
# The package's attention function, which later chapters use everywhere, computes
# $\mathrm{softmax}(QK^\top \cdot s)\,V$. With $Q = K = V = X$ and scale $s = 1$ it is exactly
# our formula, and it also returns the weight matrix so we can look at it:

# %%
Y_pkg, W = attention.scaled_dot_product_attention(X, X, X, scale=1.0)
torch.testing.assert_close(Y_pkg, Y_matrix)
print(
    "weights: shape",
    tuple(W.shape),
    "| row sums:",
    [round(s, 6) for s in W.sum(dim=-1).tolist()],
)

# %% [markdown]
# ## Looking at the weights
#
# The $T\times T$ weight matrix is the *attention map*: row $i$ shows how much word $i$
# draws from each word of the sentence.

# %% tags=["hide-input"]
plt.figure(figsize=(4.5, 4))
plotting.attention_map(W, sentence, title="softmax(X Xᵀ) for 'the man ate the fish'")
plt.show()

# %% [markdown]
# Reading the rows: which two words does each word draw on most?

# %%
for i, w in enumerate(sentence):
    top = W[i].topk(2)
    print(
        f"{w:>5} -> "
        + ", ".join(
            f"{sentence[j]} ({p:.2f})"
            for p, j in zip(top.values.tolist(), top.indices.tolist())
        )
    )

# %% [markdown]
# Every content word draws most on itself, because $x_i\cdot x_i = \lVert x_i\rVert^2$ tends
# to be the largest score in its row; chapter 2 adds learnable projections that free the
# layer from that. The short vector of *the* gives small scores everywhere, so it spreads
# its weight almost evenly. After itself, *fish* draws on *ate* and *ate* on *fish*: without any training,
# the similarity structure of the vectors is all the layer has to go on. Note also that
# the two copies of *the* have identical rows: the layer cannot tell them apart.
#
# ## Why the matrix form is fast
#
# The loop version performs $T^2$ separate dot products from Python. The matrix version
# hands the same arithmetic to one optimised routine (BLAS on a CPU, thousands of cores on
# a GPU). We time both on random sentences of increasing length.

# %%
loop_times, matrix_times = [], []
for T in lengths:
    Xr = torch.randn(T, 64, device=run.device)
    loop_times.append(
        benchmark.median_time(
            lambda: self_attention_loops(Xr), repeats=1, warmup=0, device=run.device
        )
    )
    matrix_times.append(
        benchmark.median_time(
            lambda: self_attention_matrix(Xr), repeats=20, device=run.device
        )
    )
print("lengths timed:", lengths)

# %% tags=["hide-input"]
fig, ax = plt.subplots(figsize=(5.5, 3.5))
ax.loglog(lengths, loop_times, "o-", label="Python loops")
ax.loglog(lengths, matrix_times, "s-", label="softmax(X Xᵀ) X")
ax.set_xlabel("sequence length T")
ax.set_ylabel("seconds (median)")
ax.set_title(f"Self-attention on {run.device.type}, d = 64")
ax.legend()
plt.show()

# %% tags=["nbval-ignore-output"]
for T, lt, mt in zip(lengths, loop_times, matrix_times):
    print(
        f"T = {T:4d}: loops {lt * 1e3:9.2f} ms   matrix {mt * 1e3:7.3f} ms   speed-up x{lt / mt:8.0f}"
    )

# %% [markdown]
# The matrix form is hundreds to thousands of times faster, and the gap grows with $T$
# (the exact factors in the table above come from the machine that executed this page). Both versions do
# $O(T^2 d)$ arithmetic; what differs is that the matrix form does it in a handful of
# large, parallel operations instead of $T^2$ small sequential ones, and nothing in it
# has to wait for an earlier position, unlike the recurrent cell above.
#
# ## Order is invisible to self-attention
#
# Swap the subject and the object: *the fish ate the man*. The sentence contains the same
# words, only in a different order. Reordering the inputs by a permutation $P$ (a matrix
# that shuffles rows) gives
#
# $$\mathrm{softmax}\big((PX)(PX)^\top\big)\,PX = P\,\mathrm{softmax}\big(XX^\top\big)X ,$$
#
# because the softmax works row by row and $P^\top P = I$. The outputs are the *same
# vectors*, merely reordered.

# %%
swapped = ["the", "fish", "ate", "the", "man"]
perm = torch.tensor(
    [sentence.index(w) if w != "the" else i for i, w in enumerate(swapped)]
)  # where each word came from
X_swapped = X[perm]  # (T, 4): the same rows in the new order
Y_swapped = self_attention_matrix(X_swapped)
torch.testing.assert_close(Y_swapped, Y_matrix[perm])
print("permutation:", perm.tolist())
for w in ["man", "fish"]:
    a, b = Y_matrix[sentence.index(w)], Y_swapped[swapped.index(w)]
    print(f"output for '{w}' in both sentences identical: {torch.allclose(a, b)}")

# %% [markdown]
# The vector the layer produces for *man* is identical whether the man eats or is eaten.
# Averaged into one sentence vector, the two sentences become indistinguishable:

# %%
print(
    "mean output, 'the man ate the fish':",
    [round(v, 4) for v in Y_matrix.mean(dim=0).tolist()],
)
print(
    "mean output, 'the fish ate the man':",
    [round(v, 4) for v in Y_swapped.mean(dim=0).tolist()],
)
print("equal:", torch.allclose(Y_matrix.mean(dim=0), Y_swapped.mean(dim=0)))

# %% [markdown]
# The property holds for any input and any permutation, not just this sentence. A random
# check over a batch:

# %%
gen = torch.Generator().manual_seed(1)
Xb = torch.randn(16, 10, 8, generator=gen)  # (B, T, d): 16 random "sentences"
P = torch.stack(
    [torch.randperm(10, generator=gen) for _ in range(16)]
)  # (B, T): one permutation each
permute = lambda t: torch.gather(
    t, 1, P[..., None].expand_as(t)
)  # reorder the rows of every sentence
torch.testing.assert_close(
    self_attention_matrix(permute(Xb)), permute(self_attention_matrix(Xb))
)
print(
    "attention(permute(X)) == permute(attention(X)) for 16 random sentences and permutations"
)

# %% [markdown]
# So requirement 3, order, is not met yet. Chapter 4 fixes it by adding information about
# each word's position. Chapter 2 first makes the layer learnable.
#
# ## Exercises
#
# Each exercise has a stub to complete and a check that runs your function on random
# inputs against the reference. The worked solutions are folded away below each stub.
#
# ### Exercise 1: the weight matrix
#
# Write `attention_weights(X)` that takes $X$ of shape $(T, d)$ and returns the $T\times T$
# matrix $\mathrm{softmax}(XX^\top)$, softmax along each row.


# %%
def attention_weights(X):
    # YOUR CODE HERE
    raise NotImplementedError


# %% tags=["solution", "hide-cell"]
def attention_weights(X):
    return (X @ X.T).softmax(dim=-1)


# %%
checks.check_self_attention_weights(attention_weights)

# %% [markdown]
# ### Exercise 2: a whole batch at once
#
# Write `batched_self_attention(X)` for $X$ of shape $(B, T, d)$: the same formula applied to
# each of the $B$ sentences, with no Python loop.


# %%
def batched_self_attention(X):
    # YOUR CODE HERE
    raise NotImplementedError


# %% tags=["solution", "hide-cell"]
def batched_self_attention(X):
    W = (X @ X.transpose(-2, -1)).softmax(dim=-1)  # (B, T, T)
    return W @ X  # (B, T, d)


# %%
checks.check_batched_self_attention(batched_self_attention)

# %% [markdown]
# ### Exercise 3: similarity that ignores length
#
# The dot product grows with the length of the vectors, so one long vector can dominate
# every row. Replace it by the cosine similarity divided by a temperature $\tau$:
# $\mathrm{softmax}(\hat X \hat X^\top / \tau)\,X$, where $\hat X$ holds the rows of $X$ scaled to
# unit length. Write `cosine_attention(X, tau)` for $X$ of shape $(B, T, d)$.


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
# - `transformer_book.attention.scaled_dot_product_attention(q, k, v, mask=None, bias=None, scale=None)`:
#   the general form of this chapter's formula, returning `(output, weights)`; chapter 2
#   explains the scale, the mask and the bias.
# - `transformer_book.plotting.attention_map(weights, tokens)`: the heatmap used above.
# - `transformer_book.benchmark.median_time(fn)`: the timer behind the speed comparison.
