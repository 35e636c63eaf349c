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
# # 6. Post-norm, pre-norm and RMSNorm
#
# Chapter 3 built the encoder block of the original transformer, with a LayerNorm
# *after* each residual addition ("post-norm"). Most large models trained since GPT-2
# {cite}`radford2019language` put the norm *before* each sublayer instead ("pre-norm"),
# and many, from T5 {cite}`raffel2020t5` to Llama {cite}`touvron2023llama`, replace
# LayerNorm by the cheaper RMSNorm {cite}`zhang2019root`. This chapter measures what
# each change does on a small tagging task.
# After it you will be able to:
#
# - say where the norm sits in a post-norm and a pre-norm block, and why pre-norm keeps
#   a clean identity path from the first layer to the last;
# - check the package's pre-norm block against `torch.nn.TransformerEncoderLayer`;
# - measure, at initialisation, how the gradient is spread over the layers of deep
#   post-norm and pre-norm stacks;
# - train 12-block stacks of both kinds at a large learning rate, post-norm with and
#   without warm-up (the full profile adds pre-norm with warm-up and smaller rates),
#   and read the result over seeds;
# - write RMSNorm, count what it saves and time it against LayerNorm.

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
import functools
import math
import statistics
import time

import matplotlib.pyplot as plt
import torch
from torch import nn

from transformer_book import (
    blocks,
    checks,
    classifiers,
    data,
    deep_tagger_readings,
    deep_taggers,
    diagrams,
    masks,
    norms,
    params,
    plotting,
    report,
    runtime,
    training,
    training_diagnostics,
)

# %% tags=["parameters"]
device = "auto"  # "auto": CUDA, else Apple MPS, else the CPU
profile = "auto"  # "auto": quick on every device; "full" by name

# %%
run = runtime.setup(device, profile, seed=0, cpu_threads=1)  # tiny models: 1 thread
print(run)
d_model, n_heads = run.pick(quick=16, full=64), run.pick(quick=2, full=4)
d_ff = 2 * d_model  # half the usual 4·d_model, to keep the many runs cheap
depth = 12  # blocks in every trained stack
grad_depths = (6, 12, 24)  # stack depths measured at initialisation
steps = run.pick(quick=36, full=400)  # updates per training run
warmup = steps // 4  # linear warm-up over the first quarter, when used
lrs = run.pick(quick=(3e-2,), full=(3e-4, 1e-3, 3e-3, 1e-2, 3e-2))
top = max(lrs)  # the rate of the main comparison, in both profiles
every = [(lr, w) for lr in lrs for w in (0, warmup)]  # (learning rate, warm-up steps)
grid = {  # placement -> the settings it is trained at (section 4 says why)
    "post": run.pick(quick=[(top, 0), (top, warmup)], full=every),
    "pre": run.pick(quick=[(top, 0)], full=every),
}
n_seeds = run.pick(quick=5, full=5)  # training runs per 12-block setting
n_shallow = run.pick(quick=6, full=10)  # runs of the 2-block taggers (seconds each)
n_init_seeds = run.pick(quick=6, full=20)  # initialisations per depth
batch_size = 64
report.glue_all({"steps": steps, "n_seeds": n_seeds, "warmup": warmup})
print(f"{depth} blocks, d_model={d_model}, {steps} steps, lrs={lrs}, {n_seeds} seeds")

# %% [markdown]
# ## 1. Two places for the norm
#
# Write $F$ for a sublayer (self-attention or the feed-forward network) and LN for the
# norm. The original block {cite}`vaswani2017attention` normalises *after* adding the
# residual; the pre-norm block normalises only what *enters* the sublayer:
#
# $$
# \text{post-norm:}\quad x_{l+1} = \mathrm{LN}\big(x_l + F_l(x_l)\big),
# \qquad\qquad
# \text{pre-norm:}\quad x_{l+1} = x_l + F_l\big(\mathrm{LN}(x_l)\big).
# $$
#
# Unroll the pre-norm recursion over a stack of $L$ blocks, that is $2L$ sublayers (an
# attention and a feed-forward one per block), and the input survives untouched:
#
# $$
# x_{2L} = x_0 + \sum_{l=0}^{2L-1} F_l\big(\mathrm{LN}(x_l)\big),
# \qquad
# \frac{\partial x_{2L}}{\partial x_0} = I + \sum_{l} \frac{\partial F_l(\mathrm{LN}(x_l))}
# {\partial x_0}.
# $$
#
# The running sum $x_l$ is often called the **residual stream**: each sublayer reads a normalised
# copy of it and adds its result back. In post-norm there is no such untouched path: the
# stream itself passes through a LayerNorm after every addition, and the gradient to
# the first layer has to pass through all $2L$ of them, one per sublayer.

# %% tags=["hide-input"] mystnb={"image": {"alt": "Two encoder blocks side by side, each drawn as a thick blue vertical line (the residual stream) from the block input at the bottom to the block output at the top, with two branches to the right, one for multi-head attention and one for the feed-forward network, each returning to a plus sign on the stream. Left, post-norm: a pink LayerNorm box sits on the stream itself after each plus sign. Right, pre-norm: the LayerNorm boxes sit inside the branches, before attention and before the feed-forward network, and the blue stream runs from input to output through the two plus signs only. A note beside the pre-norm output says that a pre-norm stack adds one final LayerNorm after its last block."}}
diagrams.norms.post_vs_pre_norm()
plt.show()

# %% [markdown]
# The package's `blocks.EncoderBlock` takes the placement as `norm_first`. With the same
# weights, the two placements compute different functions; each is one line per
# sublayer (you wrote the pre-norm one in chapter 3's exercise 2):


# %%
def post_norm_block(x, block):
    """LN(x + F(x)) around each sublayer of `block`. Shapes: (B, T, D) -> (B, T, D)."""
    h = block.norm1(x + block.attn(x)[0])  # attention, then Add & Norm
    return block.norm2(h + block.ff(h))  # feed-forward, then Add & Norm


def pre_norm_block(x, block):
    """x + F(LN(x)) around each sublayer of `block`. Shapes: (B, T, D) -> (B, T, D)."""
    h = x + block.attn(block.norm1(x))[0]  # the skip path carries x itself
    return h + block.ff(block.norm2(h))


post = blocks.EncoderBlock(16, 2, 32, norm_first=False)
pre = blocks.EncoderBlock(16, 2, 32, norm_first=True)
pre.load_state_dict(post.state_dict())  # the very same weights
x = torch.randn(2, 5, 16)  # (B, T, d_model)
torch.testing.assert_close(post_norm_block(x, post), post(x))
torch.testing.assert_close(pre_norm_block(x, pre), pre(x))
print("ours == blocks.EncoderBlock for both placements")
print("same weights, same output?", torch.allclose(post(x), pre(x)))

# %% [markdown]
# **Check against PyTorch.** `torch.nn.TransformerEncoderLayer(norm_first=True)` is the
# pre-norm block. As in chapter 3, `blocks.load_torch_encoder_layer` copies its weights
# into ours; we compare without a mask and with a padding mask (PyTorch's
# `src_key_padding_mask` says True = *ignore*, ours True = *may attend*, hence the `~`).

# %%
torch_layer = nn.TransformerEncoderLayer(
    16, 2, 32, dropout=0.0, batch_first=True, norm_first=True
)
ours = blocks.EncoderBlock(16, 2, 32, norm_first=True)
blocks.load_torch_encoder_layer(ours, torch_layer)  # copies torch_layer's weights
x = torch.randn(3, 6, 16)  # (B, T, d_model)
keep = masks.padding_mask(torch.tensor([6, 4, 2]), 6)  # (B, 1, 1, T): True = may attend
torch.testing.assert_close(ours(x), torch_layer(x), atol=1e-5, rtol=1e-5)
real = keep[:, 0, 0]  # (B, T): the real tokens, then padding
ref = torch_layer(x, src_key_padding_mask=~real)  # PyTorch: True = ignore
torch.testing.assert_close(ours(x, mask=keep)[real], ref[real], atol=1e-5, rtol=1e-5)
print("pre-norm EncoderBlock == nn.TransformerEncoderLayer(norm_first=True), atol 1e-5")

# %% [markdown]
# ## 2. A task for deep stacks: ATIS slot filling
#
# To compare the placements on something real we reuse chapter 5's task: tag every word
# of an ATIS flight query with its slot (BIO tags) {cite}`hemphill1990atis`. Training
# choices are judged on the dev split; the test split is not used in this chapter.
# `deep_taggers.tagging_task` numbers the words and tags with vocabularies of the
# training split and pads the queries into tensors, as chapter 5 did by hand. A dev
# word never seen in training becomes `<unk>`; a dev token whose *tag* never occurs in
# training is ignored by the loss (target $-100$).

# %%
task = deep_taggers.tagging_task(data.load_atis("train"), data.load_atis("dev"))
words, tags = task.words, task.tags  # the vocabularies of the training split
n_train, n_dev = len(task.train_ids), len(task.dev_ids)
print(f"train {n_train}, dev {n_dev} queries; {len(words)} words, {len(tags)} tags")
scored = int((task.dev_tags != classifiers.IGNORE).sum())  # not padding, not unseen
print(f"dev tokens scored: {scored}, ignored: {task.unseen}")

# %% [markdown]
# The model is chapter 5's tagger, `classifiers.WordTagger` (word embeddings, an
# encoder, a linear layer per token), here with learned position vectors (its default;
# chapter 5 chose the relative bias) and with its encoder replaced by a deep stack whose
# norm we choose. No dropout. The two placements then differ in where the norms sit
# and, as pre-norm requires, in the pre-norm stack's final LayerNorm: $2d$ more
# parameters, and the linear head sees a normalised stream (exercise 3 shows what that
# last norm does to the head's scores). `deep_taggers.deep_tagger` builds it: the seed
# draws the tagger's weights, then a fresh `blocks.Encoder` of the chosen norm replaces
# its one-block encoder.

# %%
sizes = dict(d_model=d_model, n_heads=n_heads, d_ff=d_ff, pad_id=words.pad_id)
# make_tagger(n_layers, norm_first, norm="layer", seed=0), on the CPU:
make_tagger = functools.partial(deep_taggers.deep_tagger, len(words), len(tags),
                                **sizes)  # fmt: skip
model = make_tagger(depth, norm_first=True)
n_blocks = len(model.body.encoder.layers)  # a blocks.Encoder
print(f"{n_blocks} blocks, {params.count_params(model):,} parameters")

# %% [markdown]
# The loss is the cross-entropy per scored token. A model that ignores the words and
# predicts every token from the training frequencies of the tags,
# $p(\text{tag}) = (c(\text{tag}) + 1) / (N + C)$ over $C$ tags (add-one smoothed: the
# unigram model of `baselines`), scores
#
# $$
# \mathcal{L}_\text{prior} = -\frac{1}{N_\text{dev}}\sum_{t} \log p(y_t)
# $$
#
# on the dev tokens. That is the bar: a stack that does not get below it has learned
# nothing from the words.

# %%
prior_loss = task.prior_loss()  # baselines.unigram_loss on the scored dev tokens
report.glue("prior_loss", prior_loss, "{:.2f}")
print(f"dev loss of the tag frequencies alone: {prior_loss:.3f} nats per token")

# %% [markdown]
# Chapter 5's plumbing serves unchanged: `task.train_batches` draws training batches of
# queries of similar length (`batching.PaddedBatches`; `task.dev_batches` gives the dev
# queries in a fixed order), `classifiers.token_loss` is the loss per scored token, and
# `task.dev_loss` averages it over every scored dev token (not a mean of batch means:
# `classifiers.mean_token_loss`, infinite when a run diverged). `task.probe` is one
# fixed batch, the first 64 training queries, that section 3 looks inside the models
# with.

# %%
probe = task.probe(64)  # (ids, tags) of the first 64 queries
print("the probe batch: ", tuple(probe[0].shape))

# %% [markdown]
# ## 3. Deep stacks at initialisation
#
# Before any training, take stacks of 24 blocks of each kind and look at the residual
# stream block by block: its size (the root mean square of its entries) and how alike
# the tokens of one query have become (the mean cosine similarity between the vectors of
# two different tokens of the same query). Each stack is built from several random
# initialisations (seeds), so that we can tell a property from a fluke.


# %%
keep = probe[0] != words.pad_id  # (B, T): the real tokens of the probe batch
profiles = {}  # name -> (RMS, cosine), each (seeds, blocks)
for name, first in (("post-norm", False), ("pre-norm", True)):
    models = [make_tagger(24, first, seed=s) for s in range(n_init_seeds)]
    runs = [
        blocks.stream_profile(m, m.body.encoder.layers, probe[0], keep) for m in models
    ]  # per model: RMS and mean cosine of the stream after each block
    profiles[name] = tuple(torch.tensor(v) for v in zip(*runs))
print({k: tuple(rms.shape) for k, (rms, cos) in profiles.items()}, "(seeds, blocks)")

# %% tags=["hide-input"]
fig, axes = plt.subplots(1, 2, figsize=plotting.WIDE)
for i, (ax, what, title) in enumerate(zip(
    axes,
    ("RMS of the residual stream", "mean cosine between tokens"),
    ("Size of the stream", "How alike the tokens of a query are"),
)):  # fmt: skip
    runs = {name: stats[i] for name, stats in profiles.items()}  # (seeds, blocks)
    plotting.seed_bands(
        range(1, 25), runs, ax, xlabel="block", ylabel=what, title=title
    )
fig.suptitle(f"Mean over {n_init_seeds} initialisations (band: min to max)")
fig.tight_layout()
plt.show()

# %% [markdown]
# In post-norm every block ends with a LayerNorm, so the stream leaves each block with
# RMS 1 (up to $\epsilon$). In pre-norm nothing rescales the stream: every sublayer adds
# to it and it grows with depth. That is why a pre-norm stack needs one more LayerNorm
# after its last block (`blocks.Encoder` adds it as `final_norm`; exercise 3 removes it).
# On the right, the tokens of a query drift towards the same direction as the stack
# gets deeper, in both kinds, and faster in post-norm: after 24 blocks, the tokens of
# every post-norm initialisation are more alike than those of every pre-norm one. A
# linear layer on top of vectors that are much alike has little to tell the words of a
# query apart by. Whether that holds training back is, at this point, a hypothesis;
# section 4 measures how alike the tokens are *after* training.

# %% tags=["nbval-ignore-output"]
(rms_post, cos_post), (rms_pre, cos_pre) = profiles.values()  # (seeds, blocks)
print("\n".join(deep_tagger_readings.stream_table(profiles, at=(1, 6, 12, 24))))
assert (rms_post - 1).abs().max() < 0.01  # post-norm: RMS 1 after every block
assert (rms_pre[:, -1] > 1.2 * rms_pre[:, 0]).all()  # pre-norm: grows with depth
assert (cos_post[:, -1] > cos_post[:, 0]).all()  # tokens more alike after 24 blocks
assert (cos_pre[:, -1] > cos_pre[:, 0]).all()
report.glue("rms_pre_24", rms_pre[:, -1].mean().item(), "{:.2f}")
assert cos_post[:, -1].min() > cos_pre[:, -1].max()  # ... more so in post-norm, always

# %% [markdown]
# ### The gradient, layer by layer
#
# Xiong et al. {cite}`xiong2020layer` analysed both placements at initialisation. For
# post-norm they show that the gradients of the parameters near the output are large and
# do not shrink with depth; for pre-norm, they bound them by a quantity that shrinks as
# $1/\sqrt{L}$ with the number of layers $L$. We measure it on our task: build stacks
# of 6, 12 and 24 blocks, compute the loss of one batch (the probe batch above), and
# take the norm of the gradient of each block's parameters,
#
# $$
# g_l = \Big\lVert \frac{\partial \mathcal{L}}{\partial \theta_l} \Big\rVert_2,
# \qquad \theta_l = \text{all weights of block } l,
# $$
#
# for each of several initialisations.


# %%
def block_gradient_norms(n_layers, norm_first, seed):
    """‖∂loss/∂θ_l‖ for every block l of a freshly built tagger, on one batch."""
    model = make_tagger(n_layers, norm_first, seed=seed).to(run.device)
    return training_diagnostics.layer_gradient_norms(
        model, classifiers.token_loss, probe, model.body.encoder.layers
    )


inits = range(n_init_seeds)
grads = {  # (norm_first, L) -> (seeds, L)
    (first, L): torch.stack([block_gradient_norms(L, first, s) for s in inits])
    for first in (False, True)
    for L in grad_depths
}
print(len(grads), "stacks,", n_init_seeds, "initialisations each")

# %% tags=["hide-input"]
fig, axes = plt.subplots(1, 2, figsize=plotting.WIDE, sharey=True)
for ax, first in zip(axes, (False, True)):
    for L in grad_depths:
        g = grads[first, L].mean(0)  # (L,): mean over initialisations
        ax.plot(range(1, L + 1), g, "o-", ms=3, label=f"{L} blocks")
    name = "pre-norm" if first else "post-norm"
    ax.set(xlabel="block (1 = nearest the input)", title=f"{name}: gradient per block")
    ax.legend()
axes[0].set_ylabel(f"‖∂loss/∂θ‖ of the block, mean of {n_init_seeds}")
fig.tight_layout()
plt.show()

# %% [markdown]
# To summarise each stack, average $g_l$ over its first quarter of blocks (nearest the
# input) and over its last quarter (nearest the output). The table gives the means over
# the initialisations, and the range of the ratio last/first over the initialisations
# taken one by one (`training_diagnostics.quarter_means` averages the quarters):

# %% tags=["nbval-ignore-output"]
quarters = {k: training_diagnostics.quarter_means(g) for k, g in grads.items()}
ratios = {k: high / low for k, (low, high) in quarters.items()}  # per initialisation
mean_ratio = {k: v[1].mean().item() / v[0].mean().item() for k, v in quarters.items()}
print("\n".join(training_diagnostics.quarter_table(quarters)))  # means, ratio, range
for L in grad_depths:
    assert 0.8 < mean_ratio[True, L] < 1.2  # pre-norm: flat along the stack
    assert mean_ratio[False, L] > mean_ratio[True, L] + 0.1  # post-norm: top-heavy
    # post-norm's top blocks get larger gradients, for every initialisation
    assert quarters[False, L][1].min() > quarters[True, L][1].max()
top_post = [quarters[False, L][1].mean().item() for L in grad_depths]
assert min(top_post) > 0.95 * top_post[0]  # ... and not smaller in deeper stacks
print("top quarter, post-norm, by depth:", ", ".join(f"{v:.3f}" for v in top_post))
report.glue("separate", deep_tagger_readings.separation_words(ratios))
report.glue("ratio_post_24", mean_ratio[False, 24], "{:.1f}")
report.glue("ratio_pre_24", mean_ratio[True, 24], "{:.1f}")

# %% [markdown]
# The two stacks differ the way {cite:t}`xiong2020layer` describe. In pre-norm the
# gradient is, on average, about the same all along the stack, at every depth. In
# post-norm it grows from the blocks near the input to the blocks near the output (at
# 24 blocks, the last quarter's mean gradient is {glue:text}`ratio_post_24` times the
# first quarter's, against {glue:text}`ratio_pre_24` in pre-norm). Single
# initialisations are noisy (last column): {glue:text}`separate`. What holds for every
# initialisation at every depth is that post-norm's top blocks get larger gradients than
# pre-norm's; and, on average over the initialisations, they do not get smaller as the
# stack gets deeper. Such large gradients at the top of a deep post-norm stack when
# training starts are Xiong et al.'s explanation of why post-norm needs a small learning
# rate and a warm-up, and pre-norm does not.
#
# What about the $1/\sqrt{L}$ of pre-norm? From 6 to 24 blocks it would halve the
# gradient, $\sqrt{6/24} = 0.5$. Divide pre-norm's mean gradient per block at 24 blocks
# by that at 6, over all blocks and for the last block alone (the one Xiong et al.'s
# bound is about):

# %% tags=["nbval-ignore-output"]
shrink, apart = {}, {}  # what -> mean at 24 / mean at 6 blocks; the ranges in words
for what, pick in (("all blocks", slice(None)), ("last block", slice(-1, None))):
    g6, g24 = (grads[True, L][:, pick].mean(1) for L in (6, 24))  # (seeds,) each
    shrink[what], apart[what] = deep_tagger_readings.spread_change(g6, g24, 6, 24)
    print(f"pre-norm, {what:>10}: 6 blocks {report.mean_spread(g6.tolist())}, "
          f"24 blocks {report.mean_spread(g24.tolist())}")  # fmt: skip
bound = math.sqrt(6 / 24)
measured = ", ".join(f"{k} {v:.2f}" for k, v in shrink.items())
print(f"24 / 6: {measured}; 1/√L predicts {bound:.2f}")
report.glue_all(dict(zip(("shrink_all", "shrink_last"), shrink.values())), "{:.2f}")
assert min(shrink.values()) > bound + 0.15  # far from halving
# The bound's 1/√L: the final LayerNorm divides by a stream whose size grows as √L.
# Section 3's table: how much did the pre-norm stream grow from 6 to 24 blocks?
rms_6, rms_24 = (rms_pre[:, i].mean().item() for i in (5, 23))  # over initialisations
growth = rms_24 / rms_6
print(
    f"pre-norm stream RMS: {rms_6:.2f} after block 6, {rms_24:.2f} after block 24: "
    f"x{growth:.2f} (√L predicts x{1 / bound:.0f}); 1/{growth:.2f} = {1 / growth:.2f}"
)
rms_1 = rms_pre[:, 0].mean().item()  # after block 1
report.glue_all({"rms_pre_1": rms_1, "rms_pre_6": rms_6, "rms_growth": growth,
                 "rms_predict": 1 / growth}, "{:.2f}")  # fmt: skip
assert growth < 1 / bound - 0.3  # the stream grew far less than √(24/6) = 2
# dividing by the stream's growth comes nearer the last block's factor than 1/√L does
assert abs(shrink["last block"] - 1 / growth) < abs(shrink["last block"] - bound) - 0.05
# whether the ranges overlap is decided by single initialisations: quoted, not asserted
report.glue("shrink_spread", apart["all blocks"])

# %% [markdown]
# The measurement does not follow $1/\sqrt{L}$: going from 6 to 24 blocks multiplied
# pre-norm's mean gradient per block by {glue:text}`shrink_all` on average over the
# initialisations (the last block's by {glue:text}`shrink_last`), not by 0.5: for all
# blocks, {glue:text}`shrink_spread`. Section 3's table explains much of the gap. The
# $1/\sqrt{L}$ in Xiong et al.'s bound comes from the final LayerNorm, which divides by
# the size of the stream it receives, and they assume that size grows as $\sqrt{L}$,
# twice as large at 24 blocks as at 6. Our pre-norm stream grew only
# {glue:text}`rms_growth` times, from RMS {glue:text}`rms_pre_6` after block 6 to
# {glue:text}`rms_pre_24` after block 24: the stream starts large (RMS
# {glue:text}`rms_pre_1` after block 1 already), and that head start is still most of
# it at 6 blocks, so its growth from 6 to 24 blocks stays well below the asymptote's
# factor of 2. Dividing by that growth predicts a last-block factor of about
# {glue:text}`rms_predict`, nearer the measured {glue:text}`shrink_last` than 0.5. A
# second reason: the theorem is an upper bound, in $O(\cdot)$, proved for the last
# layer's weights under assumptions about the initialisation and the inputs. It limits
# how *large* the gradient can be, not how fast it falls.
# {cite:t}`liu2020understanding` go further: they find that unbalanced gradients are
# not the root cause of post-norm's unstable training (section 4 comes back to this).

# %% [markdown]
# ## 4. Training deep stacks: learning rate and warm-up
#
# Now train 12-block taggers of both kinds with AdamW, from several seeds, at a
# learning rate of {glue:text}`top_lr`, the largest of the full profile's grid. Post-norm, the placement
# a warm-up is meant to help, is trained both with a constant rate and with a linear
# warm-up over the first {glue:text}`warmup` steps (`training.train(..., warmup=...)`);
# pre-norm with a constant rate only. The full profile trains both placements both
# ways, at four smaller rates as well. The seed sets the initialisation and the order of
# the batches; the same seeds are used for both placements. There is no gradient
# clipping (`clip=0`), so that nothing but the placement and the schedule keeps
# training stable. A run *diverges* when its loss becomes NaN or infinite; we also mark
# the runs that end no better than the prior ({glue:text}`prior_loss` nats): above it,
# or less than 0.02 below it.
#
# {glue:text}`steps` updates of {glue:text}`batch_size` queries are
# {glue:text}`epochs` of an epoch: these runs measure how fast each stack *starts* to
# learn, not where it would end.


# %%
report.glue("batch_size", batch_size)
report.glue("epochs", steps * batch_size / n_train, "{:.1f}")


def train_tagger(norm_first, lr, warmup, seed, norm="layer", n_layers=depth):
    """One tagger trained for `steps` updates from `seed` (its weights and batches)."""
    model = make_tagger(n_layers, norm_first, norm, seed).to(run.device)
    batches = task.train_batches(batch_size, seed)
    training.train(
        model, batches, classifiers.token_loss, steps, lr=lr, warmup=warmup, clip=0
    )
    return model


# %% [markdown]
# First the post-norm stacks, then the pre-norm ones, from the same seeds:

# %%
trained = {  # (placement, lr, warm-up) -> a tagger per seed
    ("post", lr, w): [train_tagger(False, lr, w, s) for s in range(n_seeds)]
    for lr, w in grid["post"]
}
print(f"post-norm: {len(trained)} settings × {n_seeds} seeds")

# %%
for lr, w in grid["pre"]:
    trained["pre", lr, w] = [train_tagger(True, lr, w, s) for s in range(n_seeds)]
final = {k: [task.dev_loss(m) for m in ms] for k, ms in trained.items()}  # per seed
print(f"pre-norm: {len(grid['pre'])} settings × {n_seeds} seeds")

# %% [markdown]
# The final dev loss per setting, mean ± standard deviation over the seeds; `k†` counts
# the runs that diverged and `k=` those that ended no better than the prior
# (`deep_tagger_readings.seed_summary`; `deep_tagger_readings.grid_words` puts the table's verdicts in
# words):


# %% tags=["nbval-ignore-output"]
settings = sorted(set(grid["post"]) | set(grid["pre"]))  # (lr, warm-up steps)
print("\n".join(deep_tagger_readings.grid_table(final, settings, prior_loss)))
post_top, pre_top = final["post", top, 0], final["pre", top, 0]
for p, runs in (("post", post_top), ("pre", pre_top)):
    print(f"lr {top:g}, no warm-up, {p}-norm, seed by seed:",
          ", ".join(f"{v:.3f}" for v in runs))  # fmt: skip
prior = [prior_loss] * n_seeds  # a fixed baseline: Welch's test becomes the one-sample
verdicts = {  # chapter 4's test: every seed on one side and a t-test at 95 %
    # paired: the same seed gives both placements the same weights and the same batches
    "pre_vs_post": deep_tagger_readings.seed_verdict(post_top, pre_top, pairs=True),
    "pre_vs_prior": deep_tagger_readings.seed_verdict(prior, pre_top),
    "post_vs_prior": deep_tagger_readings.seed_verdict(prior, post_top),
}
for name, text in verdicts.items():
    print(f"{name}: {text}")
# The verdicts, asserted with a margin: they hold with every pre-norm run 0.05 nats
# worse and every post-norm run 0.01 nats better than it measured.
worse_pre, better_post = [v + 0.05 for v in pre_top], [v - 0.01 for v in post_top]
assert report.ahead(post_top, worse_pre)  # pre-norm lower than post-norm, paired
assert report.ahead(prior, worse_pre, pairs=False)  # pre-norm lower than the prior
assert report.ahead(better_post, prior, pairs=False)  # post-norm higher than the prior
words_grid = deep_tagger_readings.grid_words(final, prior_loss, top, warmup, steps)
report.glue_all(words_grid | verdicts)


# %% tags=["hide-input"]
names = [f"lr {lr:g}\n" + (f"warm-up {w}" if w else "no warm-up") for lr, w in settings]
losses = {f"{p}-norm": [final.get((p, lr, w), []) for lr, w in settings]
          for p in ("post", "pre")}  # fmt: skip
fig, ax = plt.subplots(figsize=plotting.WIDE)
plotting.seed_dots(names, losses, ax, failed_at=prior_loss,  # diverged runs: no dot
                   ylabel="final dev loss per token",
                   title=f"{depth}-block taggers after {steps} steps")  # fmt: skip
ax.axhline(prior_loss, color="gray", ls=":", label="tag frequencies alone")
ax.legend()
plt.show()

# %% [markdown]
# At the largest learning rate ({glue:text}`top_lr`) and without warm-up, the pre-norm
# runs ended at a mean dev loss of {glue:text}`pre_top`, the post-norm runs at
# {glue:text}`post_top`. We judge the gap with chapter 4's test (`report.compare_seeds`:
# every seed on one side *and* a $t$-test at 95 %). The runs are paired: the same seed
# gives both placements the same initial weights (the final LayerNorm draws no random
# numbers) and the same batches, so the test is the paired one. Pre-norm's final loss
# against post-norm's, seed by seed: {glue:text}`pre_vs_post`. Against the prior, a
# fixed number (so the one-sample test), pre-norm's loss is
# {glue:text}`pre_vs_prior`: the pre-norm stack learns. And {glue:text}`post_level`
# (against the prior, post-norm's loss is {glue:text}`post_vs_prior`): the deep
# post-norm stack stays stuck at the loss of the tag frequencies (its dots sit at the
# prior's line). {glue:text}`warm_text`
#
# Section 3 left a hypothesis: the tokens of a deep post-norm stack become alike, and a
# linear head has little to tell them apart by. Look inside the trained taggers of the
# main comparison, on the probe batch: how alike the tokens of a query are where the
# linear head reads them (mean cosine, as in section 3), and the share of the real
# tokens the tagger labels with the most frequent tag, `O`. For post-norm the head reads
# the stream after the last block; for pre-norm it reads the stream after the final
# LayerNorm, which centres each token and so changes the cosines: the cell prints both
# (`deep_tagger_readings.head_collapse` measures them).

# %% tags=["nbval-ignore-output"]
most = 0  # tags are numbered by falling training frequency: 0 is the most frequent
truth = (probe[1][keep] == most).float().mean().item()
print(f"tag {tags.itos[most]!r} is the true tag of {truth:.0%} of the probe's tokens")
after = {}  # placement -> per seed: (cosine after the last block, at the head, share O)
for p in ("post", "pre"):
    runs = trained[p, top, 0]
    after[p] = [
        deep_tagger_readings.head_collapse(m.cpu(), probe[0], keep, most) for m in runs
    ]
    print(f"{p}-norm, per seed: cosine after the last block, at the head; share O:",
          "; ".join(f"{c:.2f}, {h:.2f}; {s:.0%}" for c, h, s in after[p]))  # fmt: skip
cos_after = {p: [h for _, h, _ in v] for p, v in after.items()}  # what the head sees
share_post = min(s for _, _, s in after["post"])  # the smallest share over the seeds
report.glue_all(
    deep_tagger_readings.collapse_words(after, truth)
)  # cosines, shares in words
assert min(cos_after["post"]) > 0.95 > 0.9 > max(cos_after["pre"])  # collapsed or not
assert share_post > 0.95  # post-norm: (almost) every token tagged O

# %% [markdown]
# After training, the tokens of a query leave every deep post-norm stack as practically
# one vector (mean cosine above {glue:text}`cos_post_after` for every seed), and each of
# these taggers labels {glue:text}`share_post` `O`, the true tag of
# {glue:text}`share_truth` of them: a linear head cannot give different tags to the
# same vector. The pre-norm stacks' tokens became more alike during training too, but
# stay far from one vector where the head reads them (cosine
# {glue:text}`cos_pre_after` over the seeds after the final LayerNorm;
# {glue:text}`cos_pre_stream` before it). So the stuck runs are runs whose tokens
# collapsed, as the hypothesis expects. Which came first, the collapse or the stall,
# these measurements do not tell.
#
# Two cautions. These runs are short: {glue:text}`steps` updates measure early learning
# speed, not where a run ends. Xiong et al. do train post-norm transformers, with a
# long warm-up and a small rate, and {cite:t}`liu2020understanding` (who proposed the
# Admin initialisation) report a trade-off: pre-norm trains easily, while post-norm,
# when it trains, often ends slightly better. Their explanation is that each post-norm
# block depends heavily on its residual branch, which amplifies small updates of the
# parameters into large changes of the output; pre-norm's lighter dependence is stable
# but limits the model. That trade-off is cited, not measured here: the full profile
# (`profile = "full"`, with the step counts of the parameters cell, many times these,
# and smaller rates) gives post-norm more time. What we measured is early learning at
# one large rate: in the same number of steps, pre-norm's loss against post-norm's was
# {glue:text}`pre_vs_post`, and post-norm's against the prior
# {glue:text}`post_vs_prior`; not that post-norm cannot be trained.
#
# Is the post-norm block itself at fault, or its depth? The same post-norm tagger with 2
# blocks instead of 12, at the same rate without warm-up, from {glue:text}`n_shallow`
# seeds (each run, with its dev loss, took {glue:text}`shallow_seconds` CPU seconds when
# this edition was executed):


# %% tags=["nbval-ignore-output"]
report.glue("n_shallow", n_shallow)
started = time.process_time()  # CPU time: other programs' load does not count
shallow = [task.dev_loss(train_tagger(False, top, 0, s, n_layers=2))
           for s in range(n_shallow)]  # fmt: skip
seconds = (time.process_time() - started) / n_shallow  # per run, with its dev loss
glued = report.glue("shallow_seconds", seconds, "{:.1f}")
print(f"{glued} CPU seconds per 2-block run")
deep = final["post", top, 0]  # the 12-block runs of section 4
k_shallow, k_deep = (
    deep_tagger_readings.learned(v, prior_loss, 0.1) for v in (shallow, deep)
)
print("post-norm, 2 blocks: ", ", ".join(f"{v:.3f}" for v in shallow))
# Fisher's exact test: if depth made no difference, how likely is a split at least this
# lopsided, the runs that learned being dealt out at random over the two depths?
p_value = report.fisher_one_sided(k_shallow, n_shallow, k_deep, len(deep))
print(f"Fisher's exact test, one-sided: p = {p_value:.2f}")
assert k_shallow >= 2  # a 2-block post-norm tagger can learn at this rate
split = (k_shallow, n_shallow, k_deep, len(deep), p_value)
for name, text in deep_tagger_readings.depth_words(
    *split
).items():  # k: 0.1 nats below prior
    print(f"{name}: {report.glue(name, text)}")

# %% [markdown]
# {glue:text}`k_shallow` of the {glue:text}`n_shallow` 2-block runs ended more than 0.1
# nats below the prior, against {glue:text}`k_deep` 12-block runs:
# {glue:text}`depth_verdict`. {glue:text}`shallow_rest`
# {cite:t}`wang2019learning` observed the depth effect at scale: their deep post-norm
# translation encoders failed to train where pre-norm ones of the same depth trained
# well.
#
# ## 5. RMSNorm
#
# LayerNorm centres each token and rescales it to unit variance, then applies $\gamma$
# and $\beta$. RMSNorm {cite}`zhang2019root` drops the centring and $\beta$, and divides
# by the root mean square instead of the standard deviation:
#
# $$
# \mathrm{RMSNorm}(x) = \gamma \odot \frac{x}{\sqrt{\frac{1}{d}\sum_{i=1}^{d} x_i^2
# + \epsilon}}.
# $$
#
# Its authors argue that the re-scaling, not the re-centring, is what makes LayerNorm
# work. Here it is from scratch, in three lines, with the mean square computed in
# float32 as the Llama reference implementation does (so that half-precision inputs
# cannot overflow; exercise 2), then checked against the package and PyTorch:


# %%
def rms_norm(x, weight, eps=1e-6):
    """γ ⊙ x / RMS(x) over the last axis. Shapes: x (..., d), weight (d,)."""
    xf = x.float()  # the statistics in float32, whatever the input's dtype
    ms = xf.pow(2).mean(dim=-1, keepdim=True)  # (..., 1): mean square per token
    return (xf * torch.rsqrt(ms + eps)).to(x.dtype) * weight  # (..., d)


ours = norms.RMSNorm(16, eps=1e-6)
with torch.no_grad():
    ours.weight.normal_(1.0, 0.5)  # a non-trivial γ, as after training
theirs = nn.RMSNorm(16, eps=1e-6)
theirs.load_state_dict(ours.state_dict())  # the same γ
x = torch.randn(2, 5, 16) * 3 + 1  # (B, T, d_model), not centred
torch.testing.assert_close(rms_norm(x, ours.weight), ours(x), atol=1e-6, rtol=1e-6)
torch.testing.assert_close(ours(x), theirs(x), atol=1e-6, rtol=1e-6)
print("rms_norm == norms.RMSNorm == torch.nn.RMSNorm, within 1e-6")
print({name: tuple(p.shape) for name, p in ours.named_parameters()})

# %% [markdown]
# Unlike LayerNorm, RMSNorm does not remove each token's mean: it divides every entry,
# the mean with the rest, by the RMS. A constant vector of 3s has RMS 3, so it is not
# mapped to zero but to a vector of ones (times $\gamma$). Exercise 1 shows that
# LayerNorm is exactly RMSNorm applied to the centred vector.

# %%
const = torch.full((1, 4), 3.0)
print("LayerNorm:", norms.LayerNorm(4)(const).detach().numpy().round(3) + 0.0)
print("RMSNorm:  ", norms.RMSNorm(4)(const).detach().numpy().round(3) + 0.0)

# %% [markdown]
# ### What it saves: parameters
#
# One LayerNorm holds $2d$ numbers ($\gamma$, $\beta$), one RMSNorm $d$. A stack of $L$
# blocks has $2L$ norms, plus the final one of a pre-norm stack. Counted on the 12-block
# taggers:

# %%
for d in (d_model, 512):
    print(f"d={d}: LayerNorm {params.count_params(norms.LayerNorm(d))}, "
          f"RMSNorm {params.count_params(norms.RMSNorm(d))}")  # fmt: skip
n_ln = params.count_params(make_tagger(depth, True, "layer"))
n_rms = params.count_params(make_tagger(depth, True, "rms"))
print(f"pre-norm tagger: LayerNorm {n_ln:,}, RMSNorm {n_rms:,} parameters")
print(f"saved: {n_ln - n_rms} = (2·{depth} + 1)·{d_model}, {(n_ln - n_rms) / n_ln:.2%}")

# %% [markdown]
# A negligible share of the model. The usual argument for RMSNorm is time.
#
# ### What it saves: time
#
# Per token, LayerNorm computes two statistics (the mean, then the mean square of the
# centred vector); RMSNorm computes one, and skips the subtraction of the mean. To time
# exactly that difference, the two are written alike below: `plain_layer_norm` is
# `rms_norm` with the centring added (one mean and one subtraction, $x - \mu$ computed
# once), and both end with the same affine part, $\gamma$ alone (LayerNorm without
# $\beta$). We time forward plus backward on the same activations for three such
# pairs: the two plain functions; the package's modules (its LayerNorm calls PyTorch's
# fused `F.layer_norm`, its RMSNorm is plain code like `rms_norm`); and PyTorch's
# built-in `nn.LayerNorm(bias=False)` and `nn.RMSNorm`. A last pair times a whole
# pre-norm block with either norm (there LayerNorm keeps its $\beta$, as in a model).
#
# Timings on a busy machine are noisy, so the pairs are timed in *rounds*: one call of
# each function per round, the rounds one after the other, so that a load that comes
# and goes hits both members of a pair alike. We report the median over the rounds and,
# for the ratio RMSNorm / LayerNorm taken round by round, its middle half (the
# quartiles). On a CPU we count the processor time of this process (one thread), not the
# wall-clock time, which on a busy machine also counts the time other programs run.
# `norms.time_pairs` runs the rounds and `norms.ratio_words` reads a pair's ratios.


# %%
def plain_layer_norm(x, weight, eps=1e-5):
    """γ ⊙ (x − μ) / sqrt(σ² + ε), written like `rms_norm`, γ only. Shapes: (..., d)."""
    xf = x.float()
    centred = xf - xf.mean(dim=-1, keepdim=True)  # (..., d): x - μ, once
    var = centred.pow(2).mean(dim=-1, keepdim=True)  # (..., 1): the biased variance
    return (centred * torch.rsqrt(var + eps)).to(x.dtype) * weight


# %% tags=["nbval-ignore-output"]
shape = run.pick(quick=(8, 128, 256), full=(32, 512, 1024))  # (B, T, d)
d = shape[-1]
w = torch.ones(d, device=run.device, requires_grad=True)  # γ
pairs = {  # name -> (LayerNorm version, RMSNorm version)
    "plain code": (lambda x: plain_layer_norm(x, w), lambda x: rms_norm(x, w, 1e-5)),
    "package": (norms.LayerNorm(d, bias=False), norms.RMSNorm(d, eps=1e-5)),
    "torch built-in": (nn.LayerNorm(d, bias=False), nn.RMSNorm(d, eps=1e-5)),
    "pre-norm block": tuple(
        blocks.EncoderBlock(d, 4, 4 * d, norm_first=True, norm=k) for k in norms.NORMS
    ),
}
times = norms.time_pairs(pairs, shape, run.device, rounds=11)  # seconds per round
by_round = {name: [r / ln for ln, r in zip(*t)] for name, t in times.items()}
said = {name: norms.ratio_words(r) for name, r in by_round.items()}  # RMS / LN
print("\n".join(norms.time_table(times, run.device.type)))  # medians, ratios
ratio = {name: statistics.median(r) for name, r in by_round.items()}
assert ratio["plain code"] < 0.95  # written alike, RMSNorm does less and takes less
report.glue("saved_plain", f"{1 - ratio['plain code']:.0%}")
slower = statistics.quantiles(by_round["torch built-in"], n=4)[0] > 1  # 3 rounds of 4
report.glue("torch_question", "How can a module that does less work take longer? "
            "Look at" if slower else "It was not clearly slower here, but the reason "
            "it can be is worth seeing: look at")  # fmt: skip
short = {"plain": "plain code", "package": "package", "torch": "torch built-in",
         "block": "pre-norm block"}  # fmt: skip
# ratio, middle, words of each pair: ratio_plain, middle_plain, ...
report.glue_all({f"{what}_{name}": text for name, key in short.items()
                 for what, text in said[key].items()})  # fmt: skip


# %% [markdown]
# Written alike, RMSNorm took {glue:text}`ratio_plain` times the time of LayerNorm
# (median over the rounds; middle half of the rounds {glue:text}`middle_plain`): it took
# {glue:text}`words_plain`. The only difference between the two functions is one mean
# and one subtraction per token, forward and backward, so on the machine that executed
# this page those two operations cost about {glue:text}`saved_plain` of plain
# LayerNorm's time at this shape. Between the package's modules, whose LayerNorm calls
# PyTorch's fused `F.layer_norm` while its RMSNorm is plain code like `rms_norm`, the
# ratio was {glue:text}`ratio_package` (middle half {glue:text}`middle_package`):
# RMSNorm took {glue:text}`words_package`. Between PyTorch's own modules the ratio was
# {glue:text}`ratio_torch` (middle half {glue:text}`middle_torch`): RMSNorm took
# {glue:text}`words_torch`. {glue:text}`torch_question` the operations autograd records
# for each backward pass:


# %%
def backward_nodes(y):
    """Names of the autograd operations between `y` and the leaves (the weights, x)."""
    names, stack = [], [y.grad_fn]
    while stack:
        node = stack.pop()
        if node is not None and type(node).__name__ != "AccumulateGrad":
            names.append(type(node).__name__)
            stack.extend(child for child, _ in node.next_functions)
    return names


x = torch.randn(2, 3, 16, requires_grad=True)
print("nn.LayerNorm:", backward_nodes(nn.LayerNorm(16, bias=False)(x)))
print("nn.RMSNorm:  ", backward_nodes(nn.RMSNorm(16)(x)))

# %% [markdown]
# PyTorch's LayerNorm has one hand-written kernel for its backward pass. Its RMSNorm, in
# this version and on a CPU, is differentiated as a chain of generic operations (power,
# mean, add, reciprocal square root, two products), each of which reads and writes whole
# tensors. How an operation is implemented can matter more than the arithmetic it
# saves. Finally, in a whole block, where the matrix products dominate, the ratio was
# {glue:text}`ratio_block` (middle half {glue:text}`middle_block`): RMSNorm took
# {glue:text}`words_block`. The norms are a small part of a block's time, which is why
# a whole block's ratio stays near 1 whichever norm is faster.
# Timings vary from machine to machine; the one claim asserted in the cell is that,
# written alike, RMSNorm's median time stays below 0.95 of LayerNorm's.
#
# ### What it does to training
#
# Last, the pre-norm tagger with RMSNorm in place of LayerNorm, trained at the largest
# rate without warm-up from the same seeds (so each seed starts from the same
# attention and feed-forward weights):


# %% tags=["nbval-ignore-output"]
rms_runs = [task.dev_loss(train_tagger(True, top, 0, s, norm="rms"))
            for s in range(n_seeds)]  # fmt: skip
ln_runs = final["pre", top, 0]
print(f"pre-norm + LayerNorm: {deep_tagger_readings.seed_summary(ln_runs, prior_loss)}")
print(
    f"pre-norm + RMSNorm:   {deep_tagger_readings.seed_summary(rms_runs, prior_loss)}"
)
diffs = [a - b for a, b in zip(rms_runs, ln_runs)]  # same seed, same initial weights
print("RMSNorm - LayerNorm, seed by seed:", ", ".join(f"{v:+.3f}" for v in diffs))
assert report.ahead(prior, [v + 0.05 for v in rms_runs], pairs=False)  # below the prior
rms_words = {
    "rms_gap": f"{statistics.mean(diffs):+.3f}",
    "rms_vs_prior": deep_tagger_readings.seed_verdict(prior, rms_runs),
    # paired: the same seed, the same attention and feed-forward weights, batches
    "rms_verdict": deep_tagger_readings.seed_verdict(ln_runs, rms_runs, pairs=True),
}
for name, text in rms_words.items():
    print(f"{name}: {report.glue(name, text)}")

# %% [markdown]
# Against the prior, with the same one-sample test as above, RMSNorm's loss is
# {glue:text}`rms_vs_prior`, LayerNorm's {glue:text}`pre_vs_prior`. Seed by seed,
# RMSNorm's final loss minus LayerNorm's averages {glue:text}`rms_gap` nats. The seeds
# pair the two norms (the same attention and feed-forward weights, the same batches), so
# chapter 4's paired test applies: RMSNorm's loss against LayerNorm's,
# {glue:text}`rms_verdict`. On large tasks (translation,
# language modelling), {cite:t}`zhang2019root` report that RMSNorm matches LayerNorm's
# quality with less computation.
#
# ## Summary
#
# - Post-norm normalises the residual stream after each addition; pre-norm normalises
#   only the input of each sublayer, leaving an identity path from the input to the
#   output, and needs one final norm after the last block.
# - At initialisation, the gradient of a deep post-norm stack grows towards the output
#   (last quarter / first quarter of the blocks ≈ {glue:text}`ratio_post_24` at 24
#   blocks, on average over initialisations); in pre-norm it is spread evenly
#   (≈ {glue:text}`ratio_pre_24`) {cite}`xiong2020layer`. Post-norm's top blocks get
#   larger gradients than pre-norm's for every initialisation. From 6 to 24 blocks,
#   pre-norm's gradient did not halve, as the $1/\sqrt{L}$ of Xiong et al.'s bound would
#   (0.5): the mean changed by a factor {glue:text}`shrink_all`,
#   {glue:text}`shrink_spread`.
# - Trained for {glue:text}`steps` steps (early learning speed) at a large learning
#   rate without warm-up, from {glue:text}`n_seeds` paired seeds, the 12-block pre-norm
#   tagger's dev loss against post-norm's: {glue:text}`pre_vs_post` (chapter 4's
#   test). Against the prior, pre-norm's loss is {glue:text}`pre_vs_prior`,
#   post-norm's {glue:text}`post_vs_prior`; the stuck post-norm runs end with the
#   tokens of a query collapsed to one vector. {glue:text}`warm_text`
# - A 2-block post-norm tagger learned at that rate in {glue:text}`k_shallow` of
#   {glue:text}`n_shallow` runs, the 12-block one in {glue:text}`k_deep`:
#   {glue:text}`depth_verdict`.
# - Pre-norm trains easily; post-norm, when it trains, often ends slightly better
#   {cite}`liu2020understanding` (cited, not measured here).
# - RMSNorm keeps only LayerNorm's rescaling: $d$ instead of $2d$ parameters and one
#   statistic instead of two. Written alike, it took {glue:text}`ratio_plain` of
#   LayerNorm's time; between PyTorch's modules, {glue:text}`ratio_torch` (the kernels
#   decide). On our task its loss against the prior was {glue:text}`rms_vs_prior`;
#   against LayerNorm's it differed by {glue:text}`rms_gap` nats on average over
#   {glue:text}`n_seeds` seeds: {glue:text}`rms_verdict`.

# %% [markdown]
# ## Exercises
#
# ### Exercise 1: LayerNorm is a centred RMSNorm
#
# Write `layer_norm_via_rms(x, gamma, beta, eps)` using only the `rms_norm` function
# above (pass it a weight of ones) and arithmetic: centre each token, RMS-normalise it,
# then apply $\gamma$ and $\beta$. The check compares with `F.layer_norm` with the same
# $\epsilon$. Why is the result *exactly* LayerNorm, $\epsilon$ included?


# %%
def layer_norm_via_rms(x, gamma, beta, eps):
    # YOUR CODE HERE
    raise NotImplementedError


# %% tags=["solution", "hide-cell"]
def layer_norm_via_rms(x, gamma, beta, eps):
    centred = x - x.mean(dim=-1, keepdim=True)  # (..., d): each token's mean removed
    # mean(centred²) is the biased variance, so this is (x - μ) / sqrt(σ² + ε)
    return gamma * rms_norm(centred, torch.ones(x.shape[-1]), eps) + beta


# %%
checks.check_layer_norm_via_rms(layer_norm_via_rms)

# %% [markdown]
# ### Exercise 2: RMSNorm in half precision
#
# Models are often run in float16 to save memory. Here is a first attempt at RMSNorm
# that computes everything in the input's dtype. Predict what it returns for a float16
# token whose entries are around 600 (float16's largest number is 65,504), run it, then
# write `rms_norm_half(x, weight, eps)` that returns the input's dtype but does not
# break.

# %%
x16 = torch.full((1, 8), 600.0, dtype=torch.float16)
naive = x16 * torch.rsqrt(x16.pow(2).mean(-1, keepdim=True) + 1e-6)
print(naive)


# %%
def rms_norm_half(x, weight, eps):
    # YOUR CODE HERE
    raise NotImplementedError


# %% tags=["solution", "hide-cell"]
def rms_norm_half(x, weight, eps):
    xf = x.float()  # 600² = 360,000 fits in float32, not in float16
    y = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    return y.to(x.dtype) * weight  # back to the input's dtype, then γ


# %%
checks.check_rms_norm_half(rms_norm_half)

# %% [markdown]
# ### Exercise 3: break the final norm
#
# A pre-norm stack ends with one more norm, `final_norm` (section 3 said why). Break it:
# replace `model.body.encoder.final_norm` by `nn.Identity()` in the 24-block pre-norm
# tagger at initialisation and the logits change size. **Predict first**, without
# running anything: how many times larger does the RMS of the logits get (over the real
# tokens of the probe batch)? Section 3's table has what you need; remember what the
# final norm hands the head at initialisation ($\gamma = 1$, $\beta = 0$) and that the
# head is linear. Write your guess as `predicted_growth`.
#
# Then measure it: write `logit_growth(model, ids)`, the RMS of the logits over the
# real tokens (`ids != model.cfg.pad_id`) without the final norm divided by the RMS
# with it. Leave `model` as you found it: break a copy (`copy.deepcopy`). The check
# runs your function on small taggers, names the usual slips, then compares your
# prediction with the measurement on the chapter's tagger.


# %%
predicted_growth = None  # YOUR PREDICTION HERE, before measuring


def logit_growth(model, ids):
    # YOUR CODE HERE
    raise NotImplementedError


# %% tags=["solution", "hide-cell"]
predicted_growth = rms_pre[:, -1].mean().item()  # section 3: the stream after block 24


def logit_growth(model, ids):
    broken = copy.deepcopy(model)  # the model we were given keeps its final norm
    broken.body.encoder.final_norm = nn.Identity()
    keep = ids != model.cfg.pad_id  # (B, T): the real tokens
    with torch.no_grad():
        rms = [m(ids)[keep].pow(2).mean().sqrt() for m in (broken, model)]
    return (rms[0] / rms[1]).item()


# %% tags=["nbval-ignore-output"]
checks.check_logit_growth(logit_growth, predicted_growth, make_tagger(24, True).cpu(),
                          probe[0])  # fmt: skip

# %% [markdown]
# ## What we added to the package
#
# - `transformer_book.norms.RMSNorm`: root-mean-square normalisation with $\gamma$ only,
#   statistics in float32; `norms.make_norm("layer" | "rms", d_model)` builds either
#   norm.
# - `transformer_book.blocks.EncoderBlock(..., norm_first=..., norm=...)` and the same
#   options on `blocks.Encoder` (which adds the final norm of a pre-norm stack).
# - `transformer_book.deep_taggers`: `deep_tagger` (chapter 5's tagger with a deep
#   stack of a chosen norm placement and kind), `tagging_task` (a training and a dev
#   split numbered and padded into a `TaggingTask`: training and dev batches, the probe
#   batch, the prior's dev loss, `dev_loss`).
# - `transformer_book.deep_tagger_readings`: `seed_summary`, `learned`, `seed_verdict`,
#   `head_collapse`, the tables the chapter prints (`stream_table`, `grid_table`) and
#   the verdicts in words (`separation_words`, `spread_change`, `grid_words`,
#   `depth_words`, `collapse_words`).
# - `transformer_book.report.fisher_one_sided`: Fisher's exact test, one-sided.
# - `transformer_book.training_diagnostics.quarter_means`: a stack's gradient over its
#   first and its last quarter of layers; `quarter_table` prints them.
# - `transformer_book.norms.time_pairs`, `norms.ratio_words` and `norms.time_table`:
#   (LayerNorm, RMSNorm) pairs timed in rounds, their ratio in words, both as a table.
# - `transformer_book.diagrams.norms.post_vs_pre_norm`: the diagram of section 1.
# - `transformer_book.checks`: `check_layer_norm_via_rms`, `check_rms_norm_half`,
#   `check_logit_growth`.
