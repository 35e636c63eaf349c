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
# - measure why residual connections let gradients reach the first layer of a deep stack;
# - write LayerNorm from scratch and say how it differs from BatchNorm;
# - assemble the post-norm block ("Add & Norm") and check it against
#   `torch.nn.TransformerEncoderLayer` with copied weights;
# - stack blocks into an encoder;
# - count a transformer's parameters in closed form, and show that the count does not
#   depend on how long the input is.

# %% tags=["remove-cell"]
# Colab only: install this book's package (does nothing anywhere else).
import sys

if "google.colab" in sys.modules:
    import subprocess

    repo = "https://github.com/transformers-step-by-step/transformers-step-by-step"
    pip = [sys.executable, "-m", "pip", "install", "-q"]
    subprocess.run([*pip, f"transformer-book @ git+{repo}"], check=True)

# %%
import time

import matplotlib.pyplot as plt
import torch
from torch import nn

from transformer_book import attention, blocks, checks, masks, norms, params, runtime


def show(t: torch.Tensor, digits: int = 3):
    """A tensor as a rounded NumPy array for printing (without the sign of -0.0)."""
    return t.detach().cpu().numpy().round(digits) + 0.0


# %% tags=["parameters"]
device = "auto"  # "auto": cuda when available, else cpu
profile = "auto"  # "auto": full on a GPU, quick on a CPU

# %%
run = runtime.setup(device, profile, seed=0)
print(run)
d_model, n_heads, d_ff = (
    16,
    4,
    64,
)  # small sizes for the block: the checks below take milliseconds
depths = [1, 2, 4, 8, 16, 32, 64]  # stack depths in the residual experiment
depth_width = run.pick(
    quick=64, full=256
)  # d_model of the deep stacks in the residual experiment
n_seeds = run.pick(
    quick=1, full=5
)  # the full profile averages the experiment over several initialisations

# %% [markdown]
# ## The block at a glance
#
# For an input $X$ of shape (B, T, d_model), the encoder block of the original paper computes
#
# $$
# H = \mathrm{LayerNorm}\big(X + \mathrm{MultiHead}(X)\big), \qquad
# Y = \mathrm{LayerNorm}\big(H + \mathrm{FFN}(H)\big).
# $$
#
# Each line is a sublayer ("MultiHead", then "FFN") followed by what the paper's figure
# calls **Add & Norm**: add the sublayer's input back to its output, then normalise.
# The output has the same shape as the input. Here is the package's block, which this
# chapter takes apart piece by piece:

# %%
block = blocks.EncoderBlock(d_model, n_heads, d_ff)
x = torch.randn(2, 5, d_model)  # (B, T, d_model): 2 sentences of 5 tokens
print("in: ", tuple(x.shape))
print("out:", tuple(block(x).shape))
print(block)

# %% [markdown]
# ## 1. Residual connections
#
# A residual (or skip) connection {cite}`he2016deep` adds a sublayer's input to its output:
#
# $$
# y = x + F(x).
# $$
#
# The sublayer $F$ only has to learn a *change* to $x$; doing nothing is as easy as
# setting $F$ to zero. The real reason it matters shows in backpropagation. The Jacobian
# of $y$ with respect to $x$ is
#
# $$
# \frac{\partial y}{\partial x} = I + \frac{\partial F}{\partial x},
# $$
#
# so however small $\partial F / \partial x$ is, the identity passes the gradient
# through unchanged. Let us confirm the formula on a small sublayer (a two-layer MLP,
# the feed-forward network of section 3):

# %%
sublayer = blocks.FeedForward(4, 8)
x1 = torch.randn(4)  # one token with 4 features
J_F = torch.autograd.functional.jacobian(sublayer, x1)  # (4, 4): ∂F/∂x
J_res = torch.autograd.functional.jacobian(
    lambda v: v + sublayer(v), x1
)  # (4, 4): ∂(x + F(x))/∂x
torch.testing.assert_close(J_res, torch.eye(4) + J_F)
print("∂(x + F(x))/∂x equals I + ∂F/∂x:", torch.allclose(J_res, torch.eye(4) + J_F))

# %% [markdown]
# Through $L$ stacked sublayers the chain rule multiplies $L$ such Jacobians. Without
# residuals the product $\prod_l \partial F_l / \partial x$ tends to shrink (or grow)
# geometrically with $L$; with them, every factor $I + \partial F_l/\partial x$ keeps an
# identity path open.
#
# **Experiment.** Stack $L$ feed-forward sublayers (PyTorch's default initialisation)
# in three ways: plain, $x \leftarrow F(x)$; residual,
# $x \leftarrow x + F(x)$; and residual followed by LayerNorm,
# $x \leftarrow \mathrm{LayerNorm}(x + F(x))$, the Add & Norm of the block. Send the
# same random gradient $g$ down from the top, i.e. backpropagate the loss
# $\ell = \sum g \odot y$ with $y$ the stack's output, and measure the norm of the
# gradient that reaches the first layer's weight matrix,
# $\lVert \partial \ell / \partial W_1^{(1)} \rVert$. We compute in float64 so that tiny
# gradients do not underflow to zero.


# %%
def first_layer_gradient(
    depth: int, mode: str, d: int, seed: int
) -> tuple[float, float]:
    """Stack `depth` feed-forward sublayers; return (‖∂ℓ/∂W of layer 1‖, std of the stack's output)."""
    torch.manual_seed(seed)
    layers = nn.ModuleList(blocks.FeedForward(d, 4 * d) for _ in range(depth)).to(
        run.device, torch.float64
    )
    norm = norms.LayerNorm(d).to(
        run.device, torch.float64
    )  # γ = 1, β = 0: no effect beyond standardising
    x = torch.randn(
        4, 8, d, dtype=torch.float64, device=run.device
    )  # (B, T, d): 4 sequences of 8 tokens
    for F_l in layers:
        if mode == "plain":
            x = F_l(x)
        elif mode == "residual":
            x = x + F_l(x)
        else:  # "residual + LayerNorm"
            x = norm(x + F_l(x))
    g = torch.randn_like(x)  # the gradient arriving from above, ∂ℓ/∂y
    (x * g).sum().backward()
    return layers[0].up_proj.weight.grad.norm().item(), x.std().item()


modes = ["plain", "residual", "residual + LayerNorm"]
results = {
    m: torch.tensor(
        [
            [first_layer_gradient(L, m, depth_width, s) for s in range(n_seeds)]
            for L in depths
        ]
    )
    for m in modes
}  # each (len(depths), n_seeds, 2)
grad_norm = {
    m: r[..., 0].log().mean(dim=1).exp() for m, r in results.items()
}  # geometric mean over seeds
out_std = {m: r[..., 1].mean(dim=1) for m, r in results.items()}
print(f"gradient norm at layer 1; width d = {depth_width}, {n_seeds} initialisation(s)")
print(f"{'depth':>5} " + " ".join(f"{m:>22}" for m in modes))
for i, L in enumerate(depths):
    print(f"{L:>5} " + " ".join(f"{grad_norm[m][i].item():>22.3g}" for m in modes))
print("standard deviation of the stack's output")
for i, L in enumerate(depths):
    print(f"{L:>5} " + " ".join(f"{out_std[m][i].item():>22.3f}" for m in modes))

# %% tags=["hide-input"]
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
for m, style in zip(modes, ["o-", "s-", "^-"]):
    ax1.semilogy(depths, grad_norm[m], style, label=m)
    ax2.plot(depths, out_std[m], style, label=m)
ax1.set(
    xlabel="depth L (number of stacked sublayers)",
    ylabel="‖∂ℓ/∂W‖ of the first layer (log scale)",
    title="Gradient reaching the first layer",
)
ax2.set(
    xlabel="depth L (number of stacked sublayers)",
    ylabel="standard deviation of the output",
    title="Size of the signal at the top",
)
ax1.legend()
ax2.legend()
fig.tight_layout()
plt.show()

# %% [markdown]
# Left: without residuals the gradient at the first layer collapses by many orders of
# magnitude as the stack gets deeper, so the first layers would barely learn. With
# residuals it stays within one order of magnitude of its value at depth 1 (it creeps
# up, as the signal does on the right); with Add & Norm it barely changes.
#
# Right: the residual stream has a cost. Every sublayer adds its output to the sum, so
# the values grow with depth. Normalising after each addition keeps them at a standard
# deviation of one without closing the gradient path. That normalisation is the next
# section.

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


# %%
def layer_norm(
    x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, eps: float = 1e-5
) -> torch.Tensor:
    """Normalise over the last axis (the features of each token). Shapes: x (..., d), gamma, beta (d,)."""
    mu = x.mean(dim=-1, keepdim=True)  # (..., 1): one mean per token
    var = ((x - mu) ** 2).mean(
        dim=-1, keepdim=True
    )  # (..., 1): biased variance, divides by d
    return gamma * (x - mu) / torch.sqrt(var + eps) + beta  # (..., d)


scales = torch.tensor([0.1, 1.0, 100.0])
tokens = (
    torch.randn(3, 8) * scales[:, None] + 5
)  # 3 tokens of 8 features, on very different scales
y = layer_norm(tokens, torch.ones(8), torch.zeros(8))  # γ = 1, β = 0
for i, scale in enumerate(scales.tolist()):
    print(
        f"token at scale {scale:>5g}: mean {tokens[i].mean():7.2f} -> {show(y[i].mean(), 2):5.2f}, "
        f"std {tokens[i].std(unbiased=False):8.4f} -> {y[i].std(unbiased=False):.4f}"
    )

# %% [markdown]
# Every token now has mean 0 and standard deviation 1, whatever its scale before (the
# token at scale 0.1 stays a little below 1: its variance, about 0.004, is only a few
# hundred times $\epsilon$, so adding $\epsilon$ under the root shrinks its standard deviation
# by about 0.1 %). The package's `norms.LayerNorm` is the same
# computation as a module, with $\gamma$ and $\beta$ as parameters; it should agree with
# our function, and with PyTorch's own, for any $\gamma$ and $\beta$:

# %%
ln = norms.LayerNorm(d_model)
with torch.no_grad():
    ln.weight.normal_(1.0, 0.5)  # a non-trivial γ ...
    ln.bias.normal_(0.0, 0.5)  # ... and β, as after some training
x = torch.randn(2, 5, d_model) * 3 + 1  # (B, T, d_model)
torch.testing.assert_close(layer_norm(x, ln.weight, ln.bias), ln(x))
torch.testing.assert_close(
    ln(x), nn.functional.layer_norm(x, (d_model,), ln.weight, ln.bias)
)
print("ours == norms.LayerNorm == torch's layer_norm")
print(
    {name: tuple(p.shape) for name, p in ln.named_parameters()},
    "->",
    params.count_params(ln),
    "= 2 · d_model",
)

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

# %%
x = torch.randn(2, 3, 4) * torch.tensor([1.0, 5.0, 0.2, 2.0]) + torch.tensor(
    [0.0, 3.0, -1.0, 10.0]
)  # (B, T, D)
ln_out = norms.LayerNorm(4)(x)
bn = nn.BatchNorm1d(4)  # wants the features on axis 1: (B, D, T)
bn_out = bn(x.transpose(1, 2)).transpose(1, 2)  # (B, T, D) -> (B, D, T) -> (B, T, D)
print(
    "LayerNorm: mean of each token   ", show(ln_out.mean(dim=-1).flatten())
)  # B·T = 6 values
print("           mean of each feature ", show(ln_out.mean(dim=(0, 1))))  # D = 4 values
print("BatchNorm: mean of each token   ", show(bn_out.mean(dim=-1).flatten()))
print("           mean of each feature ", show(bn_out.mean(dim=(0, 1))))

# %% [markdown]
# LayerNorm centres every token; BatchNorm centres every feature. That difference has
# consequences for text. With BatchNorm a token's output depends on the *other*
# sentences in the batch (and on their padding), and evaluation must switch to running
# averages collected during training. LayerNorm has neither problem. Change sentence 1
# and watch sentence 0:

# %%
x_other = x.clone()
x_other[1] = 10 * torch.randn(3, 4)  # replace the other sentence in the batch
ln_change = (norms.LayerNorm(4)(x_other)[0] - ln_out[0]).abs().max().item()
bn_change = (
    (bn(x_other.transpose(1, 2)).transpose(1, 2)[0] - bn_out[0]).abs().max().item()
)
print(
    f"change in sentence 0's output: LayerNorm {ln_change:.3g}, BatchNorm {bn_change:.3g}"
)
bn.eval()  # evaluation mode: BatchNorm switches to its running averages
bn_eval_change = (bn(x.transpose(1, 2)).transpose(1, 2) - bn_out).abs().max().item()
print(
    f"same input, train vs eval mode: BatchNorm output changes by {bn_eval_change:.3g}"
)

# %% [markdown]
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
    """max(0, x W1 + b1) W2 + b2. Shapes: x (..., d_model), W1 (d_model, d_ff), W2 (d_ff, d_model)."""
    hidden = torch.relu(x @ W1 + b1)  # (..., d_ff)
    return hidden @ W2 + b2  # (..., d_model)


ff = blocks.FeedForward(d_model, d_ff)
x = torch.randn(2, 5, d_model)  # (B, T, d_model)
ff_out = feed_forward(
    x, ff.up_proj.weight.T, ff.up_proj.bias, ff.down_proj.weight.T, ff.down_proj.bias
)
torch.testing.assert_close(ff_out, ff(x))
print(
    f"{tuple(x.shape)} -> hidden {tuple(ff.up_proj(x).shape)} -> {tuple(ff_out.shape)}; equals blocks.FeedForward"
)

# %% [markdown]
# "Position-wise" is easy to check: the output for token 2 does not change when we feed
# token 2 alone, and shuffling the tokens only shuffles the outputs (equal up to float
# rounding, which depends on how the matrix product is split up).

# %%
alone = ff(x[:, 2:3])  # (B, 1, d_model): token 2 without its neighbours
print(
    "token 2 alone == token 2 in the sentence:",
    torch.allclose(alone[:, 0], ff(x)[:, 2], atol=1e-6),
)
perm = torch.randperm(5)  # a shuffled token order
print(
    "FFN(shuffled tokens) == shuffled FFN(tokens):",
    torch.allclose(ff(x[:, perm]), ff(x)[:, perm], atol=1e-6),
)

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
    """Add & Norm around attention, then around the feed-forward network. Shapes: (B, T, D) -> (B, T, D)."""
    a = block.attn(x, mask=mask)[0]  # (B, T, D): multi-head self-attention
    h = layer_norm(x + a, block.norm1.weight, block.norm1.bias)  # Add & Norm 1
    f = feed_forward(
        h,
        block.ff.up_proj.weight.T,
        block.ff.up_proj.bias,
        block.ff.down_proj.weight.T,
        block.ff.down_proj.bias,
    )  # (B, T, D)
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
got, ref = (
    ours(x, mask=keep),
    torch_layer(x, src_key_padding_mask=~keep[:, 0, 0]),
)  # (B, T): True = ignore
for b, n in enumerate(lengths.tolist()):  # compare the real tokens
    torch.testing.assert_close(got[b, :n], ref[b, :n], atol=1e-5, rtol=1e-5)
print(
    "EncoderBlock == nn.TransformerEncoderLayer (atol 1e-5), without and with a padding mask"
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
# The other arrangement, **pre-norm**, normalises the input of each sublayer instead,
# $x + F(\mathrm{LayerNorm}(x))$; the package builds it with `norm_first=True`, and
# a later chapter compares the two. Exercise 2 below asks you to write it.

# %% [markdown]
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
torch_encoder = nn.TransformerEncoder(
    nn.TransformerEncoderLayer(d_model, n_heads, d_ff, dropout=0.0, batch_first=True),
    num_layers=n_layers,
    enable_nested_tensor=False,
)
# torch's constructor deep-copies one layer n_layers times; give every layer its own random weights
torch_encoder.layers = nn.ModuleList(
    nn.TransformerEncoderLayer(d_model, n_heads, d_ff, dropout=0.0, batch_first=True)
    for _ in range(n_layers)
)
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
    (
        "multi-head attention",
        params.mha_params(d_model),
        attention.MultiHeadAttention(d_model, n_heads),
    ),
    (
        "feed-forward",
        params.feed_forward_params(d_model, d_ff),
        blocks.FeedForward(d_model, d_ff),
    ),
    ("LayerNorm", params.layer_norm_params(d_model), norms.LayerNorm(d_model)),
    (
        "encoder block",
        params.encoder_block_params(d_model, d_ff),
        blocks.EncoderBlock(d_model, n_heads, d_ff),
    ),
    (
        "nn.TransformerEncoderLayer",
        params.encoder_block_params(d_model, d_ff),
        torch_layer,
    ),
]
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
class TokenEncoder(nn.Module):
    """Token embeddings followed by an encoder stack. Shapes: ids (B, T) -> (B, T, d_model)."""

    def __init__(
        self, vocab_size: int, n_layers: int, d_model: int, n_heads: int, d_ff: int
    ):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.encoder = blocks.Encoder(n_layers, d_model, n_heads, d_ff)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.encoder(self.embed(ids))  # (B, T) -> (B, T, d_model)


vocab_size = 1000
model = (
    TokenEncoder(vocab_size, n_layers=2, d_model=32, n_heads=2, d_ff=64)
    .to(run.device)
    .eval()
)
print(sorted({tuple(p.shape) for p in model.parameters()}), "<- every parameter shape")
print(
    "closed form:",
    params.encoder_params(2, 32, 64, vocab_size),
    " module:",
    params.count_params(model),
)

# %%
seconds = {}
with (
    torch.no_grad()
):  # warm-up, so that one-time start-up costs do not count against T = 10
    model(torch.zeros(1, 10, dtype=torch.long, device=run.device))
for T in (10, 10_000):
    ids = torch.randint(
        0, vocab_size, (1, T), device=run.device
    )  # (1, T): one sequence of T tokens
    start = time.perf_counter()
    with torch.no_grad():
        out = model(ids)  # (1, T, d_model)
    finite = bool(
        out.isfinite().all()
    )  # (reading the result also waits for a GPU to finish)
    seconds[T] = time.perf_counter() - start
    print(
        f"T = {T:>6,}: output {tuple(out.shape)}, finite: {finite}, "
        f"parameters: {params.count_params(model):,}, attention weights per head: {T * T:,}"
    )

# %% [markdown]
# The parameter count is the same for both lengths; what grows with $T$ is the work.
# Each head computes $T^2$ attention weights, a million times more for the long input
# (a later chapter deals with that cost). The time the two calls above took on this machine
# (for 10 tokens it is mostly the fixed cost of calling a few dozen operations):

# %% tags=["nbval-ignore-output"]
for T, sec in seconds.items():
    print(f"T = {T:>6,}: {1000 * sec:8.1f} ms")

# %% [markdown]
# Only one common part of a transformer ties its parameters to a length: a *learned*
# table of position embeddings (chapter 4), one row per position up to a fixed maximum.
# That caps the input length; it still does not depend on the input. The closed form
# takes it as `max_len`:

# %%
for max_len in (None, 512, 2048):
    print(
        f"max_len={str(max_len):>5}: {params.encoder_params(2, 32, 64, vocab_size, max_len=max_len):>8,} parameters"
    )

# %% [markdown]
# The same arithmetic scales to the largest models. A GPT-3 block has the same parts as
# an encoder block, a self-attention and a feed-forward sublayer with two LayerNorms; GPT-3
# puts each LayerNorm before its sublayer (pre-norm) and adds one more after the last block,
# which `final_norm=True` counts. With 96 blocks of width 12,288, $d_\text{ff} = 4 \cdot 12{,}288$, a
# vocabulary of 50,257 tokens and a learned table of 2,048 positions, the closed form
# lands near the 175 billion parameters reported for it {cite}`brown2020gpt3`
# (a later chapter does this count in full, model family by model family):

# %%
gpt3 = params.encoder_params(
    96, 12_288, 4 * 12_288, 50_257, max_len=2048, final_norm=True
)
print(
    f"{gpt3:,} parameters = {gpt3 / 1e9:.1f} billion; "
    f"{100 * 96 * params.encoder_block_params(12_288, 4 * 12_288) / gpt3:.1f} % of them in the 96 blocks"
)

# %% [markdown]
# ## Summary
#
# - A residual connection adds a sublayer's input to its output; its identity path keeps
#   the gradient at the first layer of a deep stack from vanishing.
# - LayerNorm standardises each token over its features (biased variance, learnable
#   $\gamma$ and $\beta$); BatchNorm standardises each feature over the batch, which ties
#   one sentence's output to the others.
# - The feed-forward sublayer transforms each token on its own with the same weights.
# - The original block is post-norm: $\mathrm{LayerNorm}(x + \mathrm{Sublayer}(x))$ after
#   attention and after the feed-forward network. Blocks keep the shape, so they stack.
# - Parameters depend on d_model, d_ff, the vocabulary and the number of layers, never
#   on the length of the input.

# %% [markdown]
# ## Exercises
#
# ### Exercise 1: BatchNorm from scratch
#
# Write `batch_norm(x, gamma, beta, eps)` for `x` of shape (B, T, D): training-mode
# BatchNorm, which normalises every feature with the mean and (biased) variance of that
# feature over all B·T tokens, then applies $\gamma$ and $\beta$ of shape (D,). Compare
# with `layer_norm` above: only the axis changes.


# %%
def batch_norm(x, gamma, beta, eps=1e-5):
    # YOUR CODE HERE
    raise NotImplementedError


# %% tags=["solution", "hide-cell"]
def batch_norm(x, gamma, beta, eps=1e-5):
    mu = x.mean(dim=(0, 1))  # (D,): one mean per feature, over batch and time
    var = x.var(dim=(0, 1), unbiased=False)  # (D,): biased variance
    return gamma * (x - mu) / torch.sqrt(var + eps) + beta  # (B, T, D)


# %%
checks.check_batch_norm(batch_norm)

# %% [markdown]
# ### Exercise 2: the pre-norm block
#
# Many later models move the LayerNorm to the *input* of each sublayer and leave the
# residual path untouched:
#
# $$
# H = X + \mathrm{MultiHead}(\mathrm{LayerNorm}_1(X)), \qquad
# Y = H + \mathrm{FFN}(\mathrm{LayerNorm}_2(H)).
# $$
#
# Write `pre_norm_block(x, self_attention, feed_forward, norm1, norm2)`, where each
# argument after `x` is a function from (B, T, D) to (B, T, D). The check compares with
# `blocks.EncoderBlock(..., norm_first=True)`. Watch the skip path: it must carry the
# raw input, not the normalised one.


# %%
def pre_norm_block(x, self_attention, feed_forward, norm1, norm2):
    # YOUR CODE HERE
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
    fixed = vocab_size * d_model + n_layers * (
        4 * d_model**2 + 9 * d_model
    )  # everything but the d_ff terms
    return (budget - fixed) // (
        n_layers * (2 * d_model + 1)
    )  # each unit of d_ff: a column of W1, b1 entry, a row of W2


# %%
checks.check_max_d_ff(max_d_ff)

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
# - `transformer_book.params`: closed-form parameter counts (`mha_params`,
#   `feed_forward_params`, `layer_norm_params`, `encoder_block_params`, `encoder_params`)
#   and `count_params` for modules.
