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
# LayerNorm by the cheaper RMSNorm {cite}`zhang2019root`. This chapter measures why.
# After it you will be able to:
#
# - say where the norm sits in a post-norm and a pre-norm block, and why pre-norm keeps
#   a clean identity path from the first layer to the last;
# - check the package's pre-norm block against `torch.nn.TransformerEncoderLayer`;
# - measure, at initialisation, how the gradient is spread over the layers of deep
#   post-norm and pre-norm stacks;
# - train 12-block stacks of both kinds at a large learning rate (in the full profile,
#   at several rates, with and without warm-up), and read the result over several seeds;
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
import math
import statistics

import matplotlib.pyplot as plt
import torch
from torch import nn

from transformer_book import (
    batching,
    benchmark,
    blocks,
    checks,
    classifiers,
    data,
    diagrams,
    masks,
    norms,
    params,
    plotting,
    report,
    runtime,
    training,
)
from transformer_book.vocab import Vocab

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
lrs = run.pick(quick=(3e-2,), full=(3e-4, 1e-3, 3e-3, 1e-2))
grid = [(lr, w) for lr in lrs for w in (0, warmup)]  # (learning rate, warm-up steps)
# the quick profile trains only the setting of the main comparison (section 4 says why)
grid = run.pick(quick=[(max(lrs), 0)], full=grid)
n_seeds = run.pick(quick=3, full=5)  # training runs per setting
n_init_seeds = run.pick(quick=6, full=20)  # initialisations per depth
batch_size = 64
report.glue("steps", steps)
report.glue("n_seeds", n_seeds)
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
# Unroll the pre-norm recursion over $L$ sublayers and the input survives untouched:
#
# $$
# x_L = x_0 + \sum_{l=0}^{L-1} F_l\big(\mathrm{LN}(x_l)\big),
# \qquad
# \frac{\partial x_L}{\partial x_0} = I + \sum_{l} \frac{\partial F_l(\mathrm{LN}(x_l))}
# {\partial x_0}.
# $$
#
# The running sum $x_l$ is often called the **residual stream**: each sublayer reads a normalised
# copy of it and adds its result back. In post-norm there is no such untouched path: the
# stream itself passes through a LayerNorm after every addition, and the gradient to
# the first layer has to pass through all $2L$ of them.

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
ours = blocks.load_torch_encoder_layer(
    blocks.EncoderBlock(16, 2, 32, norm_first=True), torch_layer
)
x = torch.randn(3, 6, 16)  # (B, T, d_model)
lengths = torch.tensor([6, 4, 2])  # real tokens per sentence, then padding
keep = masks.padding_mask(lengths, 6)  # (B, 1, 1, T), True = may attend
torch.testing.assert_close(ours(x), torch_layer(x), atol=1e-5, rtol=1e-5)
got = ours(x, mask=keep)
ref = torch_layer(x, src_key_padding_mask=~keep[:, 0, 0])  # (B, T): True = ignore
for b, n in enumerate(lengths.tolist()):  # compare the real tokens
    torch.testing.assert_close(got[b, :n], ref[b, :n], atol=1e-5, rtol=1e-5)
print("pre-norm EncoderBlock == nn.TransformerEncoderLayer(norm_first=True), atol 1e-5")

# %% [markdown]
# ## 2. A task for deep stacks: ATIS slot filling
#
# To compare the placements on something real we reuse chapter 5's task: tag every word
# of an ATIS flight query with its slot (BIO tags) {cite}`hemphill1990atis`. Training
# choices are judged on the dev split; the test split is not used in this chapter.
# A dev token whose tag never occurs in training is ignored by the loss (target $-100$).

# %%
IGNORE = -100  # target of tokens the loss skips (padding, tags unseen in training)
train, dev = data.load_atis("train"), data.load_atis("dev")
words = Vocab.from_corpus(train.sentences)
tags = Vocab.from_corpus(train.tags, pad_token=None, unk_token=None)
train_ids, train_lengths = words.encode_batch(train.sentences)  # (N, T_max), (N,)
train_tags, _ = tags.encode_batch(train.tags, pad_value=IGNORE)  # (N, T_max)
dev_ids, dev_lengths = words.encode_batch(dev.sentences)  # unseen words -> <unk>
dev_tags, _ = batching.pad_sequences(
    [[tags.stoi.get(t, IGNORE) for t in s] for s in dev.tags], IGNORE
)  # (N_dev, T_max)
unseen = sum(t not in tags for s in dev.tags for t in s)
print(
    f"train {len(train)}, dev {len(dev)} queries; {len(words)} words, {len(tags)} tags"
)
print(f"dev tokens scored: {int((dev_tags != IGNORE).sum())}, ignored: {unseen}")

# %% [markdown]
# The model is chapter 5's tagger, `classifiers.WordTagger` (word embeddings, an
# encoder, a linear layer per token), here with learned position vectors (its default;
# chapter 5 chose the relative bias) and with its encoder replaced by a deep stack whose
# norm we choose. No dropout, so that only the placement differs.


# %%
def make_tagger(n_layers, norm_first, norm="layer", seed=0):
    """Chapter 5's tagger with a deep encoder of the given norm placement and kind."""
    torch.manual_seed(seed)
    cfg = classifiers.ClassifierConfig(
        len(words),
        len(tags),
        max_len=64,
        d_model=d_model,
        n_heads=n_heads,
        d_ff=d_ff,
        n_layers=1,
        dropout=0.0,
        pad_id=words.pad_id,
    )  # fmt: skip  (n_layers=1: this stack is replaced below)
    model = classifiers.WordTagger(cfg)
    model.body.encoder = blocks.Encoder(
        n_layers, d_model, n_heads, d_ff, norm_first=norm_first, norm=norm
    )  # a fresh stack; the rest of the tagger is unchanged
    return model.to(run.device)


model = make_tagger(depth, norm_first=True)
print(type(model.body.encoder).__name__, len(model.body.encoder.layers), "blocks,")
print(f"{params.count_params(model):,} parameters")

# %% [markdown]
# The loss is the cross-entropy per scored token. A model that ignores the words and
# predicts every token with the training frequencies $p(\text{tag})$ scores
#
# $$
# \mathcal{L}_\text{prior} = -\frac{1}{N}\sum_{t} \log p(y_t)
# $$
#
# on the dev tokens. That is the bar: a stack that does not get below it has learned
# nothing from the words.

# %%
counts = torch.bincount(train_tags[train_tags != IGNORE], minlength=len(tags))
log_prior = (counts.double() / counts.sum()).log()  # (C,): log p(tag)
prior_loss = -log_prior[dev_tags[dev_tags != IGNORE]].mean().item()
report.glue("prior_loss", prior_loss, "{:.2f}")
print(f"dev loss of the tag frequencies alone: {prior_loss:.3f} nats per token")


# %% [markdown]
# Chapter 5's plumbing serves unchanged: `batching.PaddedBatches` draws training batches
# of queries of similar length (and, with `shuffle=False`, the dev batches in a fixed
# order), `classifiers.token_loss` is the loss per scored token, and
# `classifiers.mean_token_loss` averages it over every scored dev token (not a mean
# of batch means).


# %%
def tag_batches(seed):
    """Shuffled training batches (ids, tags) of queries of similar length."""
    return batching.PaddedBatches(
        train_ids, train_lengths, train_tags, batch_size, seed
    )


dev_batches = batching.PaddedBatches(dev_ids, dev_lengths, dev_tags, 128, shuffle=False)
ids, y = next(iter(tag_batches(seed=0)))
print("a training batch:", tuple(ids.shape), tuple(y.shape))
T = int(train_lengths[:64].max())
probe = train_ids[:64, :T], train_tags[:64, :T]  # the first 64 queries, for section 3
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
    models = [make_tagger(24, first, seed=s).cpu() for s in range(n_init_seeds)]
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
# after its last block (`blocks.Encoder` adds it as `final_norm`). On the right, the
# tokens of a query drift towards the same direction as the stack gets deeper, in both
# kinds, and faster in post-norm: after 24 blocks, the tokens of every post-norm
# initialisation are more alike than those of every pre-norm one. A linear layer on top
# of vectors that are much alike can do little more, at first, than predict the most
# frequent tags; keep that in mind for section 4.

# %% tags=["nbval-ignore-output"]
(rms_post, cos_post), (rms_pre, cos_pre) = profiles.values()  # (seeds, blocks)
print(f"mean (min–max) over {n_init_seeds} initialisations")
print(f"{'after block':>17}" + "".join(f"{i:>18}" for i in (1, 6, 12, 24)))
for name, stats in profiles.items():
    for what, v in zip(("RMS", "cosine"), stats):
        row = [f"{v[:, i].mean():.2f} ({v[:, i].min():.2f}–{v[:, i].max():.2f})"
               for i in (0, 5, 11, 23)]  # fmt: skip
        print(f"{name + ' ' + what:>17}" + "".join(f"{c:>18}" for c in row))
assert (rms_post - 1).abs().max() < 0.01  # post-norm: RMS 1 after every block
assert (rms_pre[:, -1] > 1.2 * rms_pre[:, 0]).all()  # pre-norm: grows with depth
assert (cos_post[:, -1] > cos_post[:, 0]).all() and (
    cos_pre[:, -1] > cos_pre[:, 0]
).all()
assert cos_post[:, -1].min() > cos_pre[:, -1].max()  # ... more so in post-norm, always

# %% [markdown]
# ### The gradient, layer by layer
#
# Xiong et al. {cite}`xiong2020layer` analysed both placements at initialisation. For
# post-norm they show that the gradients of the parameters near the output are large and
# do not shrink with depth; for pre-norm, that they are spread evenly over the layers
# and shrink as the stack gets deeper. We measure it on our task: build stacks of 6, 12
# and 24 blocks, compute the loss of one batch (the probe batch above), and take the norm
# of the gradient of each block's parameters,
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
    model = make_tagger(n_layers, norm_first, seed=seed)
    layers = model.body.encoder.layers
    return training.layer_gradient_norms(model, classifiers.token_loss, probe, layers)


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
    ax.set(
        xlabel="block (1 = nearest the input)",
        title=("pre-norm" if first else "post-norm") + ": gradient per block",
    )
    ax.legend()
axes[0].set_ylabel(f"‖∂loss/∂θ‖ of the block, mean of {n_init_seeds}")
fig.tight_layout()
plt.show()

# %% [markdown]
# To summarise each stack, average $g_l$ over its first quarter of blocks (nearest the
# input) and over its last quarter (nearest the output). The table gives the means over
# the initialisations, and the range of the ratio last/first over the initialisations
# taken one by one:

# %% tags=["nbval-ignore-output"]
quarters, ratios = {}, {}  # per (norm_first, L): values per initialisation
print(f"{'':>10}{'blocks':>7}{'first quarter':>15}{'last quarter':>14}"
      f"{'last/first':>12}{'min–max':>12}")  # fmt: skip
for (first, L), g in grads.items():  # g: (seeds, L)
    q = L // 4  # blocks per quarter
    low, high = g[:, :q].mean(1), g[:, -q:].mean(1)  # (seeds,) each
    quarters[first, L], ratios[first, L] = (low, high), high / low
    name, r = ("pre-norm" if first else "post-norm"), ratios[first, L]
    span = f"{r.min():.2f}–{r.max():.2f}"  # last/first over the initialisations
    print(f"{name:>10}{L:>7}{low.mean():>15.3f}{high.mean():>14.3f}"
          f"{high.mean() / low.mean():>12.2f}{span:>12}")  # fmt: skip
mean_ratio = {k: v[1].mean().item() / v[0].mean().item() for k, v in quarters.items()}
separate = [L for L in grad_depths if ratios[False, L].min() > ratios[True, L].max()]
for L in grad_depths:
    assert 0.8 < mean_ratio[True, L] < 1.2  # pre-norm: flat along the stack
    assert mean_ratio[False, L] > mean_ratio[True, L] + 0.1  # post-norm: top-heavy
    # post-norm's top blocks get larger gradients, for every initialisation
    assert quarters[False, L][1].min() > quarters[True, L][1].max()
top_post = [quarters[False, L][1].mean().item() for L in grad_depths]
assert min(top_post) > 0.95 * top_post[0]  # ... and not smaller in deeper stacks
others = [L for L in grad_depths if L not in separate]  # depths where seeds overlap
depths_text = lambda Ls: ", ".join(map(str, Ls)) + " blocks"
if separate:
    where = "every post-norm initialisation is more top-heavy than every pre-norm one "
    where += f"at {depths_text(separate)}"
    where += f"; at {depths_text(others)} single ones overlap" if others else ""
else:
    where = "single post-norm and pre-norm initialisations overlap at every depth"
report.glue("separate", where)
report.glue("ratio_post_24", mean_ratio[False, 24], "{:.1f}")
report.glue("ratio_pre_24", mean_ratio[True, 24], "{:.1f}")
print("top quarter, post-norm, by depth:", ", ".join(f"{v:.3f}" for v in top_post))

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
# rate and a warm-up, and pre-norm does not. (Their analysis also predicts that
# pre-norm's gradient shrinks slowly as the stack gets deeper; the pre-norm rows of the
# table show how much of that these few initialisations measure, and we assert
# nothing about it.)

# %% [markdown]
# ## 4. Training deep stacks: learning rate and warm-up
#
# Now train 12-block taggers of both kinds with AdamW, from several seeds. The full
# profile trains every learning rate both with a constant rate and with a linear warm-up
# over the first quarter of the steps (`training.train(..., warmup=...)`). To fit a
# laptop's minute, the quick profile trains one setting only, the one the comparison
# below rests on: the largest rate, without warm-up. The seed sets the initialisation
# and the order of the batches; the same seeds are used for both placements. There is
# no gradient clipping (`clip=0`), so that nothing but the placement and the schedule
# keeps training stable. A run *diverges* when its loss becomes NaN or infinite; we also
# mark the runs that end no better than the prior ({glue:text}`prior_loss` nats): above
# it, or less than 0.02 below it.


# %%
def train_tagger(norm_first, lr, warmup, seed, norm="layer", n_layers=depth):
    """Train one tagger; return its final dev loss (inf if training diverged)."""
    model = make_tagger(n_layers, norm_first, norm, seed)
    training.train(
        model, tag_batches(seed), classifiers.token_loss, steps, lr=lr, warmup=warmup,
        clip=0,
    )  # fmt: skip
    loss = classifiers.mean_token_loss(model, dev_batches)
    return loss if math.isfinite(loss) else math.inf


def summary(losses):
    """mean ± std over seeds; k† runs diverged, k= learned nothing."""
    ok = [v for v in losses if math.isfinite(v)]
    spread = statistics.stdev(ok) if len(ok) > 1 else 0.0
    text = f"{statistics.mean(ok):.3f} ± {spread:.3f}" if ok else "—"
    flat = sum(v >= prior_loss - 0.02 for v in ok)
    return text + f"  {len(losses) - len(ok)}† {flat}="


def train_grid(norm_first):
    """Final dev losses of every (lr, warm-up) setting for one placement, per seed."""
    name = "pre" if norm_first else "post"
    return {
        (name, lr, w): [train_tagger(norm_first, lr, w, s) for s in range(n_seeds)]
        for lr, w in grid
    }


# %% [markdown]
# First the post-norm stacks, then the pre-norm ones, from the same seeds:

# %%
final = train_grid(norm_first=False)  # (placement, lr, warm-up) -> losses per seed
print(f"post-norm: {len(final)} settings × {n_seeds} seeds")

# %%
final |= train_grid(norm_first=True)
print(f"pre-norm: {len(final) // 2} settings × {n_seeds} seeds")

# %% [markdown]
# The final dev loss per setting, mean ± standard deviation over the seeds; `k†` counts
# the runs that diverged and `k=` those that ended no better than the prior:

# %% tags=["nbval-ignore-output"]
print(f"{'lr':>8} {'warm-up':>8} {'post-norm':>26} {'pre-norm':>26}")
for lr, w in grid:
    cells = [summary(final[p, lr, w]) for p in ("post", "pre")]
    print(f"{lr:>8g} {w:>8} {cells[0]:>26} {cells[1]:>26}")


def learned(losses):
    """How many runs ended clearly below the prior (a diverged run never does)."""
    return sum(v < prior_loss - 0.02 for v in losses)


top, low = max(lrs), min(lrs)
post_top, pre_top = final["post", top, 0], final["pre", top, 0]
# The seeds spread over a few tenths of a nat: assert on at least 2 runs, with margin.
clearly = [sum(v < prior_loss - 0.1 for v in runs) for runs in (pre_top, post_top)]
assert clearly[0] >= 2 and clearly[1] == 0  # pre-norm clearly learned; post-norm not
assert sum(v < min(post_top) - 0.1 for v in pre_top) >= 2  # pre-norm beats post-norm
n_below = sum(v < min(post_top) for v in pre_top)  # glued, not asserted (no margin)
pre_below = f"{n_below} of the {n_seeds} pre-norm runs ended"
if n_below == n_seeds:
    pre_below = "every pre-norm run ended"
report.glue("pre_below", pre_below)


def of_runs(k):
    """'all 3 runs' or '2 of the 3 runs'."""
    return f"all {k} runs" if k == n_seeds else f"{k} of the {n_seeds} runs"


report.glue("pre_clearly", of_runs(clearly[0]))
post_level = "no post-norm run ended clearly below the prior"  # learned(): 0.02 below
if learned(post_top) > 0:  # below the prior, but by less than 0.1 (asserted)
    post_level = f"only {learned(post_top)} of the {n_seeds} post-norm runs ended "
    post_level += "below the prior, by less than 0.1 nats"
report.glue("post_level", post_level)
report.glue("top_lr", top, "{:g}")
report.glue("pre_top", statistics.mean(pre_top), "{:.2f}")
report.glue("post_top", min(post_top), "{:.2f}")
more = "The quick profile trains this setting only; the full profile adds the rest."
if (top, warmup) in grid:  # the full profile: a warm-up, and smaller rates
    at_low = [v for (_, lr, _), runs in final.items() if lr == low for v in runs]
    more = (
        f"With a warm-up, {learned(final['post', top, warmup])} of the {n_seeds} "
        "post-norm runs at that rate got below the prior, and the pre-norm runs "
        f"ended at {statistics.mean(final['pre', top, warmup]):.2f} on average (a "
        "warm-up spends a quarter of the steps below the full rate). "
        f"At the smallest rate ({low:g}), {learned(at_low)} of the {len(at_low)} "
        f"runs of either kind got below the prior in {steps} steps."
    )
report.glue("grid_more", more)
for p in ("post", "pre"):
    seeds = ", ".join(f"{v:.3f}" for v in final[p, top, 0])
    print(f"lr {top:g}, no warm-up, {p}-norm, seed by seed: {seeds}")

# %% tags=["hide-input"]
fig, ax = plt.subplots(figsize=plotting.WIDE)
plotting.seed_dots(
    [f"lr {lr:g}\n" + (f"warm-up {w}" if w else "no warm-up") for lr, w in grid],
    {f"{p}-norm": [final[p, lr, w] for lr, w in grid] for p in ("post", "pre")},
    ax,
    failed_at=prior_loss,  # diverged runs (k†) have no loss to plot
    ylabel="final dev loss per token",
    title=f"{depth}-block taggers after {steps} steps",
)
ax.axhline(prior_loss, color="gray", ls=":", label="tag frequencies alone")
ax.legend()
plt.show()

# %% [markdown]
# At the largest learning rate ({glue:text}`top_lr`) and without warm-up,
# {glue:text}`pre_below` below every post-norm run (mean dev loss
# {glue:text}`pre_top`, while the best post-norm run ends at {glue:text}`post_top`), and
# {glue:text}`post_level`: the deep post-norm stack stays stuck predicting the tag
# frequencies (its dots sit near the prior's line), while the pre-norm stack learns
# ({glue:text}`pre_clearly` ended more than 0.1 nats below the prior).
# {glue:text}`grid_more`
#
# Two cautions. These runs are short ({glue:text}`steps` updates); the full profile
# (`profile = "full"`, with the step counts of the parameters cell, many times these)
# adds the small rates and the warm-up, and gives them time.
# And Xiong et al. do train post-norm transformers, with a long warm-up and a small
# rate. What we measured is that, in the same number of steps, no run of a deep
# post-norm stack ended 0.1 nats below the prior at a learning rate where a pre-norm one
# learned well; not that post-norm cannot be trained.
#
# Is the post-norm block itself at fault, or its depth? The same post-norm tagger with 2
# blocks instead of 12, at the same largest rate without warm-up:

# %% tags=["nbval-ignore-output"]
shallow = [train_tagger(False, top, 0, s, n_layers=2) for s in range(n_seeds)]
# No 12-block run got 0.1 below the prior (asserted above); a 2-block one does:
assert min(shallow) < prior_loss - 0.1
report.glue("shallow_learned", learned(shallow))
report.glue("shallow_mean", statistics.mean(shallow), "{:.2f}")
print("post-norm, 2 blocks:", ", ".join(f"{v:.3f}" for v in shallow))
print(f"prior: {prior_loss:.3f}; 12 post-norm blocks: {summary(final['post', top, 0])}")

# %% [markdown]
# {glue:text}`shallow_learned` of the {glue:text}`n_seeds` shallow runs got below the
# prior, with a mean of {glue:text}`shallow_mean`: at this rate, the post-norm block
# can learn when the stack is shallow, so depth makes the trouble worse.
# {cite:t}`wang2019learning` made the same observation at scale: their deep post-norm
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
theirs = nn.RMSNorm(16, eps=1e-6)
with torch.no_grad():
    ours.weight.normal_(1.0, 0.5)  # a non-trivial γ, as after training
    theirs.weight.copy_(ours.weight)
x = torch.randn(2, 5, 16) * 3 + 1  # (B, T, d_model), not centred
torch.testing.assert_close(rms_norm(x, ours.weight), ours(x), atol=1e-6, rtol=1e-6)
torch.testing.assert_close(ours(x), theirs(x), atol=1e-6, rtol=1e-6)
print("rms_norm == norms.RMSNorm == torch.nn.RMSNorm, within 1e-6")
print({name: tuple(p.shape) for name, p in ours.named_parameters()})

# %% [markdown]
# Unlike LayerNorm, RMSNorm keeps each token's mean: a constant vector is not mapped to
# zero but to a vector of ones (times $\gamma$). Exercise 1 shows that LayerNorm is
# exactly RMSNorm applied to the centred vector.

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
    print(
        f"d={d}: LayerNorm {params.count_params(norms.LayerNorm(d))}, "
        f"RMSNorm {params.count_params(norms.RMSNorm(d))}"
    )
n_ln = params.count_params(make_tagger(depth, True, "layer"))
n_rms = params.count_params(make_tagger(depth, True, "rms"))
print(f"pre-norm tagger: LayerNorm {n_ln:,}, RMSNorm {n_rms:,} parameters")
print(f"saved: {n_ln - n_rms} = (2·{depth} + 1)·{d_model}, {(n_ln - n_rms) / n_ln:.2%}")

# %% [markdown]
# A negligible share of the model. The usual argument for RMSNorm is time: it skips one
# reduction (the mean) and one subtraction per token, forward and backward.
#
# ### What it saves: time
#
# Per token, LayerNorm computes two statistics (the mean, then the mean square of the
# centred vector) and one more subtraction; RMSNorm computes one statistic. How much
# time that saves depends on how each is implemented, so we time forward plus backward
# of three pairs on the same activations: the two written the same way in plain tensor
# code (`rms_norm` above and chapter 3's formula); the package's modules (its LayerNorm
# calls PyTorch's fused `F.layer_norm`, its RMSNorm is plain code like `rms_norm`); and
# PyTorch's built-in `nn.LayerNorm` and `nn.RMSNorm`.
# A last pair times a whole pre-norm block with either norm. On a CPU we count the
# processor time of this process (one thread), not the wall-clock time, which on a busy
# machine also counts the time other programs run.


# %%
def plain_layer_norm(x, weight, bias, eps=1e-5):
    """Chapter 3's LayerNorm, written in the style of `rms_norm`. Shapes: (..., d)."""
    mu = x.mean(dim=-1, keepdim=True)  # (..., 1)
    var = (x - mu).pow(2).mean(dim=-1, keepdim=True)  # (..., 1): biased variance
    return (x - mu) * torch.rsqrt(var + eps) * weight + bias


def fwd_bwd(fn, shape):
    """A function that runs forward + backward of `fn` on a fixed random input."""
    x = torch.randn(*shape, device=run.device, requires_grad=True)
    g = torch.randn(*shape, device=run.device)  # the gradient arriving from above

    def step():
        x.grad = None
        fn(x).backward(g)

    return step


# %% tags=["nbval-ignore-output"]
shape = run.pick(quick=(8, 128, 256), full=(32, 512, 1024))  # (B, T, d)
d = shape[-1]
w = torch.ones(d, device=run.device, requires_grad=True)  # γ
b = torch.zeros(d, device=run.device, requires_grad=True)  # β
pairs = {  # name -> (LayerNorm version, RMSNorm version)
    "plain code": (lambda x: plain_layer_norm(x, w, b), lambda x: rms_norm(x, w, 1e-5)),
    "package": (norms.LayerNorm(d), norms.RMSNorm(d, eps=1e-5)),
    "torch built-in": (nn.LayerNorm(d), nn.RMSNorm(d, eps=1e-5)),
    "pre-norm block": tuple(
        blocks.EncoderBlock(d, 4, 4 * d, norm_first=True, norm=k) for k in norms.NORMS
    ),
}
seconds = {}  # name -> (LayerNorm, RMSNorm)
for name, fns in pairs.items():
    t = []
    for fn in fns:
        fn = fn.to(run.device) if isinstance(fn, nn.Module) else fn
        # CPU seconds of this process on a CPU, synchronised wall-clock time on a GPU
        t.append(benchmark.median_time(fwd_bwd(fn, shape), 7, 1, run.device, "auto"))
    seconds[name] = t
ratio = {name: t_rms / t_ln for name, (t_ln, t_rms) in seconds.items()}
for name, key in (("plain", "plain code"), ("torch", "torch built-in")):
    report.glue(f"ratio_{name}", ratio[key], "{:.2f}")
report.glue("ratio_block", ratio["pre-norm block"], "{:.2f}")
for name, (t_ln, t_rms) in seconds.items():
    print(f"{name:>15}: LayerNorm {t_ln * 1e3:7.2f} ms, RMSNorm {t_rms * 1e3:7.2f} ms, "
          f"ratio {ratio[name]:.2f}")  # fmt: skip

# %% [markdown]
# On the machine that executed this page, RMSNorm took {glue:text}`ratio_plain` times
# the time of LayerNorm when both are written the same way: the difference is the cost
# of one reduction and one subtraction, forward and backward. Between PyTorch's own
# modules the ratio was {glue:text}`ratio_torch`. Why can a module that does less work
# take longer? Look at the operations autograd records for each backward pass:


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
print("nn.LayerNorm:", backward_nodes(nn.LayerNorm(16)(x)))
print("nn.RMSNorm:  ", backward_nodes(nn.RMSNorm(16)(x)))

# %% [markdown]
# PyTorch's LayerNorm has one hand-written kernel for its backward pass. Its RMSNorm, in
# this version and on a CPU, is differentiated as a chain of generic operations (power,
# mean, add, reciprocal square root, two products), each of which reads and writes whole
# tensors. How an operation is implemented can matter more than the arithmetic it
# saves. Finally, in a whole block, where the matrix products dominate, the ratio was
# {glue:text}`ratio_block`: the norms are a small part of a transformer's time. (Timings
# vary from machine to machine, and none is asserted.)
#
# ### What it does to training
#
# Last, the pre-norm tagger with RMSNorm in place of LayerNorm, trained at the largest
# rate without warm-up from the same seeds (so each seed starts from the same
# attention and feed-forward weights):

# %% tags=["nbval-ignore-output"]
rms_runs = [train_tagger(True, top, 0, s, norm="rms") for s in range(n_seeds)]
ln_runs = final["pre", top, 0]
print(f"pre-norm + LayerNorm: {summary(ln_runs)}")
print(f"pre-norm + RMSNorm:   {summary(rms_runs)}")
diffs = [a - b for a, b in zip(rms_runs, ln_runs)]  # same seed, same initial weights
print("RMSNorm - LayerNorm, seed by seed:", ", ".join(f"{v:+.3f}" for v in diffs))
rms_clearly = sum(v < prior_loss - 0.1 for v in rms_runs)
assert rms_clearly >= 2  # RMSNorm learns as well (at least 2 runs, as LayerNorm)
report.glue("rms_clearly", of_runs(rms_clearly))
if all(v > 0 for v in diffs) or all(v < 0 for v in diffs):
    word = "higher" if diffs[0] > 0 else "lower"
    verdict = f"RMSNorm ended {word} than LayerNorm for every seed"
else:
    verdict = "the sign of the difference changes from seed to seed"
report.glue("rms_gap", statistics.mean(diffs), "{:+.3f}")
report.glue("rms_verdict", verdict)
report.glue("chance", 2 * 0.5**n_seeds, "{:.2f}")
print(verdict)

# %% [markdown]
# Both learn: with RMSNorm {glue:text}`rms_clearly` ended more than 0.1 nats below the
# prior, with LayerNorm {glue:text}`pre_clearly`.
# Seed by seed, RMSNorm's final loss minus LayerNorm's averages
# {glue:text}`rms_gap` nats, and {glue:text}`rms_verdict`. Weigh that against the
# number of seeds: if the two norms were equally good, each seed's difference would be
# positive or negative with even odds, and all seeds would agree in sign by chance with
# probability $2 \cdot 2^{-n}$, here {glue:text}`chance`. On large tasks (translation,
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
#   larger gradients than pre-norm's for every initialisation.
# - Trained for the same number of steps without warm-up, the 12-block pre-norm tagger
#   learns at a large learning rate where no post-norm run gets 0.1 nats below the
#   prior, while a 2-block post-norm tagger can learn there; the full profile's table
#   also shows what a warm-up and smaller rates change.
# - RMSNorm keeps only LayerNorm's rescaling: $d$ instead of $2d$ parameters and fewer
#   operations (whether that is faster depends on the kernels). On our task it learned
#   too; its final loss differed from LayerNorm's by {glue:text}`rms_gap` nats on
#   average over {glue:text}`n_seeds` seeds.

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
# ### Exercise 3: how many numbers do the norms hold?
#
# Write `norm_param_count(n_layers, d_model, norm, norm_first)`: the number of
# parameters in the normalisation layers of
# `blocks.Encoder(n_layers, d_model, ..., norm=norm, norm_first=norm_first)`, with
# `norm` either `"layer"` or `"rms"`. Count the norms in the diagram of section 1
# first, then remember what a pre-norm *stack* adds at its end.


# %%
def norm_param_count(n_layers, d_model, norm, norm_first):
    # YOUR CODE HERE
    raise NotImplementedError


# %% tags=["solution", "hide-cell"]
def norm_param_count(n_layers, d_model, norm, norm_first):
    per_norm = (2 if norm == "layer" else 1) * d_model  # γ and β, or γ alone
    n_norms = 2 * n_layers + (1 if norm_first else 0)  # two per block (+ final)
    return n_norms * per_norm


# %%
checks.check_norm_param_count(norm_param_count)

# %% [markdown]
# ## What we added to the package
#
# - `transformer_book.norms.RMSNorm`: root-mean-square normalisation with $\gamma$ only,
#   statistics in float32; `norms.make_norm("layer" | "rms", d_model)` builds either
#   norm.
# - `transformer_book.blocks.EncoderBlock(..., norm_first=..., norm=...)` and the same
#   options on `blocks.Encoder` (which adds the final norm of a pre-norm stack).
# - `transformer_book.diagrams.norms.post_vs_pre_norm`: the diagram of section 1.
# - `transformer_book.checks`: `check_layer_norm_via_rms`, `check_rms_norm_half`,
#   `check_norm_param_count`.
