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
# # 4. Where is each word? Positional encodings
#
# Chapter 1 ended with a flaw: self-attention returns the same vector for *man* whether the
# man eats the fish or the fish eats the man. Something has to tell the model where each
# token sits. This chapter builds the five answers in use today and trains the same small
# model with each of them.
#
# By the end of it you will be able to
#
# - explain why a position written as one number (first, second, … or a fraction of the
#   length) is a poor input, and why a trained vector per position cannot go past the
#   longest training sequence;
# - compute the sinusoidal encoding and show that the dot product of two encodings depends
#   only on the distance between the positions;
# - add relative position to the attention scores, learned (T5's log-sized buckets) or
#   fixed (ALiBi's linear penalty, for any number of heads);
# - rotate queries and keys (RoPE), in two and in $d$ dimensions, and check that the scores
#   then depend only on the offset;
# - measure which schemes still work on sequences twice as long as the training ones.

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

from transformer_book import blocks, checks, masks, positions, runtime, training

# %% tags=["parameters"]
device = "auto"  # "auto": cuda when available, else cpu
profile = "auto"  # "auto": full on a GPU, quick on a CPU

# %%
run = runtime.setup(
    device, profile, seed=0, cpu_threads=1
)  # tiny models: one CPU thread is enough
print(run)
# the experiment at the end: model size and training length per profile
d_model, n_heads, n_layers = run.pick(quick=32, full=64), 4, run.pick(quick=1, full=2)
n_steps, batch_size, lr = (
    run.pick(quick=80, full=1500),
    run.pick(quick=16, full=64),
    run.pick(quick=2e-2, full=3e-3),
)

# %% [markdown]
# ## 1. Attention needs to be told the order
#
# Recall the problem with word vectors $X$ and parameter-free self-attention
# $\mathrm{softmax}(XX^\top)X$ from chapter 1: reorder the words and the outputs are
# reordered, nothing else changes. Adding a vector $p_t$ that depends on the position $t$,
# $x_t \to x_t + p_t$, breaks that symmetry. The cell uses the sinusoidal vectors of
# section 4 as $p_t$.

# %%
gen = torch.Generator().manual_seed(0)
vectors = dict(
    zip(["the", "man", "ate", "fish"], torch.randn(4, 8, generator=gen))
)  # one random vector per word
s1, s2 = ["the", "man", "ate", "the", "fish"], ["the", "fish", "ate", "the", "man"]
X1, X2 = (torch.stack([vectors[w] for w in s]) for s in (s1, s2))  # (5, 8) each
self_attention = lambda X: (X @ X.T).softmax(dim=-1) @ X  # chapter 1
P = positions.sinusoidal_encoding(5, 8)  # (5, 8): one vector per position
for name, A, B in (("no positions  ", X1, X2), ("with positions", X1 + P, X2 + P)):
    man1, man2 = self_attention(A)[s1.index("man")], self_attention(B)[s2.index("man")]
    print(
        f"{name}: output for 'man' the same in both sentences? {torch.allclose(man1, man2)}"
        f"  (max difference {(man1 - man2).abs().max():.3f})"
    )

# %% [markdown]
# The rest of the chapter is about what $p_t$ should be, and about schemes that put the
# position somewhere else than into $x_t$.
#
# ## 2. Why not just number the positions?
#
# The simplest idea is one extra feature holding the position: $1, 2, 3, \dots$ Those
# numbers grow without bound, so a long document feeds values in the hundreds next to
# features of size one, a poor input for gradient descent:

# %%
token_vectors = nn.Embedding(1000, 64).weight  # freshly initialised token embeddings
print(
    f"token embedding entries: std {token_vectors.std():.2f};  raw position of the 512th token: 512"
)

# %% [markdown]
# Dividing by the length $T$ keeps every value in $(0, 1]$, but then a number no longer
# means a place:

# %%
for T in (5, 20):
    frac = torch.arange(1, T + 1) / T  # (T,): position t / T
    where = int(torch.isclose(frac, torch.tensor(0.8)).nonzero()) + 1
    print(f"T={T:2d}: t/T = {[round(v, 2) for v in frac.tolist()]}")
    print(f"       0.8 is word {where} of {T}; neighbours are {1 / T:.2f} apart")

# %% [markdown]
# The value 0.8 is the 4th word of a 5-word sentence and the 16th word of a 20-word one,
# and the step between neighbours changes with the length too. What a position should
# provide is the same code for the same place in every sentence, and distances that mean the
# same thing everywhere. The schemes below do that in different ways.
#
# ## 3. Learned absolute embeddings
#
# Give each position $t = 0, \dots, \mathrm{max\_len}-1$ its own trainable vector $p_t$ and add
# it to the token embedding, $x_t + p_t$. BERT and GPT-2 do this; the original transformer
# tried it too and found it about as good as the fixed sinusoids {cite}`vaswani2017attention`.
# The table has `max_len` rows, and a position past the last row has no vector at all.
# `positions.LearnedPositionalEmbedding` says so instead of failing inside an index lookup:

# %%
learned = positions.LearnedPositionalEmbedding(max_len=8, d_model=4)
print(
    "parameters:", sum(p.numel() for p in learned.parameters()), "= max_len x d_model"
)
print("8 tokens ->", tuple(learned(torch.zeros(1, 8, 4)).shape))
try:
    learned(torch.zeros(1, 9, 4))  # one token too many
except ValueError as err:
    print("9 tokens -> ValueError:", err)

# %% [markdown]
# The vectors are learned from data, so they are only as good as the data that reached
# them. A position that no training sequence reaches never receives a gradient and keeps its
# random initial vector. Train on 5-token sequences and look which rows get a gradient:

# %%
learned(torch.randn(3, 5, 4)).pow(2).sum().backward()  # any loss on 5-token sequences
has_grad = learned.embedding.weight.grad.abs().sum(dim=1) > 0  # (max_len,)
print("positions with a gradient:", has_grad.nonzero().flatten().tolist())
print("positions without one:   ", (~has_grad).nonzero().flatten().tolist())

# %% [markdown]
# Section 8 measures what the hard limit at `max_len` means for a trained model.
#
# ## 4. Sinusoidal encodings
#
# The original transformer {cite}`vaswani2017attention` uses fixed vectors instead. Position
# $p$ gets, for every pair of features $i = 0, \dots, d/2 - 1$, a sine and a cosine of the
# same angle:
#
# $$\mathrm{PE}[p, 2i] = \sin(p\,\omega_i), \qquad \mathrm{PE}[p, 2i+1] = \cos(p\,\omega_i),
# \qquad \omega_i = 10000^{-2i/d}.$$
#
# The first pair turns by one radian per position, the last one almost not at all. Written
# with loops, then compared with the package:


# %%
def sinusoids(n_positions: int, d: int) -> torch.Tensor:
    pe = torch.zeros(n_positions, d)
    for p in range(n_positions):
        for i in range(d // 2):
            omega = 10000 ** (-2 * i / d)
            pe[p, 2 * i], pe[p, 2 * i + 1] = math.sin(p * omega), math.cos(p * omega)
    return pe


pe = positions.sinusoidal_encoding(50, 128)  # (50, 128)
torch.testing.assert_close(sinusoids(50, 128), pe)
print("loops == positions.sinusoidal_encoding:", tuple(pe.shape))
print(
    f"omega_0 = {10000 ** (-0 / 128):g} rad per position, omega_63 = {10000 ** (-126 / 128):.2g} rad per position"
)

# %% [markdown]
# Each row of the heatmap is one position's vector. The left columns change quickly from
# row to row (high frequency), the right ones slowly, so every row is a different pattern,
# like the digits of a clock with hands turning at 64 different speeds.

# %% tags=["hide-input"]
fig, ax = plt.subplots(figsize=(8, 3.6))
im = ax.imshow(pe, aspect="auto", cmap="RdBu", vmin=-1, vmax=1)
ax.set_xlabel("feature (column 2i = sin, 2i+1 = cos)")
ax.set_ylabel("position p")
ax.set_title("sinusoidal encoding of 50 positions, d = 128")
fig.colorbar(im, ax=ax)
plt.show()

# %% [markdown]
# Why sines and cosines of the same angle? Because of $\sin a \sin b + \cos a \cos b =
# \cos(a - b)$, the dot product of two encodings only sees the difference of the positions:
#
# $$\mathrm{PE}_m \cdot \mathrm{PE}_n = \sum_{i=0}^{d/2-1} \cos\big((m - n)\,\omega_i\big).$$
#
# Every pair $(m, n)$ with the same $n - m$ lies on one diagonal of the matrix of dot
# products, so each diagonal should hold a single value, the one of the formula:

# %%
gram = (
    pe.double() @ pe.double().T
)  # (50, 50): gram[m, n] = PE_m · PE_n (float64: no round-off to distract)
omega = 10000.0 ** (-torch.arange(0, 128, 2, dtype=torch.float64) / 128)  # (64,)
for k in (0, 1, 5, 20, 45):
    diag = torch.diagonal(gram, offset=k)  # all pairs with n - m = k
    print(
        f"n - m = {k:2d}: {len(diag):2d} pairs, dot products from {diag.min():8.4f} to {diag.max():8.4f};"
        f"  sum_i cos(k w_i) = {torch.cos(k * omega).sum():8.4f}"
    )

# %% [markdown]
# The dot product is largest at distance 0 ($\cos 0 = 1$ in every pair, so it equals
# $d/2 = 64$) and falls off, with ripples, as the positions move apart:

# %% tags=["hide-input"]
offsets = torch.arange(-49, 50)
fig, ax = plt.subplots(figsize=(7, 3))
ax.plot(
    offsets,
    torch.cos(offsets[:, None] * omega).sum(dim=1),
    label=r"$\sum_i \cos(k\,\omega_i)$",
)
ax.plot(
    torch.arange(50) - 25,
    gram[25],
    "o",
    ms=3,
    label=r"$\mathrm{PE}_{25} \cdot \mathrm{PE}_n$, $k = n - 25$",
)
ax.set_xlabel("offset k = n - m")
ax.set_ylabel("dot product")
ax.set_title("sinusoidal encodings: similarity depends on the offset only")
ax.legend()
plt.show()

# %% [markdown]
# The encoding is defined for any position, so unlike the learned table it never runs out.
# Whether a model trained on short sequences can *use* positions it never saw is another
# question, which section 8 answers.
#
# Both absolute schemes add the position to the token once, at the bottom of the stack, and
# the attention layers have to recover distances from the mixture. The next three schemes
# put the relative position where it is used, into every attention score
# {cite}`shaw2018relative`.
#
# ## 5. T5: a learned bias per distance bucket
#
# T5 {cite}`raffel2020t5` adds a learned scalar $b_h(\cdot)$ to the score of query $i$ and
# key $j$ in head $h$:
#
# $$\mathrm{score}_h(i, j) = \frac{q_i \cdot k_j}{\sqrt{d_k}} + b_h\big(\mathrm{bucket}(j - i)\big).$$
#
# Distances are sorted into a few buckets: small distances get one bucket each, larger ones
# share buckets whose width grows logarithmically, and everything beyond `max_distance`
# lands in the last bucket. With $n$ buckets per direction (half of `num_buckets` when keys
# on both sides are allowed) and $e = n/2$ exact ones, a distance $\delta = |j - i|$ goes to
#
# $$\mathrm{bucket} = \begin{cases} \delta & \delta < e \\
# \min\!\Big(n - 1,\; e + \Big\lfloor \frac{\log(\delta / e)}{\log(\mathrm{max\_distance} / e)}\,(n - e) \Big\rfloor\Big) & \text{otherwise,} \end{cases}$$
#
# plus $n$ when the key comes after the query. A causal model (a decoder) sees no keys after
# the query, so it spends all `num_buckets` on the past ($n$ = `num_buckets`), and future
# keys, hidden by the mask anyway, share bucket 0. Written for one distance at a time, then
# compared with the vectorised package version over 601 distances:


# %%
def bucket(delta: int, num_buckets: int = 32, max_distance: int = 128) -> int:
    n = num_buckets // 2  # buckets per direction
    e = n // 2  # exact buckets
    side = n if delta > 0 else 0  # keys after the query use the upper half
    d = abs(delta)
    if d < e:
        return side + d
    return side + min(
        n - 1, e + int(math.log(d / e) / math.log(max_distance / e) * (n - e))
    )


rel = torch.arange(-300, 301)  # key position - query position
assert [bucket(int(r)) for r in rel] == positions.t5_relative_position_bucket(
    rel
).tolist()
for r in (-200, -128, -60, -20, -9, -8, -7, -1, 0, 1, 7, 8, 20, 200):
    print(f"{r:5d}", end="")
print()
for r in (-200, -128, -60, -20, -9, -8, -7, -1, 0, 1, 7, 8, 20, 200):
    print(f"{bucket(r):5d}", end="")
print("   <- bucket")

# %% [markdown]
# `tests/test_positions.py` checks these buckets against the Hugging Face T5 implementation
# in both directions. The staircase gets wider with the distance: nearby words are told
# apart exactly, far ones only roughly.

# %% tags=["hide-input"]
fig, ax = plt.subplots(figsize=(7, 3))
ax.step(
    rel,
    positions.t5_relative_position_bucket(rel),
    where="mid",
    label="bidirectional (encoder)",
)
ax.step(
    rel,
    positions.t5_relative_position_bucket(rel, bidirectional=False),
    where="mid",
    label="causal (decoder)",
)
ax.axvline(-128, color="grey", ls=":", lw=1)
ax.axvline(128, color="grey", ls=":", lw=1, label="±max_distance")
ax.set_xlabel("relative position j - i (key - query)")
ax.set_ylabel("bucket")
ax.set_title("T5 buckets: 32 buckets, max_distance = 128")
ax.legend()
plt.show()

# %% [markdown]
# `positions.T5RelativeBias` holds the table $b_h(\text{bucket})$ (`num_buckets` × heads) and
# returns the bias for a whole score matrix, shape (1, H, Tq, Tk), ready for the `bias`
# argument of `MultiHeadAttention`. Every diagonal of that matrix has one distance, hence one
# value:

# %%
t5_bias = positions.T5RelativeBias(n_heads=2, num_buckets=8, max_distance=16)
B = t5_bias(6, 6)  # (1, H, 6, 6)
print("shape:", tuple(B.shape))
print(
    "constant along every diagonal:",
    all(
        torch.diagonal(B[0], k, -2, -1).std(dim=-1).abs().max() == 0
        for k in range(-4, 5)
    ),
)

# %% [markdown]
# ## 6. ALiBi: a fixed linear penalty
#
# ALiBi {cite}`press2022alibi` learns nothing. Head $h$ subtracts a penalty proportional to
# the distance, with its own fixed slope $m_h$:
#
# $$\mathrm{score}_h(i, j) = \frac{q_i \cdot k_j}{\sqrt{d_k}} - m_h\,|i - j|.$$
#
# For $H$ heads, $H$ a power of two, the slopes form a geometric sequence starting at
# $2^{-8/H}$ with that same ratio: $m_h = 2^{-8(h+1)/H}$, $h = 0, \dots, H-1$.

# %%
H = 8
slopes8 = torch.tensor([2 ** (-8 * (h + 1) / H) for h in range(H)])
torch.testing.assert_close(slopes8, positions.alibi_slopes(8))
print("8 heads: ", [f"1/{1 / m:g}" for m in slopes8.tolist()])

# %% [markdown]
# For other head counts the paper's recipe takes the slopes of the largest power of two
# $p < H$, then fills the remaining $H - p$ heads with every other slope of the $2p$-head
# sequence: the ones (1st, 3rd, 5th, …) that the $p$-head sequence does not contain already.

# %%
for n in (6, 12):
    p = 2 ** int(math.log2(n))
    print(
        f"{n} heads = slopes for {p} heads + every other slope for {2 * p} heads (first {n - p}):"
    )
    print("   ", [round(m, 4) for m in positions.alibi_slopes(n).tolist()])
    assert (
        positions.alibi_slopes(n)[p:].tolist()
        == positions.alibi_slopes(2 * p)[0::2][: n - p].tolist()
    )

# %% [markdown]
# Steep heads penalise distance strongly, shallow heads hardly at all. The penalty each head
# of an 8-head model adds, against the distance:

# %% tags=["hide-input"]
bias = positions.alibi_bias(8, 1, 33)[0, :, 0].flip(
    -1
)  # (H, 33): query at position 32, keys 32 … 0 back
fig, ax = plt.subplots(figsize=(7, 3))
for h in range(8):
    ax.plot(bias[h], label=f"head {h}: m = 1/{2 ** (h + 1)}")
ax.set_xlabel("distance |i - j|")
ax.set_ylabel("bias added to the score")
ax.set_title("ALiBi penalties, 8 heads")
ax.legend(fontsize=7, ncol=2)
plt.show()

# %% [markdown]
# The penalty only grows with the distance, so of two keys with the same content the nearer
# one always gets more weight: ALiBi builds in a preference for recent tokens.
# `positions.alibi_bias(n_heads, n_queries, n_keys)` returns the (1, H, Tq, Tk) tensor. In a
# causal model (keys never lie in the future) it is exactly the paper's bias; for an encoder
# the book uses $|i - j|$, which treats the two sides alike, so without a causal mask ALiBi
# cannot tell left from right:

# %%
print(
    "head 0, query at position 3 of 7, bias per key:",
    positions.alibi_bias(8, 7)[0, 0, 3].tolist(),
)

# %% [markdown]
#
# ## 7. RoPE: rotate queries and keys
#
# Rotary position embedding {cite}`su2024roformer` turns the query of position $m$ by an
# angle proportional to $m$ and the key of position $n$ by one proportional to $n$. Llama and
# many other recent decoder-only models use it. In two dimensions, rotating by $\varphi$ is
# the matrix
#
# $$R(\varphi) = \begin{pmatrix} \cos\varphi & -\sin\varphi \\ \sin\varphi & \cos\varphi \end{pmatrix},
# \qquad (R(m\theta)\,q) \cdot (R(n\theta)\,k) = q^\top R(m\theta)^\top R(n\theta)\,k = q \cdot R\big((n - m)\theta\big)\,k ,$$
#
# because turning back by $m\theta$ and forward by $n\theta$ is one turn by $(n - m)\theta$.
# Three pairs of positions with the same offset give the same score:


# %%
def rotation(phi: float) -> torch.Tensor:
    return torch.tensor(
        [[math.cos(phi), -math.sin(phi)], [math.sin(phi), math.cos(phi)]]
    )


q, k, theta = torch.tensor([1.0, 2.0]), torch.tensor([0.5, -1.0]), 0.3
print(
    f"|q| = {q.norm():.4f}, |R(0.9) q| = {(rotation(0.9) @ q).norm():.4f}   (a rotation keeps lengths)"
)
for m, n in ((0, 3), (2, 5), (40, 43)):
    score = (rotation(m * theta) @ q) @ (rotation(n * theta) @ k)
    print(f"m = {m:2d}, n = {n:2d}: score {score:.5f}")
print(f"q . R(3 theta) k   = {q @ rotation(3 * theta) @ k:.5f}")

# %% [markdown]
# In $d$ dimensions the features are cut into $d/2$ pairs, and pair $i$ is rotated with its
# own frequency $\theta_i = 10000^{-2i/d}$, the $\omega_i$ of the sinusoids. The rotation of
# position $m$ is block diagonal:
#
# $$R_m = \mathrm{diag}\big(R(m\theta_0), R(m\theta_1), \dots, R(m\theta_{d/2-1})\big), \qquad
# R_m^\top R_n = R_{n-m}.$$


# %%
def rope_matrix(m: int, d: int) -> torch.Tensor:
    R = torch.zeros(d, d)
    for i in range(d // 2):
        R[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = rotation(
            m * 10000 ** (-2 * i / d)
        )  # pair (2i, 2i+1)
    return R


d = 8
torch.testing.assert_close(rope_matrix(3, d).T @ rope_matrix(10, d), rope_matrix(7, d))
torch.testing.assert_close(rope_matrix(3, d).T @ rope_matrix(3, d), torch.eye(d))
print("R_3^T R_10 == R_7 and R_m^T R_m == I for d =", d)

# %% [markdown]
# Nobody multiplies by a $d \times d$ matrix that is almost all zeros. With the pair
# $(x_a, x_b)$, the rotation is $x_a \cos - x_b \sin$, $x_a \sin + x_b \cos$: two
# element-wise products. Which features form a pair is a convention:
#
# - the RoFormer paper pairs neighbours, $(x_{2i}, x_{2i+1})$, as in `rope_matrix` above;
# - Hugging Face's Llama, and **this book's package**, pair $x_i$ with $x_{i + d/2}$
#   ("half-split"): `rotate_half(x)` $= (-x_{d/2:}, x_{:d/2})$ and
#   $\mathrm{RoPE}(x) = x \cos + \mathrm{rotate\_half}(x) \sin$.
#
# The two differ only by the order of the features. Reorder a vector so that the even
# features come first and the odd ones after, and the paper's rotation becomes the
# package's:

# %%
x = torch.randn(d)
perm = torch.cat(
    (torch.arange(0, d, 2), torch.arange(1, d, 2))
)  # [0, 2, 4, 6, 1, 3, 5, 7]
cos, sin = positions.rope_angles(torch.arange(10), d)  # (10, d) each, half-split layout
for m in (1, 4, 9):
    paper = rope_matrix(m, d) @ x  # interleaved pairs
    package = positions.apply_rope(x[perm], cos[m], sin[m])  # half-split pairs
    torch.testing.assert_close(paper[perm], package)
print("paper's rotation, reordered == positions.apply_rope on the reordered vector")

# %% [markdown]
# In a model the order of the features is whatever the learned projections $W_Q, W_K$ make
# it, so the two conventions are equally good; they matter only when loading weights trained
# with one of them. `tests/test_positions.py` checks the package against Llama's
# `apply_rotary_pos_emb` at 1e-5.
#
# `positions.RotaryEmbedding(head_dim)` is a callable `(q, k) -> (q, k)` on (B, H, T, Dh)
# tensors; `MultiHeadAttention(d_model, n_heads, rope=...)` applies it after the projections,
# so the values are left alone. The relative property, now with the package: the same query
# and key vectors placed at positions shifted by 0, 7 and 100 give the same scores.

# %%
rope = positions.RotaryEmbedding(head_dim=16)
gen = torch.Generator().manual_seed(1)
q, k = (
    torch.randn(1, 1, 1, 16, generator=gen),
    torch.randn(1, 1, 1, 16, generator=gen),
)  # (B, H, 1, Dh)
reference = None
for shift in (0, 7, 100):
    qs, ks = (
        q.expand(1, 1, shift + 4, 16),
        k.expand(1, 1, shift + 4, 16),
    )  # the same vectors at every position
    qr, kr = rope(qs, ks)  # rotated by their positions 0 … shift+3
    scores = (
        qr[0, 0, shift + 3] @ kr[0, 0, shift:].T
    )  # query at shift+3, keys at shift … shift+3
    reference = scores if shift == 0 else reference
    print(
        f"shift {shift:3d}: scores for offsets -3 … 0 = {[round(s, 3) for s in scores.tolist()]}"
        f"  same as shift 0: {torch.allclose(scores, reference, atol=1e-4)}"
    )

# %% [markdown]
# ### The long-term decay
#
# RoFormer shows that the score an attention head can reach shrinks, on average, as the
# distance grows. Read each pair $(x_{2i}, x_{2i+1})$ as the complex number
# $x_{2i} + \mathrm{i}\,x_{2i+1}$; the score is then the real part of
# $\sum_i h_i\, e^{\mathrm{i}(m-n)\theta_i}$, with $h_i$ the product of the $i$-th pair of
# $q$ and the conjugate of the $i$-th pair of $k$. Summation by parts bounds it by
#
# $$\Big|\sum_{i=0}^{d/2-1} h_i\, e^{\mathrm{i}(m-n)\theta_i}\Big| \le \Big(\max_i |h_{i+1} - h_i|\Big)
# \sum_{j=1}^{d/2} |S_j|, \qquad S_j = \sum_{i=0}^{j-1} e^{\mathrm{i}(m-n)\theta_i}.$$
#
# (with $h_{d/2} := 0$, as in the paper). The first factor depends on the vectors, the second only on the distance. The paper plots
# the mean $\frac{1}{d/2}\sum_j |S_j|$ against the distance; here it is for $d = 128$:

# %%
d = 128
theta = 10000.0 ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)  # (d/2,)
dist = torch.arange(0, 257, dtype=torch.float64)  # m - n
S = torch.exp(1j * dist[:, None] * theta).cumsum(dim=1)  # (257, d/2): S_1 … S_{d/2}
relative_bound = S.abs().mean(dim=1)  # (257,)
print("distance:      ", [0, 10, 50, 100, 250])
print(
    "relative bound:",
    [round(relative_bound[i].item(), 2) for i in (0, 10, 50, 100, 250)],
)

# %% tags=["hide-input"]
fig, ax = plt.subplots(figsize=(7, 3))
ax.plot(dist, relative_bound)
ax.set_xlabel("relative distance m - n")
ax.set_ylabel(r"$\frac{1}{d/2}\sum_j |S_j|$")
ax.set_title("RoPE long-term decay (d = 128, base 10000)")
plt.show()

# %% [markdown]
# The bound falls steeply over the first few dozen positions and keeps decreasing, with
# ripples, after that: a built-in, soft preference for nearby tokens, without any penalty
# being added to the scores.
#
# ## 8. Experiment: train at one length, test at twice it
#
# Every scheme now goes into the same model: token embedding, one scheme, a stack of
# encoder blocks from chapter 3 with a causal mask (each token sees itself and the past, as
# in the language models ALiBi and RoPE were designed for), and a linear layer that guesses a
# token at every position. Two tasks on the same kind of random sequence of 16 token types,
# where types 0–3 are *markers* (each position is a marker with probability 0.2):
#
# - **copy**: at every position, output the token 3 places back (an exact offset);
# - **last marker**: at every position, output the most recent marker so far (recency).
#
# Both need position: without it, attention sees a bag of earlier tokens. Training uses
# sequences of 32 tokens; the test uses fresh sequences of 32 and of 64.

# %%
vocab_size, n_markers, offset, train_len, IGNORE = 16, 4, 3, 32, -100


def make_batch(
    n: int, T: int, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    ids = torch.randint(n_markers, vocab_size, (n, T), generator=gen)  # ordinary tokens
    is_marker = torch.rand(n, T, generator=gen) < 0.2
    ids = torch.where(
        is_marker, torch.randint(0, n_markers, (n, T), generator=gen), ids
    )  # (n, T)
    copy = torch.full_like(ids, IGNORE)
    copy[:, offset:] = ids[:, :-offset]  # the token `offset` places back
    last = (
        torch.where(is_marker, torch.arange(T), -1).cummax(dim=1).values
    )  # (n, T): index of the latest marker
    marker = torch.where(last >= 0, ids.gather(1, last.clamp(min=0)), IGNORE)
    return ids, copy, marker


ids, copy, marker = make_batch(1, 14, torch.Generator().manual_seed(8))
print(
    "tokens     ",
    ids[0].tolist(),
    "\ncopy       ",
    copy[0].tolist(),
    "\nlast marker",
    marker[0].tolist(),
)

# %% [markdown]
# (−100 marks positions with no answer yet; the loss and the accuracy skip them.)
# The model takes the scheme's name. The T5 bias gets 16 buckets with `max_distance` equal
# to the training length, so that every distance longer than the training sequences falls
# into the last bucket, which training has reached; with the defaults (32, 128), most of the
# distances 32–63 (from 35 on) would land in buckets that training never updated. The learned table has
# `max_len = 32`, the training length.

# %%
print(
    "causal buckets (16, max_distance=32) for distances 28 … 63:",
    positions.t5_relative_position_bucket(
        -torch.arange(28, 64),
        bidirectional=False,
        num_buckets=16,
        max_distance=train_len,
    )
    .unique()
    .tolist(),
)
SCHEMES = ["none", "learned", "sinusoidal", "T5 bias", "ALiBi", "RoPE"]


class Tagger(nn.Module):
    """Embedding + position scheme + causal encoder + a token guess per position. (B, T) -> (B, T, vocab)."""

    def __init__(self, scheme: str) -> None:
        super().__init__()
        self.scheme = scheme
        self.embed = nn.Embedding(vocab_size, d_model)
        self.learned = (
            positions.LearnedPositionalEmbedding(train_len, d_model)
            if scheme == "learned"
            else None
        )
        self.t5 = (
            positions.T5RelativeBias(
                n_heads, num_buckets=16, max_distance=train_len, bidirectional=False
            )
            if scheme == "T5 bias"
            else None
        )
        rope = (
            positions.RotaryEmbedding(d_model // n_heads) if scheme == "RoPE" else None
        )
        self.encoder = blocks.Encoder(
            n_layers, d_model, n_heads, 2 * d_model, rope=rope
        )
        self.head = nn.Linear(d_model, vocab_size)

    def prepare(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Token vectors (B, T, d_model), absolute positions added; the (1, H, T, T) score bias or None."""
        T = ids.shape[1]
        x = self.embed(ids)  # (B, T, d_model)
        if self.scheme == "learned":
            x = self.learned(x)
        elif self.scheme == "sinusoidal":
            x = x + positions.sinusoidal_encoding(T, d_model).to(x.device)
        bias = None
        if self.scheme == "T5 bias":
            bias = self.t5(T)
        elif self.scheme == "ALiBi":
            bias = positions.alibi_bias(n_heads, T, device=ids.device)
        return x, bias

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x, bias = self.prepare(ids)  # RoPE, if any, acts inside the attention layers
        mask = masks.causal_mask(ids.shape[1], device=ids.device)
        return self.head(self.encoder(x, mask=mask, bias=bias))  # (B, T, vocab)


# %% [markdown]
# Every model sees the same batches and starts from the same seed. Accuracy counts the
# positions that have an answer.

# %%
gen = torch.Generator().manual_seed(0)
train_batches = [
    tuple(t.to(run.device) for t in make_batch(batch_size, train_len, gen))
    for _ in range(n_steps)
]
test_sets = {
    L: tuple(
        t.to(run.device) for t in make_batch(256, L, torch.Generator().manual_seed(L))
    )
    for L in (train_len, 2 * train_len)
}


@torch.no_grad()
def accuracy(model: nn.Module, ids: torch.Tensor, target: torch.Tensor) -> float:
    keep = target != IGNORE
    return (model(ids).argmax(dim=-1)[keep] == target[keep]).float().mean().item()


models = {}


def train_and_test(scheme: str, task: int) -> dict:
    torch.manual_seed(run.seed)
    model = models[scheme, task] = Tagger(scheme).to(run.device)
    loss_fn = lambda m, b: F.cross_entropy(
        m(b[0]).flatten(0, 1), b[task].flatten(), ignore_index=IGNORE
    )
    training.train(model, train_batches, loss_fn, n_steps, lr=lr)
    result = {}
    for L, batch in test_sets.items():
        try:
            result[L] = accuracy(model, batch[0], batch[task])
        except (
            ValueError
        ) as err:  # the learned table has no row for positions >= train_len
            result[L] = None
            if task == 1:
                print(f"{scheme} at length {L}: ValueError: {err}")
    return result


results = {
    (s, task): train_and_test(s, i)
    for task, i in (("copy", 1), ("last marker", 2))
    for s in SCHEMES
}

# %%
fmt = lambda a: "  n/a " if a is None else f"{a:6.3f}"
L1, L2 = train_len, 2 * train_len
print(f"{'scheme':11s} | copy @{L1} | copy @{L2} | marker @{L1} | marker @{L2}")
for s in SCHEMES:
    c, m = results[s, "copy"], results[s, "last marker"]
    print(
        f"{s:11s} |  {fmt(c[L1])}  |  {fmt(c[L2])}  |   {fmt(m[L1])}   |   {fmt(m[L2])}"
    )

# %% tags=["hide-input"]
fig, axes = plt.subplots(1, 2, figsize=(10, 3.4), sharey=True)
for ax, task in zip(axes, ("copy", "last marker")):
    for j, L in enumerate((L1, L2)):
        acc = [results[s, task][L] for s in SCHEMES]
        xs = torch.arange(len(SCHEMES)) + (j - 0.5) * 0.38
        ax.bar(xs, [a or 0.0 for a in acc], width=0.38, label=f"test length {L}")
        for xpos, a in zip(xs.tolist(), acc):
            if a is None:
                ax.text(xpos, 0.02, "n/a", ha="center", fontsize=8, rotation=90)
    ax.set_xticks(range(len(SCHEMES)), SCHEMES, rotation=30)
    ax.set_title(f"task: {task} (trained at length {L1})")
    ax.set_xlabel("position scheme")
axes[0].set_ylabel("accuracy")
axes[0].set_ylim(0, 1.2)
axes[0].legend(loc="upper center", ncol=2, fontsize=8)
fig.tight_layout()
plt.show()

# %% [markdown]
# What the table shows, in numbers computed from it:

# %%
for task in ("copy", "last marker"):
    learnt = [s for s in SCHEMES if results[s, task][L1] >= 0.8]
    kept = [
        s for s in learnt if (results[s, task][L2] or 0.0) >= 0.9 * results[s, task][L1]
    ]  # n/a counts as 0
    print(f"{task:11s}: accuracy >= 0.8 at length {L1}: {learnt}")
    print(f"{'':11s}  of these, keep >= 90% of it at length {L2}: {kept}")

# %% [markdown]
# Reading the results:
#
# - **No positions** fails the copy task: among its earlier tokens it cannot find the one
#   three places back. On *last marker* it beats guessing among the 4 marker types, since
#   it can at least attend to the markers, but it has no direct way to tell which came last.
# - **Learned** embeddings learn both tasks but have no vector for position 32 onwards; the
#   2× test cannot even run (the error above), hence n/a.
# - **Sinusoidal** encodings are defined at every position, but the model has only ever
#   seen positions 0–31: accuracy drops at length 64.
# - **T5's bias** learns a score per distance, and long distances fall into a bucket that
#   training reached: it keeps most of its accuracy on both tasks.
# - **ALiBi** can only prefer nearer tokens. That is exactly what *last marker* needs, and it
#   works at both lengths; it cannot single out "3 back", so the copy task fails.
# - **RoPE** learns both tasks, but at length 64 it loses part of its accuracy, although the
#   offset the copy task needs, 3, is the same as in training. What is new are the keys
#   32–63 places back: rotation angles the model never saw. Failing to carry over to longer
#   inputs, as sinusoidal and rotary encodings do here, is what ALiBi was proposed to fix
#   {cite}`press2022alibi`.
#
# Where does the attention go? For the copy models, the share of the first layer's
# attention that queries at positions 32–63 put on keys at least 32 places back, distances
# no training sequence contained:


# %%
@torch.no_grad()
def far_attention(model: Tagger, ids: torch.Tensor) -> float:
    x, bias = model.prepare(ids)
    T = ids.shape[1]
    mask = masks.causal_mask(T, device=ids.device)
    _, w = model.encoder.layers[0].attn(
        x, mask=mask, bias=bias, need_weights=True
    )  # (B, H, T, T)
    far = (
        positions.relative_positions(T, device=ids.device) <= -train_len
    )  # (T, T): key >= train_len back
    return (
        (w * far).sum(dim=-1)[..., train_len:].mean().item()
    )  # queries at positions >= train_len


for s in ("sinusoidal", "T5 bias", "ALiBi", "RoPE"):
    print(
        f"{s:11s}: {far_attention(models[s, 1], test_sets[L2][0]):.3f} of the attention on keys >= {L1} back"
    )

# %% [markdown]
# The RoPE model sends most of its attention to distances it has never seen, where the
# rotations give scores that training had no chance to keep low. The T5 model also sends a
# part there, but all those keys fall into one bucket and get one shared bias, so none of
# them is singled out, and its copy accuracy holds.
#
# No scheme wins everywhere. Relative schemes carry over to longer inputs as far as the
# distances they meet were seen in training (T5's capped buckets) or are handled by a fixed
# rule (ALiBi's penalty).
#
# ## Exercises
#
# ### Exercise 1: sinusoids without loops
#
# Write `sinusoidal(n_positions, d_model)` without Python loops: build the angles
# $p\,\omega_i$ as an (n_positions, d_model/2) table by broadcasting, then place the sines in
# the even columns and the cosines in the odd ones.


# %%
def sinusoidal(n_positions, d_model):
    # YOUR CODE HERE
    raise NotImplementedError


# %% tags=["solution", "hide-cell"]
def sinusoidal(n_positions, d_model):
    omega = 10000.0 ** (-torch.arange(0, d_model, 2) / d_model)  # (d/2,)
    angles = torch.arange(n_positions)[:, None] * omega  # (P, d/2)
    return torch.stack((angles.sin(), angles.cos()), dim=-1).reshape(
        n_positions, d_model
    )  # (P, d/2, 2) -> (P, d)


# %%
checks.check_sinusoidal_encoding(sinusoidal)

# %% [markdown]
# ### Exercise 2: ALiBi slopes for any number of heads
#
# Write `slopes(n_heads)` returning a tensor of the ALiBi slopes for any `n_heads >= 1`:
# the geometric sequence $2^{-8(h+1)/n}$ when $n$ is a power of two, and the paper's recipe
# (section 6) otherwise. A recursive function is the shortest way.


# %%
def slopes(n_heads):
    # YOUR CODE HERE
    raise NotImplementedError


# %% tags=["solution", "hide-cell"]
def slopes(n_heads):
    p = 2 ** int(math.log2(n_heads))  # largest power of two <= n_heads
    base = [2 ** (-8 * (h + 1) / p) for h in range(p)]
    if p == n_heads:
        return torch.tensor(base)
    return torch.cat((torch.tensor(base), slopes(2 * p)[0::2][: n_heads - p]))


# %%
checks.check_alibi_slopes(slopes)

# %% [markdown]
# ### Exercise 3: RoPE in the half-split layout
#
# Write `rope_rotate(x, pos)` for x of shape (B, H, T, Dh) and integer positions of
# shape (T,): pair $i$ is $(x_i, x_{i + D_h/2})$, turned counter-clockwise by the angle
# $p\,\theta_i$, $\theta_i = 10000^{-2i/D_h}$. Use only `torch` (not the package).


# %%
def rope_rotate(x, pos):
    # YOUR CODE HERE
    raise NotImplementedError


# %% tags=["solution", "hide-cell"]
def rope_rotate(x, pos):
    Dh = x.shape[-1]
    theta = 10000.0 ** (-torch.arange(0, Dh, 2) / Dh)  # (Dh/2,)
    angle = pos[:, None].float() * theta  # (T, Dh/2)
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = (
        x[..., : Dh // 2],
        x[..., Dh // 2 :],
    )  # (B, H, T, Dh/2) each: pair i = (x1[i], x2[i])
    return torch.cat(
        (x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1
    )  # (B, H, T, Dh)


# %%
checks.check_rope_rotation(rope_rotate)

# %% [markdown]
# ## What we added to the package
#
# `transformer_book.positions`:
#
# - `LearnedPositionalEmbedding(max_len, d_model)`: a trained vector per position, with a
#   clear `ValueError` past `max_len`;
# - `sinusoidal_encoding(n_positions, d_model)`: the fixed sines and cosines (interleaved);
# - `relative_positions`, `t5_relative_position_bucket` (equal to Hugging Face T5's) and
#   `T5RelativeBias(n_heads, num_buckets, max_distance, bidirectional)`, returning a
#   (1, H, Tq, Tk) score bias;
# - `alibi_slopes(n_heads)` for any head count and `alibi_bias(n_heads, n_queries, n_keys)`;
# - `rope_angles`, `rotate_half`, `apply_rope` and `RotaryEmbedding(head_dim, base)`, in
#   the half-split layout of Hugging Face Llama, ready for `MultiHeadAttention(rope=...)`.
#
# `transformer_book.checks`: `check_sinusoidal_encoding`, `check_alibi_slopes`,
# `check_rope_rotation`.
