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
# # 9. Sharing heads: MHA, GQA, MQA and the KV cache
#
# A language model writes one token at a time, and each new token needs the keys and
# values of every token before it. This chapter describes a small GPT (the package's
# `gpt.GPT`), loads one that the book trained on Shakespeare, and then makes its
# decoding cheap twice over: first by
# keeping the keys and values it has already computed (the KV cache), then by letting
# several query heads share one key/value head, so that the cache itself shrinks. By the
# end you will be able to
#
# - explain why a causal model may keep its keys and values, and decode with a KV cache
#   that gives exactly the tokens of decoding without one;
# - measure how much faster cached decoding is, and how the gain grows with the length;
# - compute the size of a cache, $2 \cdot n_\text{layers} \cdot n_\text{kv heads} \cdot
#   d_\text{head} \cdot T \cdot B$ values, for Llama-2-7B and Mistral-7B, and check it
#   against the bytes of real tensors;
# - explain why a large model's decoding step waits on memory, so that there a smaller
#   cache is also a faster one, and name the levers that shrink a cache;
# - build multi-query and grouped-query attention, and check them against PyTorch's
#   `enable_gqa` and against multi-head attention with copied weights;
# - turn a trained multi-head model into a grouped-query one by averaging heads, and
#   measure what that costs and how much a little more training wins back.

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
import dataclasses
import statistics

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

from transformer_book import (
    attention,
    baselines,
    benchmark,
    blocks,
    checkpoints,
    checks,
    data,
    decoder,
    decoding_speed,
    diagrams,
    gpt,
    grouped_heads,
    kv_cache,
    lm_data,
    masks,
    plotting,
    report,
    runtime,
)

# %% tags=["parameters"]
device = "auto"  # "auto": CUDA, else Apple MPS, else the CPU
profile = "auto"  # "auto": quick on every device; "full" by name

# %%
run = runtime.setup(device, profile, seed=0, cpu_threads=1)  # small models: 1 thread
print(run)
# the character-level GPT the book trained once (scripts/train_checkpoints.py)
checkpoint = "shakespeare-char-gpt"
n_eval_batches = run.pick(8, None)  # held-out batches scored (None: all of them)
# section 5's live speed measurement: the model's layers and width (smaller than the
# benchmark script's 6 and 384 in the quick profile), sequences, tokens generated
speed_layers, speed_width = run.pick((4, 256), (6, 384))
speed_batch, speed_tokens = run.pick(1, 64), run.pick(128, 1024)
# section 8: steps of further training after the conversion to GQA, and its seeds
uptrain_steps, uptrain_lr, seeds = run.pick(20, 200), 1e-3, (0, 1, 2)

# %% [markdown]
# ## 1. A small GPT
#
# A decoder-only language model reads a text and predicts, at every position, the next
# token. Chapter 3's encoder block already has everything it needs. Give it a **causal**
# mask, so that position $t$ attends only to positions $1, \dots, t$, put the norms before
# the sublayers (pre-norm, chapter 6), and stack it: that is GPT's block
# {cite}`radford2019language`. `gpt.GPT` is a token embedding, learned position vectors
# (or RoPE), a stack of `blocks.EncoderBlock` with a causal mask, a final norm, and a
# linear layer back to the vocabulary whose weights are the embedding's.
#
# The text is Tiny Shakespeare, read character by character: the vocabulary is the 65
# characters that occur in it. The last 10 % is held out to measure the model on.

# %%
text = data.load_tinyshakespeare()
chars = lm_data.char_vocab(text)  # the sorted distinct characters
ids = torch.tensor(chars.encode(list(text)))  # (N,): one id per character
train_ids, heldout_ids = lm_data.split_stream(ids, 0.9)
print(f"{len(text):,} characters, {len(chars)} distinct")
print(f"{len(train_ids):,} to train on, {len(heldout_ids):,} held out")
print(repr(text[:72]))

# %% [markdown]
# A model worth studying needs more training than a chapter can wait for, so the book
# trained one once, with a recipe kept in the repository
# (`scripts/train_checkpoints.py`, `make checkpoints`), and ships its weights as a
# *checkpoint*: `checkpoints.load` reads them, checks their sha256 digest against the
# checkpoint's *card*, and rebuilds the model from the configuration the card records.
# Its blocks are the encoder blocks of chapter 3, pre-norm; its positions are RoPE
# (chapter 4).

# %%
model, card = checkpoints.load(checkpoint, device=run.device)
config = model.config  # the gpt.GPTConfig it was built from
n_layers, n_heads, d_model, context = (
    config.n_layers, config.n_heads, config.d_model, config.max_len
)  # fmt: skip
print(config)
block = model.blocks.layers[0]
print(f"a blocks.EncoderBlock: {isinstance(block, blocks.EncoderBlock)}")
print(f"pre-norm: {block.norm_first}, layers: {len(model.blocks.layers)}")
tied = model.lm_head.weight is model.tok_emb.weight
print(f"output head shares the embedding matrix: {tied}")
print(f"parameters: {sum(p.numel() for p in model.parameters()):,}")
print(f"trained for {card['steps']:,} steps on {card['tokens_seen']:,} characters")

# %% [markdown]
# The card says how it was trained: by chapter 14's `gpt_training.run`, with the recipe
# below (AdamW, warm-up, cosine decay; chapter 14 explains each choice), on the first
# 90 % of the text, in {glue:text}`cpu_minutes` CPU-minutes. It also records the model's
# held-out loss and, beside it, what the two simplest models of the same text score on
# the same held-out characters (`transformer_book.baselines`, fitted on the training
# split; `baselines.window_losses` scores both): a **unigram** model that predicts every character from its frequency, and a
# **bigram** model that predicts it from the one character before it. A model that
# guessed uniformly among the 65 characters would score $\ln 65 \approx 4.17$ nats.

# %%
recipe = card["recipe"]
report.glue("cpu_minutes", card["train_cpu_seconds"] / 60, "{:.0f}")
report.glue_all(dict(n_steps=f"{card['steps']:,}", context_chars=f"{context}"))
shown = ("steps", "batch_size", "context", "lr", "warmup", "decay", "min_lr_factor")
print({k: recipe[k] for k in shown})
print(f"held-out characters scored: {card['data']['heldout_scored']:,}")

# %% [markdown]
# An example is a window of `context` characters; the targets are the same window
# shifted by one, so every position is a next-character prediction. Training drew its
# windows at random places, from a seed (`lm_data.WindowBatches`);
# `lm_data.sequential_windows` cuts the held-out text into consecutive windows, so that
# `lm_data.mean_loss` scores each held-out character at most once: here the first
# {glue:text}`n_heldout` of them. The loss is `lm_data.next_token_loss`, the
# cross-entropy averaged over every position. The table puts the card's numbers (the
# whole held-out text) beside the same three models scored here, on these characters.

# %%
windows = lm_data.sequential_windows(heldout_ids, context, recipe["batch_size"])
heldout = windows[:n_eval_batches]  # (inputs, targets), each (batch_size, context)
report.glue("n_heldout", f"{sum(y.numel() for _, y in heldout):,}")  # scored
x, y = heldout[0]
print(f"{len(heldout)} batches of inputs and targets", tuple(x.shape), tuple(y.shape))
print(repr("".join(chars.decode(x[0, :30].tolist()))))
print(repr("".join(chars.decode(y[0, :30].tolist()))))

# %% tags=["nbval-ignore-output"]
base_loss = lm_data.mean_loss(model, heldout)
# fitted on train_ids; the bigram reads each target's input, the character before it
here = baselines.window_losses(train_ids, heldout, len(chars)) | {"the GPT": base_loss}
on_card = {**card["baselines"], "the GPT": card["heldout_loss"]}
print(f"{'nats per character':>18} | {'card (all held out)':>19} | {'here':>6}")
for name in here:
    print(f"{name:>18} | {on_card[name]:19.3f} | {here[name]:6.3f}")
report.glue("base_loss", base_loss, "{:.2f}")
report.glue("bigram_loss", here["bigram"], "{:.2f}")
assert here["the GPT"] < here["bigram"] - 0.5 and on_card["the GPT"] < 1.75

# %% [markdown]
# Reading up to {glue:text}`context_chars` characters back instead of one, the GPT
# scores {glue:text}`base_loss` nats per character on these held-out characters, the
# bigram {glue:text}`bigram_loss`. The two columns of the table score different
# characters (the card all of the held-out text, this page the first
# {glue:text}`n_heldout`), so compare models within a column, not a model across
# columns. The training curve, from the card (every step's loss on the batch it
# trained on), with the card's held-out losses as lines:

# %% tags=["hide-input"]
held_out = {"the GPT, held out": card["heldout_loss"]}
held_out |= {f"{k}, held out": card["baselines"][k] for k in ("bigram", "unigram")}
ax = plotting.training_curve(card["losses"], held_out, window=50,
                             ylabel="cross-entropy (nats per character)",
                             title="The shipped GPT against two baselines")  # fmt: skip
ax.legend(loc="upper right", bbox_to_anchor=(1, 0.92))  # below the unigram line
plt.show()

# %% [markdown]
# ## 2. Generating text, one token at a time
#
# To write, the model reads a prompt, takes the logits at the last position, appends
# the most likely token and repeats: *greedy* decoding. Drawing the next token at random
# from the softmax instead (with a temperature, top-$k$ or top-$p$) is chapter 14's
# subject; what this chapter studies, the cost of the loop, is the same however the
# token is picked. The model's most likely next characters after "ROMEO:\nI will":

# %% tags=["nbval-ignore-output"]
prompt = torch.tensor([chars.encode(list("ROMEO:\nI will"))], device=run.device)
model.eval()
with torch.no_grad():
    probs = model(prompt)[0, -1].softmax(-1)  # (V,): the next character's
top = probs.topk(4)
print(", ".join(f"{chars.itos[i]!r} {p:.2f}" for p, i in zip(top.values, top.indices)))
assert abs(top.values.sum().item() - 1) < 0.5  # a few characters hold most of it

# %% [markdown]
# `GPT.generate(prompt, n, temperature=0)` runs the loop greedily. 80 characters from
# the loaded model (its held-out loss is {glue:text}`base_loss` nats per character
# here, after {glue:text}`n_steps` steps of training: expect real words among invented
# ones, and, from greedy decoding, repetition, which section 4 comes back to):

# %% tags=["nbval-ignore-output"]
out = model.generate(prompt, 80, temperature=0)  # (1, T0 + 80)
print("".join(chars.decode(out[0].tolist())))
assert out[0, prompt.shape[1]] == top.indices[0]  # the first new one: the most likely

# %% [markdown]
# Without any cache, every step feeds the whole text so far through the model again.
# Generating $n$ tokens after a prompt of $T_0$ therefore reads
# $\sum_{t=0}^{n-1} (T_0 + t) = n T_0 + n(n-1)/2$ tokens, quadratic in $n$, although
# only $n$ of them are new (for a model whose window holds all $T_0 + n$ tokens; this
# page's model reads at most its last 64 characters, so for it the count stops growing
# faster than $n$ there):

# %%
T0 = prompt.shape[1]
for n in (10, 100, 1000):
    print(f"n = {n:4d}: tokens read without a cache {n * T0 + n * (n - 1) // 2:7,}")

# %% [markdown]
# ## 3. What repeats: the keys and values of earlier tokens
#
# In a causal model nothing at position $s$ depends on the tokens after it: not its
# embedding, not its attention (the mask hides the future), so not its hidden state in
# any layer, and not the key $k_s = h_s W_K$ and value $v_s = h_s W_V$ computed from it
# (with rotary positions the key is also turned by an angle that depends on $s$ alone;
# exercise 1 is about that angle).
# When token $t+1$ arrives, the keys and values of tokens $1, \dots, t$ in every layer
# are the ones the previous step already computed. A `kv_cache.KVCache` per layer catches
# them (the `cache=` argument, described in the next section; `kv_cache.filled_cache`
# reads a text with it); compare the keys after reading 40 characters with the keys
# after reading 50:

# %%
text_ids = heldout_ids[:50][None].to(run.device)  # (1, 50)
# a KVCache per layer, filled by model(ids, cache=...): the first 40 characters, all 50
short, long = (kv_cache.filled_cache(model, text_ids[:, :n]) for n in (40, 50))
for layer, (a, b) in enumerate(zip(short, long)):
    same = torch.allclose(a.keys, b.keys[:, :, :40], atol=1e-5) and torch.allclose(
        a.values, b.values[:, :, :40], atol=1e-5
    )
    print(f"layer {layer}: keys {tuple(b.keys.shape)}; first 40 unchanged: {same}")

# %% [markdown]
# Only the query of the new token, and its own key and value, are new. An encoder has no
# such luck: without the causal mask every token's state depends on every other token,
# so from the second layer on one more word changes all the keys. The same blocks, run
# without the mask:


# %%
def last_layer_keys_without_mask(n):
    cache = kv_cache.new_cache(n_layers)
    with torch.no_grad():
        x = model.tok_emb(text_ids[:, :n])  # (1, n, d_model); RoPE acts in attention
        model.blocks(x, mask=None, cache=cache)  # an encoder: every token sees all
    return cache[-1].keys  # (1, H, n, Dh)


a, b = last_layer_keys_without_mask(40), last_layer_keys_without_mask(50)
print("no mask: first 40 keys unchanged:", torch.allclose(a, b[:, :, :40], atol=1e-5))

# %% [markdown]
#
# ## 4. The KV cache
#
# So keep them. At step $t$ the layer computes $q_t, k_t, v_t$ for the new token only,
# appends
#
# $$K_{1:t} = \begin{bmatrix} K_{1:t-1} \\ k_t \end{bmatrix}, \qquad
# V_{1:t} = \begin{bmatrix} V_{1:t-1} \\ v_t \end{bmatrix},$$
#
# and attends with one query, $\mathrm{softmax}(q_t K_{1:t}^\top / \sqrt{d_k})\, V_{1:t}$
# {cite}`pope2023inference`. One query needs no mask: every cached key is in its past.
# The prompt is read in one pass that fills the cache (the *prefill*).

# %% tags=["hide-input"] mystnb={"image": {"alt": "Three decoding steps side by side. In each, the new token's key and value (k4 and v4, then k5 and v5, then k6 and v6) are appended as a highlighted bottom row to a K cache and a V cache that grow from 4 to 6 rows, and the new query attends to all cached rows. The 3 prompt rows were cached in one pass."}}
diagrams.kv_cache.cache_growth()
plt.show()

# %% [markdown]
# A `kv_cache.KVCache` is a buffer allocated once, with room for `max_len` positions,
# and a pointer, `seq_len`, to the first free row. `update(k, v)` writes the new keys
# and values into the next rows and returns the filled ones, a view of the buffer:
# nothing is copied but the new tokens' keys and values. (Growing the cache with
# `torch.cat` instead would copy all of it at every step; exercise 3 counts what that
# costs.) The shapes follow the heads, (B, heads, T, head_dim):

# %%
cache = kv_cache.KVCache(max_len=16)
for n_new in (5, 1, 1):  # a prompt of 5, then two single tokens
    k, v = cache.update(torch.randn(1, 4, n_new, 16), torch.randn(1, 4, n_new, 16))
    print(f"appended {n_new}: keys {tuple(k.shape)}, seq_len {cache.seq_len}, "
          f"room for {cache.capacity}")  # fmt: skip

# %% [markdown]
# `MultiHeadAttention.forward(..., cache=...)` does the rest: it computes the new tokens'
# keys and values, appends them, and attends over everything cached. With RoPE the new
# keys are rotated by their real positions, which start at `cache.seq_len`
# (`RotaryEmbedding` takes that `offset`); with learned positions, `GPT.forward` adds the
# position vectors from the offset on. Here is greedy decoding with a cache, written out:
# the first step reads the prompt (the prefill), every later step only the newest token.

# %% tags=["nbval-ignore-output"]
n_new = 40  # the prompt and the new tokens fit in the context
cache = kv_cache.new_cache(n_layers)  # one KVCache per layer
ids_out, step_in, step_logits = prompt, prompt, []
with torch.no_grad():
    for _ in range(n_new):
        logits = model(step_in, cache=cache)[:, -1]  # (1, V): the last position's
        step_in = logits.argmax(-1, keepdim=True)  # (1, 1): greedy
        ids_out = torch.cat((ids_out, step_in), dim=1)
        step_logits.append(logits)
print(f"cache: {cache[0].seq_len} positions in each of {len(cache)} layers")
greedy = "".join(chars.decode(ids_out[0].tolist()))
print(repr(greedy))
assert cache[0].seq_len == T0 + n_new - 1  # the last new token was never read
words = greedy[T0:].split()
assert len(set(words)) > len(words) // 2  # not one word over and over

# %% [markdown]
# (Always taking the most likely character, greedy decoding tends to come back to words
# it has just written; that is why chapter 14 samples.) The check that matters: the same
# tokens as decoding without a cache, and at every step the same logits as one uncached
# pass over the finished text (up to float rounding).

# %%
plain = model.generate(prompt, n_new, temperature=0, use_cache=False)
with torch.no_grad():
    full = model(plain[:, :-1])[0, T0 - 1 :]  # (n_new, V): every step's logits at once
cached = torch.cat(step_logits)  # (n_new, V)
print("same tokens as decoding without a cache:", torch.equal(ids_out, plain))
again = model.generate(prompt, n_new, temperature=0, use_cache=True)
print("generate(use_cache=True) agrees too:", torch.equal(again, plain))
print("step logits agree within 1e-5:", torch.allclose(cached, full, atol=1e-5, rtol=0))

# %% [markdown]
# The same holds for every kind of model this chapter builds. The tests
# (`tests/test_gpt.py`, and `tests/test_gpt2_weights.py` for Hugging Face's GPT-2) check learned positions and RoPE, multi-head and grouped-query
# attention, tokens and logits, against the uncached model and Hugging Face's GPT-2.
# The short version on small untrained models: a text fed with the cache, 5 characters
# and then one at a time, against one uncached pass.

# %%
seq = heldout_ids[:30][None].to(run.device)  # (1, 30)
for positions in ("learned", "rope"):
    for n_kv in (None, 2, 1):
        small = gpt.GPTConfig(65, 64, 32, 2, 4, n_kv_heads=n_kv, positions=positions)
        torch.manual_seed(0)
        m = gpt.GPT(small).to(run.device).eval()
        cache = kv_cache.new_cache(2)
        with torch.no_grad():
            steps = [m(seq[:, :5], cache=cache)]
            steps += [m(seq[:, t : t + 1], cache=cache) for t in range(5, 30)]
            agree = torch.allclose(torch.cat(steps, 1), m(seq), atol=1e-5, rtol=0)
        print(f"{positions:7s} n_kv_heads={str(n_kv):4s}: agree within 1e-5: {agree}")

# %% [markdown]
# An encoder–decoder (chapter 7) caches too, twice per layer
# (`kv_cache.DecoderCache`): its self-attention's keys and values grow by a token per
# step, as here, and its cross-attention's, the encoder's output projected to keys and
# values, are computed at the first step and only read after, since the source does
# not change while the target is written. A small untrained `decoder.Decoder`, fed its
# target one position at a time with the cache, against one pass without:

# %%
torch.manual_seed(0)
dec = decoder.Decoder(2, 32, 4, 64, norm_first=True).to(run.device).eval()
tgt = torch.randn(1, 8, 32, device=run.device)  # 8 target positions
memory = torch.randn(1, 11, 32, device=run.device)  # the encoder's 11 positions
dec_cache = kv_cache.new_decoder_cache(2)
with torch.no_grad():
    full = dec(tgt, memory, self_mask=masks.causal_mask(8, device=run.device))
    steps = [dec(tgt[:, t : t + 1], memory, cache=dec_cache) for t in range(8)]
print(
    "agree within 1e-5:", torch.allclose(torch.cat(steps, 1), full, atol=1e-5, rtol=0)
)
print("self-attention cache", tuple(dec_cache[0].self_attn.keys.shape),
      "cross-attention cache", tuple(dec_cache[0].cross_attn.keys.shape))  # fmt: skip

# %% [markdown]
# ## 5. How much faster?
#
# Per step, the uncached model reads the whole text: at step $t$ it does $t$ times the
# arithmetic of one token. The cached model reads one token and attends over $t$ cached
# keys: about $2 t\, d_\text{model}$ multiply-adds per layer for the scores and the
# weighted sum, against about $12\, d_\text{model}^2$ for the token's projections and
# MLP, so attention stays the smaller part while $t < 6\, d_\text{model}$ (2,304
# tokens for $d_\text{model} = 384$; a count, not a measurement).
#
# The book measures the speed-up with a script, `benchmarks/kv_cache_speed.py`, on
# nanoGPT's character-level shape (6 layers, 6 heads, $d_\text{model} = 384$) with
# random weights: the time of a step does not depend on what the weights are. It
# writes 256 tokens greedily after a 16-token prompt, on 2 threads, with the cache and
# without (beside a reference decoder, a bare decoder, a cached run that keeps oneDNN
# and a floor, all described below), all the runs
# taking turns within each of several rounds so that a busy machine slows them alike,
# and it checks that both write the same tokens. Each round gives one ratio. Its committed result, read back with `benchmark.committed_result` (the numbers the text quotes, by name, with `decoding_speed.speed_benchmark_summary`):

# %%
bench = benchmark.committed_result("kv_cache_speed.json")
shape, machine = bench["config"], bench["machine"]
print(f"{shape['n_layers']} layers, {shape['n_heads']} heads, d_model "
      f"{shape['d_model']}: {bench['new_tokens']} tokens after a prompt of "
      f"{bench['prompt_tokens']}, {bench['threads']} threads")  # fmt: skip
print(
    f"measured {bench['date'][:10]} with torch {bench['torch']} on {machine['cpu']}, "
    f"{machine['cores']} cores; both wrote the same tokens: {bench['same_tokens']}"
)

# %% tags=["nbval-ignore-output"]
# medians over the rounds (wall clock): the cache's, the reference's (transformers'
# GPT-2, same shape, same rounds), the floor's (every weight read once per token), the
# bare decoder's and the cached run's with oneDNN kept for one token
found = decoding_speed.speed_benchmark_summary(bench)
print(found.text)
report.glue_all(found.values, found.formats)
v, ref = found.values, bench["reference"]
assert bench["same_tokens"] and v["bench_min"] > 1  # faster in every round
assert ref["same_tokens"] and ref["parameters"] == bench["parameters"]
assert v["bench_speedup"] > v["ref_speedup"]  # the book's cache gains more here
ref_vs = report.compare_seeds(ref["rounds"], bench["rounds"]["speedup"]["wall"],
                              pairs=True)  # fmt: skip
report.glue("ref_verdict", ref_vs.replace("seed", "round"))  # rounds, not seeds
assert v["bench_speedup"] < v["ceiling"]  # the cache stays under its ceiling
assert bench["bare"]["same_tokens"]  # the bare decoder wrote generate's tokens
assert v["bench_speedup"] < v["bare_speedup"] < v["ceiling"]  # structure costs time

# %% tags=["hide-input"]
steps_ms = {m: 1e3 * torch.tensor(bench["step_seconds"][m]) for m in bench["seconds"]}
n = torch.arange(1, len(steps_ms["cached"]) + 1)  # step 1 reads the prompt
fig, axes = plt.subplots(1, 2, figsize=plotting.WIDE)
for mode, label in (("uncached", "without cache"), ("cached", "with cache")):
    axes[0].plot(n, steps_ms[mode], ".", ms=2, label=label)
axes[0].set(xlabel="step (tokens generated)", ylabel="ms per step (median of runs)",
            title="One decoding step, benchmark shape")  # fmt: skip
axes[0].legend(markerscale=5)
axes[1].plot(n, steps_ms["uncached"].cumsum(0) / steps_ms["cached"].cumsum(0))
axes[1].set(xlabel="tokens generated", ylabel="uncached / cached time, so far",
            title="Speed-up of the cache")  # fmt: skip
fig.tight_layout()
plt.show()

# %% [markdown]
# The uncached step time climbs with $t$, the cached one stays nearly flat, so the
# speed-up grows with the length: {glue:text}`bench_speedup`× for the 256 tokens (the
# median over the rounds; from {glue:text}`bench_min`× to {glue:text}`bench_max`×,
# with a one-minute load average of {glue:text}`bench_load` on the machine when it
# started). It
# is not $t$-fold, because a step has fixed costs that do not depend on how many tokens
# it reads: it reads every weight matrix once, and it runs the same few dozen small
# operations per layer. A cached step pays them for a single token; an uncached step
# over $t$ tokens pays them once for all $t$, which is why its time at $t$ is far less
# than $t$ cached steps ({glue:text}`last_plain_ms` ms for the last uncached step,
# {glue:text}`all_cached_s` s for all 256 cached ones: the sum of each step's median
# in the script's second, step-by-step pass, which is not the same statistic as the
# median whole run printed above).
#
# How far could a cache go on that machine? The script also times the part of a cached
# step that no cache removes, and nothing else: one row times every weight matrix of the
# model, once per token, 256 times. That floor took {glue:text}`floor_s` s, and the
# uncached run {glue:text}`ceiling` times as long: the most any cache could gain there
# (medians over the rounds). The cached run took {glue:text}`over_floor` times the
# floor: the products with the weights were {glue:text}`floor_share` of its time, and
# the rest went to everything else a step runs: norms, attention over the cache, and
# the Python that calls them.
#
# How much of that rest is the package's own structure? Another run in every round,
# the bare decoder, does the cached run's operations and nothing else: the same
# products, norms, attention kernel and cache writes, called as plain functions on
# the model's tensors, with no module calls, no argument checks and no cache object
# (`timed_bare` in the script, a few dozen lines; it writes the same tokens as
# `generate`, and on the prompt it computes the output layer for the last position
# only). It took {glue:text}`bare_s` s, {glue:text}`bare_speedup`× faster than
# the uncached run: the structure that lets this book build the model from named,
# checked parts takes {glue:text}`structure_share` of the cached run's time (from
# {glue:text}`structure_min` to {glue:text}`structure_max` over the rounds, each
# bare run read against the cached run beside it). That is a price of writing the step
# in Python one module at a time, at one token per step. The book keeps the modules,
# since they are what the chapters teach.
#
# What separates the bare run from the floor is the rest of the step: the small calls
# of every layer (norms, cache writes, attention over the cache, GELU, residual
# additions), each doing little arithmetic for one token. One of them would cost
# more than its arithmetic, for a reason outside Python, if the package let it. On
# the CPU, torch hands the exact GELU to the oneDNN library whenever it may. The cell
# below times one call both ways on this machine's CPU, oneDNN switched on and off,
# with the benchmark's threads (or as many as this page may use): for one token's
# $4\,d_\text{model}$ values, for 64 tokens, and for one token with cold caches, which
# the benchmark's paragraph below explains (`decoding_speed.onednn_call_seconds`: wall
# clock, the two settings taking turns, the median call):

# %% tags=["nbval-ignore-output"]
threads = runtime.thread_count(bench["threads"])  # the benchmark's, capped
layer_bytes = bench["onednn"]["gelu_call_us"]["sweep_bytes"]  # a layer's weights
cases = {"1 token": (1, 0), "64 tokens": (64, 0), "1 token, cold": (1, layer_bytes)}
gelu_us = {}  # case -> {"oneDNN": µs, "torch": µs}: the median call
for case, (tokens, sweep) in cases.items():
    h = torch.randn(1, tokens, 4 * shape["d_model"])  # (1, tokens, 4·d_model)
    gelu = lambda: F.gelu(h)  # noqa: E731
    per_call = decoding_speed.onednn_call_seconds(
        gelu, calls=200, threads=threads, sweep_bytes=sweep
    )
    gelu_us[case] = {kernel: 1e6 * s for kernel, s in per_call.items()}
    timings = ", ".join(f"{k} {us:5.1f} µs" for k, us in gelu_us[case].items())
    print(f"{case:>14} ({h.numel():6,} values, {threads} thread(s)): {timings}")
x = torch.randn(1, 64, 4 * shape["d_model"])  # (1, 64, 4·d_model)
with runtime.native_cpu_kernels():
    own = F.gelu(x)  # through torch's kernel
diff = (own - F.gelu(x)).abs().max().item()  # against oneDNN's, where torch uses it
assert diff < 1e-5  # the same function, to float rounding

# %% tags=["hide-input", "nbval-ignore-output"]
# the verdicts the next paragraph reads, from the timings above (this machine)
warm, batch, cold = (gelu_us[c] for c in cases)
report.glue("gelu_diff", diff, "{:.1g}")
report.glue("gelu_onednn_us", warm["oneDNN"], "{:.1f}")
report.glue("gelu_torch_us", warm["torch"], "{:.1f}")
gelu_ratio = warm["oneDNN"] / warm["torch"]
verdict = "about as long as torch's own kernel"
if gelu_ratio > 1.2:
    verdict = f"{gelu_ratio:.1f} times as long as torch's own kernel"
elif gelu_ratio < 1 / 1.2:
    verdict = "less time than torch's own kernel"
report.glue("gelu_verdict", verdict)
grows = batch["oneDNN"] / warm["oneDNN"]  # 64 times the values: how much longer
fixed_verdict = f"took {grows:.0f} times as long: here the cost grows with the values"
if grows < 8:
    fixed_verdict = (
        f"took {grows:.1f} times as long, so most of a one-token call is a cost per "
        "call, not per value"
    )
report.glue("fixed_verdict", fixed_verdict)
report.glue("gelu_batch", "oneDNN was the faster" if batch["oneDNN"] < batch["torch"]
            else "torch's kernel was still the faster")  # fmt: skip
warm_gap, cold_gap = (t["oneDNN"] - t["torch"] for t in (warm, cold))
cold_verdict = f"here the gap was {cold_gap:.1f} µs cold, {warm_gap:.1f} µs warm"
if warm_gap > 0 and cold_gap > 1.5 * warm_gap:
    cold_verdict = (
        f"here too the gap grew, {warm_gap:.1f} µs warm, {cold_gap:.1f} µs cold"
    )
report.glue("live_cold_verdict", cold_verdict)
assert batch["torch"] > warm["torch"]  # torch's kernel: 64 times the values cost more

# %% [markdown]
# Through oneDNN the call took {glue:text}`gelu_onednn_us` µs,
# {glue:text}`gelu_verdict` ({glue:text}`gelu_torch_us` µs). Sixty-four tokens, 64
# times the values, {glue:text}`fixed_verdict`. A batch shares that cost: at 64
# tokens {glue:text}`gelu_batch`. The package makes the choice once, from the
# benchmark machine's numbers: `GPT.forward` runs a step that reads a single token (one
# text, one new token) on the CPU with torch's own kernels, `runtime.native_cpu_kernels`
# switching oneDNN off for the step and back on after it (the switch is process-wide:
# another thread's operations during the step take torch's kernels too). The two
# kernels compute the same function to float rounding, not always to the last bit
# (largest difference over the 64 tokens here: {glue:text}`gelu_diff`).
#
# The benchmark measures what the choice is worth on its machine: one more cached run
# in every round keeps oneDNN (`model.one_token_native_kernels = False`) and writes the
# same tokens. Torch's own kernels saved {glue:text}`onednn_saving` of that run's
# time (from {glue:text}`onednn_saving_min` to {glue:text}`onednn_saving_max` over
# the rounds); with oneDNN kept, the speed-up would be {glue:text}`onednn_speedup`×.
# Spread over its {glue:text}`one_token_calls` one-token GELU calls, the oneDNN run's
# extra time comes to {glue:text}`loop_gelu_us` µs a call, where one call timed alone
# lost {glue:text}`bench_warm_gap` µs to oneDNN. Part of the difference is where the
# call runs. Between two of its GELU calls a decoding step streams one layer's
# weights, {glue:text}`layer_mb` MB, through the CPU's caches, so the call finds the
# core's own caches (L1 and L2) holding other data. The script timed a call after
# reading that many bytes before it: oneDNN then lost {glue:text}`bench_cold_gap` µs.
# Cold caches widen the gap; what the loop loses beyond that, no cell here splits. On this page's machine, the third line of the
# cell above: {glue:text}`live_cold_verdict`.

# %% tags=["hide-input"]
# the benchmark's numbers the paragraph above reads (its machine, committed)
kept = bench["onednn"]
bench_gelu = kept["gelu_call_us"]
bench_warm_gap, bench_cold_gap = (
    bench_gelu[case]["oneDNN"] - bench_gelu[case]["torch"] for case in ("warm", "cold")
)
report.glue("bench_warm_gap", bench_warm_gap, "{:.0f}")
report.glue("bench_cold_gap", bench_cold_gap, "{:.0f}")
report.glue("loop_gelu_us", kept["extra_us_per_call"], "{:.0f}")
report.glue("one_token_calls", f"{kept['one_token_gelu_calls']:,}")
report.glue("layer_mb", bench_gelu["sweep_bytes"] / 1e6, "{:.1f}")
saving = (v["onednn_saving"], v["onednn_saving_min"], v["onednn_saving_max"])
assert kept["same_tokens"] and min(saving) > 0  # saved in every round
assert v["ref_speedup"] < v["onednn_speedup"] < v["bench_speedup"]
# cold caches widen the gap; the loop loses more per call than a cold call alone
assert 0 < bench_warm_gap < bench_cold_gap < kept["extra_us_per_call"]

# %% [markdown]
# Decoders built for speed remove the structure's cost and these small calls' cost
# at once by compiling the whole step, which fuses the calls: PyTorch's gpt-fast runs
# its one-token step through `torch.compile` with CUDA graphs, on GPUs. No cell here
# measures that.
#
# Is {glue:text}`bench_speedup`× fast or slow for this shape on this machine? The
# script runs a reference decoder in the same rounds: Hugging Face's `GPT2LMHeadModel`
# built in the same shape (the same parameter count, random weights), decoding through
# its own `generate` with its cache and without. Its cache gained
# {glue:text}`ref_speedup`× ({glue:text}`ref_cached` s for the cached run, against
# {glue:text}`bench_cached` s for the book's). Paired round by round
# (`report.compare_seeds`, with the rounds in the role of seeds), the book's speed-up is
# {glue:text}`ref_verdict`. With oneDNN kept for one token it was still
# {glue:text}`onednn_speedup`×, so the kernel choice above is part of that lead, not
# all of it; the script does not split the rest. One
# product for the query, key and value projections is not the difference: both models
# store the three as one matrix (`gpt.GPT`'s `qkv_proj`, which chapter 14 explains;
# GPT-2's `c_attn`). The book's steps run in
# `torch.inference_mode()`, without the autograd bookkeeping that `torch.no_grad()`
# still keeps, and their one-token steps take torch's own GELU kernel, while the
# reference's `generate` sends GELU to oneDNN and does more per step (its cache
# object, an attention mask, its logits processors). The oneDNN run above isolates
# the kernel choice; no cell times the others apart.
#
# The same measurement, live on the machine running this page, on a smaller model so
# that the page stays quick ({glue:text}`speed_shape`, {glue:text}`speed_where`,
# {glue:text}`speed_tokens` tokens after a one-token prompt). Each step is timed on its
# own; on a CPU the clock is this process's CPU time, which other programs on a shared
# machine disturb less than the wall clock (`decoding_speed.decode_step_times`).

# %%
speed_config = gpt.GPTConfig(65, 2048, speed_width, speed_layers, speed_width // 64)
torch.manual_seed(0)
speed_model = gpt.GPT(speed_config).to(run.device).eval()
n_params = sum(p.numel() for p in speed_model.parameters())
live_shape = report.glue("speed_shape", f"{speed_layers} layers, d_model {speed_width}")
report.glue("speed_where", "on one CPU thread" if run.device.type == "cpu"
            else f"on {run.device.type}")  # fmt: skip
print(f"live model: {live_shape}, {n_params:,} parameters")

# %% tags=["nbval-ignore-output"]
decoding_speed.decode_step_times(speed_model, 8, use_cache=True)  # warm-up
# (speed_tokens,) seconds each: every step of greedy decoding from a one-token prompt
step_times = decoding_speed.decode_step_times
t_cached = step_times(speed_model, speed_tokens, True, speed_batch)
t_plain = step_times(speed_model, speed_tokens, False, speed_batch)
lengths = [n for n in (16, 32, 64, 128, 256, 512, 1024) if n <= speed_tokens]
ratio = {n: (t_plain[:n].sum() / t_cached[:n].sum()).item() for n in lengths}
for n in lengths:
    print(
        f"{n:5d} tokens: cached {t_cached[:n].sum():6.2f} s, "
        f"uncached {t_plain[:n].sum():6.2f} s, {ratio[n]:5.1f}x faster"
    )
report.glue("speedup", ratio[speed_tokens], "{:.1f}")
report.glue("speed_tokens", f"{speed_tokens:,}")
grows = ratio[speed_tokens] > ratio[lengths[0]]  # the gain grows with the length
if run.device.type == "cpu":
    assert ratio[speed_tokens] > 1.5 and grows
report.glue("speed_trend", "with the same trend along the table" if grows else
            "and here without the benchmark's trend along the table")  # fmt: skip

# %% [markdown]
# Here the cache wins {glue:text}`speedup`× over {glue:text}`speed_tokens` tokens: a
# smaller model than the benchmark's, {glue:text}`speed_where` and from a one-token
# prompt, so a different number, {glue:text}`speed_trend`. It is one run of each mode,
# one after the other, so it has no spread: a change of load between the two runs
# would move it, and the benchmark's rounds above are the measurement to quote. (On a
# CPU the cell asserts only that the cache is more than 1.5 times faster and that the
# gain grows with the length; elsewhere it asserts nothing.) A batch of sequences decoded
# together shares a step's fixed costs, which is why servers batch requests. Measured:
# one cached step after 128 tokens, for 1 sequence and for 16 decoded together. (The
# cache is filled with random keys and values: the time of a step does not depend on
# them, and the 16 × 128 tokens need not be run through the model;
# `decoding_speed.cached_step_seconds` does this.)

# %% tags=["nbval-ignore-output"]
H, L = speed_config.n_heads, speed_config.n_layers
# batch size -> median seconds of one cached step after 128 positions
per_step = {B: decoding_speed.cached_step_seconds(speed_model, B, 128) for B in (1, 16)}
cost = per_step[16] / per_step[1]
print(f"one cached step, 1 sequence: {1e3 * per_step[1]:.1f} ms")
print(
    f"16 sequences: {1e3 * per_step[16]:.1f} ms, {cost:.1f}x the time for 16x the work"
)
assert cost < 8  # far from 16x: most of a step's cost does not grow with the batch

# %% [markdown]
# ## 6. How much memory?
#
# The cache holds, in every layer, one key and one value vector of $d_\text{head}$
# numbers per key/value head, per token, per sequence:
#
# $$\text{bytes} = 2 \cdot n_\text{layers} \cdot n_\text{kv heads} \cdot d_\text{head}
# \cdot T \cdot B \cdot \text{bytes per value}.$$
#
# Llama-2-7B {cite}`touvron2023llama2` has 32 layers of 32 heads of 128 features, one
# key/value head per query head; Mistral-7B {cite}`jiang2023mistral` has the same
# *attention* shape (its feed-forward layers are wider) but 8 key/value heads. For one
# sequence of 4,096 tokens in 16-bit floats:

# %%
for name, n_kv in (("Llama-2-7B", 32), ("Mistral-7B", 8)):
    size = kv_cache.kv_cache_bytes(
        32, n_kv, 128, seq_len=4096, batch=1, bytes_per_value=2
    )
    per_token = kv_cache.kv_cache_bytes(32, n_kv, 128, seq_len=1)
    print(
        f"{name}: {size:,} bytes = {size / 2**30:.2f} GiB, "
        f"{per_token // 1024} KiB per token"
    )

# %% [markdown]
# Half a megabyte per token adds up. Llama-2-7B's 6,738,415,616 weights take about
# 13.5 GB in fp16; a batch of 32 sequences of 4,096 tokens needs far more for its cache:

# %%
weights = 6_738_415_616 * 2  # bytes of Llama-2-7B's weights in fp16
batch32 = kv_cache.kv_cache_bytes(32, 32, 128, seq_len=4096, batch=32)
print(
    f"weights {weights / 1e9:.1f} GB; cache of 32 sequences {batch32 / 2**30:.0f} GiB"
)
print(f"with Mistral's 8 key/value heads: {batch32 // 4 / 2**30:.0f} GiB")

# %% [markdown]
# Does the formula describe what the cache really holds? Fill caches of the live speed
# model, with room for 128 positions, with 100 tokens for each of 3 sequences, in fp32
# and in bf16, and count the bytes of their tensors: the filled rows, and the buffers
# allocated up front (a static cache holds its room whether it is used or not).

# %%
batch_ids = torch.zeros(3, 100, dtype=torch.long, device=run.device)
for dtype in (torch.float32, torch.bfloat16):
    cache = kv_cache.filled_cache(speed_model.to(dtype), batch_ids, max_len=128)
    filled = kv_cache.cache_nbytes(cache)  # keys.nbytes + values.nbytes, all layers
    held = sum(layer.capacity_nbytes for layer in cache)
    size = dict(batch=3, bytes_per_value=dtype.itemsize)
    print(f"{dtype}: filled {filled:,} bytes (formula, T = 100: "
          f"{kv_cache.kv_cache_bytes(L, H, 64, 100, **size):,}); buffers {held:,} "
          f"(T = 128: {kv_cache.kv_cache_bytes(L, H, 64, 128, **size):,})")  # fmt: skip
speed_model = speed_model.float()  # back to fp32 for whoever uses it next

# %% [markdown]
# The bytes are proportional to every factor of the formula, so each factor is a
# lever, and each has been pulled:
#
# - **bytes per value**: a cache stored in 8 bits instead of 16 halves it; KIVI
#   {cite}`liu2024kivi` stores them in 2 bits (plus a scale and a zero point for
#   each small group of numbers);
# - **$T$**: a *rolling buffer* keeps only the last $w$ positions, which is all a
#   sliding-window layer (chapter 8) ever reads; Mistral-7B does this with
#   $w = 4{,}096$ {cite}`jiang2023mistral`;
# - **$n_\text{layers}$**: cross-layer attention {cite}`brandon2024cla` lets
#   neighbouring layers share one cache;
# - **$n_\text{kv heads} \cdot d_\text{head}$**, the numbers cached per token and layer:
#   fewer key/value heads (MQA and GQA, the next two sections), smaller heads, or
#   DeepSeek-V2's multi-head latent attention {cite}`deepseek2024v2`, which caches one
#   compressed vector per token (a latent of 512 numbers plus a 64-number key for
#   RoPE) and computes every head's keys and values from it.
#
# What each would do to Llama-2-7B's cache of 4,096 tokens (the MLA line compares
# DeepSeek-V2's latent with multi-head keys and values for its own 128 heads of 128):

# %%
llama = kv_cache.kv_cache_bytes(32, 32, 128, 4096)  # fp16, one sequence
levers = {
    "8-bit values": kv_cache.kv_cache_bytes(32, 32, 128, 4096, bytes_per_value=1),
    "rolling buffer, w = 1,024": kv_cache.kv_cache_bytes(32, 32, 128, 1024),
    "layers share in pairs": kv_cache.kv_cache_bytes(16, 32, 128, 4096),
    "8 key/value heads (GQA)": kv_cache.kv_cache_bytes(32, 8, 128, 4096),
}
print(f"{'Llama-2-7B as it is':>26}: {llama / 2**30:.2f} GiB")
for name, size in levers.items():
    print(f"{name:>26}: {size / 2**30:.2f} GiB ({llama // size}x smaller)")
mla, mha = 512 + 64, 2 * 128 * 128  # DeepSeek-V2: numbers per token and layer
print(f"{'MLA (DeepSeek-V2)':>26}: {mla} numbers per token and layer instead of "
      f"{mha:,} ({mha / mla:.0f}x smaller)")  # fmt: skip

# %% [markdown]
# This chapter studies one lever, $n_\text{kv heads}$, which changes neither the
# model's width, nor its depth, nor its number of query heads; none of the others is
# measured here. The next section shows how; here is what it buys, by the formula for
# Llama-2-7B's shape and measured on the live speed model's shape with every number
# of key/value heads that divides its query heads:

# %%
measured, tokens = {}, batch_ids[:1, :1].repeat(1, 256)  # tokens: (1, 256)
for n_kv in [g for g in range(H, 0, -1) if H % g == 0]:
    cfg = dataclasses.replace(speed_config, max_len=256, n_kv_heads=n_kv)
    cache = kv_cache.filled_cache(gpt.GPT(cfg).to(run.device).eval(), tokens)
    measured[n_kv] = kv_cache.cache_nbytes(cache)
    assert measured[n_kv] == kv_cache.kv_cache_bytes(
        L, n_kv, 64, 256, bytes_per_value=4
    )
print({k: f"{v / 2**20:.2f} MiB" for k, v in measured.items()}, "(fp32, 256 tokens)")

# %% tags=["hide-input"]
fig, axes = plt.subplots(1, 2, figsize=plotting.WIDE)
kvs = [1, 2, 4, 8, 16, 32]
llama_gib = [kv_cache.kv_cache_bytes(32, n, 128, 4096) / 2**30 for n in kvs]
axes[0].plot(kvs, llama_gib, "o-")
axes[0].set(xlabel="key/value heads", ylabel="GiB per sequence", ylim=(0, 2.3),
            xticks=kvs, title="Llama-2-7B's shape, 4,096 tokens, fp16")  # fmt: skip
labels = (("Llama-2-7B (MHA)", 32, (-120, 0)), ("Mistral-7B (GQA)", 8, (8, -14)))
for name, n, offset in labels:
    gib = kv_cache.kv_cache_bytes(32, n, 128, 4096) / 2**30
    axes[0].annotate(name, (n, gib), textcoords="offset points", xytext=offset)
axes[1].bar([str(n) for n in measured], [b / 2**20 for b in measured.values()])
axes[1].set(xlabel=f"key/value heads (of {H} query heads)", ylabel="MiB, measured",
            title="Live speed model, 256 tokens, fp32")  # fmt: skip
fig.tight_layout()
plt.show()

# %% [markdown]
# ### Cache size is also speed
#
# A decoding step does little arithmetic for each byte it reads from memory. For each
# of the $B$ sequences it multiplies every weight once (2 FLOPs, a multiply and an
# add, per weight), but it reads each weight once for the whole batch; and every query
# head spends $2 d_\text{head}$ FLOPs on each cached key and $2 d_\text{head}$ on each
# cached value, which are read once for the query heads that share them. With $N$
# weights, $H$ query heads, $G$ key/value heads and $b$ bytes per value, one step
# costs
#
# $$\text{FLOPs} \approx 2 N B + 4\, n_\text{layers} H\, d_\text{head} T B, \qquad
# \text{bytes} \approx N b + 2\, n_\text{layers} G\, d_\text{head} T B\, b .$$
#
# Their ratio, the *arithmetic intensity* {cite}`williams2009roofline`, is about $2B/b$
# FLOPs per byte of weights and $2H/(G b)$ per byte of cache: with $b = 2$, $B$ and
# $H / G$ FLOPs per byte, tiny next to what
# hardware can do per byte it reads (an H100 GPU's datasheet gives about 990 TFLOP/s of
# dense bf16 against 3.35 TB/s of memory, some 300 FLOPs per byte). So a large model's
# decoding step waits on memory, and its time is about its bytes over the bandwidth
# {cite}`pope2023inference`: a smaller cache makes a shorter step, not only room for
# more sequences. One step of Llama-2-7B's shape for 32 sequences of 4,096 tokens, with
# its own 32 key/value heads and with 8:

# %%
N, n_layers_7b, H_7b, Dh, T, B, b = 6_738_415_616, 32, 32, 128, 4096, 32, 2
read = {}
for G in (32, 8):
    flops = 2 * N * B + 4 * n_layers_7b * H_7b * Dh * T * B
    cache_bytes = kv_cache.kv_cache_bytes(n_layers_7b, G, Dh, T, B, bytes_per_value=b)
    read[G] = N * b + cache_bytes
    gb, share, ms = read[G] / 1e9, cache_bytes / read[G], read[G] / 3.35e12 * 1e3
    print(f"{G:2d} key/value heads: {flops / 1e12:.2f} TFLOP, reads {gb:.1f} GB"
          f" ({share:.0%} of it cache): {flops / read[G]:.1f} FLOPs per byte,"
          f" {ms:.1f} ms at 3.35 TB/s")  # fmt: skip
report.glue("fewer_bytes", read[32] / read[8], "{:.1f}")
assert read[32] > 2 * read[8]  # the cache is most of what an MHA step reads

# %% [markdown]
# With 8 key/value heads instead of 32 the step reads {glue:text}`fewer_bytes` times
# fewer bytes, so once memory is what it waits on, it is that much shorter. The same
# count is *consistent* with the batch measurement of section 5, without proving it:
# for one sequence, most of the bytes a step of the live model reads are its weights
# (all but the position table, of which a step reads one row), which 16 sequences
# share. Whether the bytes are what that step waits on, the cell measures too: the
# rate at which one step reads its weights, against the rate of one pass over a large
# tensor on the same device (256 MB; where the last-level cache is larger, this pass
# too may read from the cache rather than from memory):

# %%
weight_bytes = 4 * sum(  # fp32; the position table is read one row per step
    p.numel() for n, p in speed_model.named_parameters() if not n.startswith("pos_emb")
)
for B in (1, 16):
    cache_bytes = kv_cache.kv_cache_bytes(L, H, 64, 128, B, bytes_per_value=4)
    print(
        f"{B:2d} sequence(s), 128 cached tokens: weights {weight_bytes / 1e6:.1f} MB, "
        f"cache {cache_bytes / 1e6:.1f} MB"
    )

# %% tags=["nbval-ignore-output"]
big = torch.ones(2**26, device=run.device)  # 256 MB of fp32, beyond most caches
read_s = benchmark.median_time(big.sum, repeats=5, device=run.device, clock="auto")
read_rate = big.numel() * 4 / read_s / 1e9  # GB/s: one pass reading a large tensor
step_rate = weight_bytes / per_step[1] / 1e9  # GB/s of weights, one sequence
print(f"one step reads its weights at {step_rate:.1f} GB/s; summing a 256 MB tensor "
      f"reads {read_rate:.1f} GB/s")  # fmt: skip
del big
assert step_rate < 2 * read_rate  # even from a cache, not far beyond the memory
report.glue_all(dict(step_rate=step_rate, read_rate=read_rate), "{:.1f}")
# step_rate / read_rate: the share of the step its weights fill at the pass's rate
report.glue("rate_reading", decoding_speed.weights_rate_reading(step_rate, read_rate))

# %% [markdown]
# One step reads its weights at {glue:text}`step_rate` GB/s, a pass over a large
# tensor at {glue:text}`read_rate` GB/s: {glue:text}`rate_reading`
# (`decoding_speed.weights_rate_reading`). The byte count is the right
# model for a large model, whose weights take far longer to stream than a few dozen
# operations take to launch.

# %% [markdown]
# ## 7. Sharing key/value heads: MQA and GQA
#
# The cache stores keys and values, never queries. So the economy is to give several
# query heads the same key and value projection: each query head still asks its own
# question, but they look things up in shared keys and values. With all $H$ query heads
# sharing one key/value head, this is **multi-query attention** (MQA)
# {cite}`shazeer2019fast`; with $G$ groups of $H/G$ query heads each, **grouped-query
# attention** (GQA) {cite}`ainslie2023gqa`; with $G = H$, the multi-head attention of
# chapter 2. The cache shrinks by the factor $H/G$.

# %% tags=["hide-input"] mystnb={"image": {"alt": "Three panels with eight query heads q1 to q8 on top and the cached key/value heads below, each query head joined by a line to the key/value head it reads. Multi-head attention: eight key/value heads, one per query head. Grouped-query attention with 2 groups: q1 to q4 share one key/value head and q5 to q8 another. Multi-query attention: all eight query heads share a single key/value head."}}
diagrams.kv_cache.shared_heads()
plt.show()

# %% [markdown]
# In code, the key and value projections get $G$ heads' worth of columns instead of
# $H$, `MultiHeadAttention(d_model, n_heads, n_kv_heads=G)`. Before attention, each
# key/value head is repeated for the query heads of its group: query head $h$ reads
# key/value head $\lfloor h / (H/G) \rfloor$. That is `attention.repeat_kv`:

# %%
kv = torch.arange(2.0).view(1, 2, 1, 1)  # (B, G=2, T=1, Dh=1): heads "0" and "1"
print("query head reads kv head:", attention.repeat_kv(kv, 3).flatten().int().tolist())
for n_kv in (6, 3, 2, 1):
    attn = attention.MultiHeadAttention(384, 6, n_kv_heads=n_kv)
    n_params = sum(p.numel() for p in attn.parameters())
    print(
        f"n_kv_heads={n_kv}: k_proj {tuple(attn.k_proj.weight.shape)}, "
        f"{n_params:,} parameters"
    )
try:
    attention.MultiHeadAttention(384, 6, n_kv_heads=4)
except ValueError as err:
    print("ValueError:", err)

# %% [markdown]
# Two checks that this is the same attention as elsewhere. PyTorch's fused kernel takes
# keys and values with fewer heads when told `enable_gqa=True`; and GQA is exactly
# multi-head attention whose key/value weights are tied within each group, so copying
# each group's weights to all its heads (`grouped_heads.mha_from_gqa`) gives an MHA with the
# same output.

# %%
torch.manual_seed(0)
gqa = attention.MultiHeadAttention(64, 8, n_kv_heads=2).eval()
x = torch.randn(2, 10, 64)
causal = torch.ones(10, 10, dtype=torch.bool).tril()
q = attention.split_heads(gqa.q_proj(x), 8)  # (B, 8, T, 8)
# keys and values: (B, 2, T, 8), two heads that the fused kernel shares out itself
k, v = (attention.split_heads(p(x), 2) for p in (gqa.k_proj, gqa.v_proj))
fused = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
ours = gqa(x, mask=causal)[0]
reference = gqa.o_proj(attention.merge_heads(fused))
same = torch.allclose(ours, reference, atol=1e-5)
print("equals SDPA(enable_gqa=True) within 1e-5:", same)
tiled = grouped_heads.mha_from_gqa(gqa)
print("tiled MHA:", tiled.n_kv_heads, "key/value heads;", "same output within 1e-5:",
      torch.allclose(tiled(x, mask=causal)[0], ours, atol=1e-5))  # fmt: skip

# %% [markdown]
# ## 8. From a trained MHA to GQA
#
# Training a GQA model from scratch is one option. Ainslie et al. {cite}`ainslie2023gqa`
# start from a trained multi-head model instead: the key (and value) projection of each
# new group is the **mean** of the projections of the heads in that group, the rest is
# copied, and a short further training ("uptraining", 5 % of the original steps in their
# paper) lets the model adapt. `grouped_heads.gqa_from_mha` converts one attention,
# `gpt.gqa_from_mha` every layer of a model.
#
# First, what the conversion alone costs: the held-out loss of our trained model, turned
# into GQA with half its key/value heads and into MQA, with no further training.

# %% tags=["nbval-ignore-output"]
groups = [n_heads // 2, 1]  # GQA with half the key/value heads, and MQA
converted = {g: lm_data.mean_loss(gpt.gqa_from_mha(model, g), heldout) for g in groups}
print(f"{n_heads} key/value heads (the trained model): {base_loss:.3f}")
for g in groups:
    print(f"{g} key/value heads, just converted: {converted[g]:.3f}")
report.glue("uptrain_share", uptrain_steps / card["steps"], "{:.0%}")
assert base_loss < converted[groups[0]] < converted[1]  # fewer heads, more damage

# %% [markdown]
# The pooled heads are not the ones the rest of the network was trained with, and the
# fewer there are, the more the loss rises. Ainslie et al. compare mean pooling with
# keeping the first head of each group and with starting the shared heads from scratch,
# and find mean pooling best after uptraining. Now the uptraining here:
# `uptrain_steps` more steps ({glue:text}`uptrain_share` of the original training) at a
# small constant learning rate, for each converted model and, as the control, for the
# unconverted multi-head model: the gap to the control measures what the conversion
# costs, not what the extra steps would have given any model. The steps are
# `training.train`'s: a fresh AdamW (its moments start from zero, no weight decay,
# PyTorch's default betas, unlike the recipe's), the same for every arm, so whatever
# that restart does to a trained model shows in the control too. Three seeds vary the
# batches seen; the model they start from is the loaded checkpoint. `gpt.uptrain_losses`
# runs every arm.

# %% tags=["nbval-ignore-output"]
assert abs(uptrain_lr - recipe["lr"] * recipe["min_lr_factor"]) < 1e-12  # its end
# key/value heads -> held-out losses after uptraining, one per seed
arms, batch = [n_heads, *groups], recipe["batch_size"]  # n_heads: the control
after = gpt.uptrain_losses(
    model, arms, train_ids, heldout, batch, uptrain_steps, uptrain_lr, seeds
)
start = {n_heads: base_loss, **converted}
print(f"{'kv heads':>8} | {'converted':>9} | {'after uptraining':>16} | gap to MHA")
for g, losses in after.items():
    mean, std = statistics.mean(losses), statistics.stdev(losses)
    gap = mean - statistics.mean(after[n_heads])
    print(f"{g:>8} | {start[g]:9.3f} | {mean:8.3f} ± {std:.3f} | {gap:+.3f}")
assert all(max(after[g]) < converted[g] for g in groups)  # uptraining helped every run

# %% [markdown]
# Does the spread support the claims? The cell below measures the share of the
# conversion's gap (to the MHA control) that uptraining closed, and compares the
# models with chapter 4's test (`report.compare_seeds`: every seed on one side *and* a
# $t$-test at 95 %). The arms are paired: seed $s$ draws the same batches in every arm
# and every arm starts from the same checkpoint, so the test is the paired one. The
# verdicts are glued into the text below.

# %% tags=["nbval-ignore-output"]
mean_after = {g: statistics.mean(v) for g, v in after.items()}
control = mean_after[n_heads]
recovered = {
    g: 1 - (mean_after[g] - control) / (converted[g] - control) for g in groups
}
for g in groups:
    print(
        f"{g} key/value heads: gap {converted[g] - control:.3f} -> "
        f"{mean_after[g] - control:.3f} ({100 * recovered[g]:.0f} % recovered)"
    )
assert min(recovered.values()) > 0.5  # most of the gap closes
# paired: seed s draws the same batches in every arm, from the same checkpoint
gqa_vs = report.compare_seeds(after[n_heads], after[groups[0]], pairs=True)
mqa_vs = report.compare_seeds(after[groups[0]], after[1], pairs=True)
report.glue("recovered_gqa", 100 * recovered[groups[0]], "{:.0f}")
report.glue("recovered_mqa", 100 * recovered[1], "{:.0f}")
ranking = (f"GQA's held-out loss against the MHA control's, seed by seed, is {gqa_vs}, "
           f"and MQA's against GQA's is {mqa_vs}")  # fmt: skip
print(report.glue("ranking", ranking))
assert mean_after[1] == max(mean_after.values())  # MQA loses the most, in the mean
# the verdicts, with a margin: they hold with every gap 0.1 nats smaller
assert report.ahead([v - 0.1 for v in after[groups[0]]], after[n_heads])
assert report.ahead([v - 0.1 for v in after[1]], after[groups[0]])

# %% tags=["hide-input"]
fig, ax = plt.subplots(figsize=plotting.SINGLE)
# points, not bars: the losses sit far from 0, and a cut bar would exaggerate the gaps
names = [f"{g} (MHA)" if g == n_heads else str(g) for g in after]
title = f"MHA to GQA/MQA: {uptrain_steps} steps of uptraining, {len(seeds)} seeds"
plotting.seed_dots(names, {"after uptraining": list(after.values())}, ax,
                   ylabel="held-out loss (nats per char)", title=title)  # fmt: skip
ax.plot(range(len(after)), [start[g] for g in after], "s", ms=8,
        color=plotting.PALETTE[1], label="just converted")  # fmt: skip
ax.axhline(mean_after[n_heads], color="k", ls=":", lw=1, label="MHA control, mean")
ax.set(xlabel="key/value heads")
ax.legend()
plt.show()

# %% [markdown]
# Uptraining for {glue:text}`uptrain_share` of the original steps wins back
# {glue:text}`recovered_gqa` % of the loss that the conversion to GQA cost and
# {glue:text}`recovered_mqa` % for MQA. After uptraining, {glue:text}`ranking`. How
# far each still is from the control is the last column of the table: Ainslie et al.
# find GQA close to multi-head quality after 5 % of the steps on a large T5, and this
# page, with a tiny model and {glue:text}`uptrain_share` of the steps, does not test
# whether longer uptraining would close the rest of the gap here. What it does show is
# the order of the trade-off: MQA saves the most memory and loses the most (in the
# mean over the seeds, asserted). The MHA control's own change (compare its two columns
# in the table; it can be a small rise, since a fresh optimiser restarts a trained
# model) is what the extra steps do to a model that was not converted, at a constant rate, `uptrain_lr`,
# the one at which the checkpoint's schedule ended (`lr` times `min_lr_factor` in its
# recipe); the gaps above subtract it. The saving, for this model's cache over a full
# context:

# %%
head_dim = d_model // n_heads
for g in [n_heads, *groups]:
    size = kv_cache.kv_cache_bytes(n_layers, g, head_dim, context, bytes_per_value=4)
    print(
        f"{g} key/value heads: {size:>9,} bytes per sequence of {context} tokens (fp32)"
    )

# %% [markdown]
# ## Summary
#
# - A GPT block is the pre-norm encoder block with a causal mask. Because of the mask,
#   the keys and values of earlier tokens never change while a text grows.
# - The KV cache keeps them, in a buffer allocated once: the prompt is read once, then
#   every step reads one token and writes one key and one value per layer and
#   key/value head into the next free row. Cached decoding gives the same tokens, and
#   logits within float rounding, as decoding without it, and its lead grows with the
#   length of the text: {glue:text}`bench_speedup`× for 256 tokens of the benchmark's
#   model (median over rounds, {glue:text}`bench_min`× to {glue:text}`bench_max`×),
#   {glue:text}`speedup`× for {glue:text}`speed_tokens` tokens of a smaller model
#   here. An encoder–decoder caches its cross-attention's keys and values too.
# - The cache costs $2 \cdot n_\text{layers} \cdot n_\text{kv heads} \cdot d_\text{head}
#   \cdot T \cdot B$ values: 2 GiB for one 4,096-token Llama-2-7B sequence in fp16.
#   Every factor is a lever: bytes per value, a rolling window, layers that share,
#   fewer or smaller key/value vectors per token. By the byte count, a decoding step
#   of a large model waits on the bytes it reads (weights and cache), so there a
#   smaller cache is also a shorter step ({glue:text}`fewer_bytes` times fewer bytes
#   with 8 key/value heads for 32 sequences of 4,096 tokens of Llama-2-7B's shape, where
#   the cache is most of what a step reads; for a single sequence the weights dominate
#   and the saving is far smaller). On this page's small model one
#   step read its weights at {glue:text}`step_rate` GB/s, against
#   {glue:text}`read_rate` GB/s for one pass over a large tensor (section 6 reads
#   what that says), and the book does not time a GQA step.
# - Multi-query and grouped-query attention share key/value heads among query heads and
#   shrink the cache by $H / G$; GQA equals MHA with tied key/value weights.
# - A trained MHA becomes a GQA by averaging each group's key/value heads; a short
#   further training wins back part of what the conversion cost (here more than half,
#   asserted, for GQA and MQA), and MQA, with the smallest cache, ends the worst in
#   the mean over the seeds.
#
# ## Exercises
#
# ### Exercise 1: the forgotten offset
#
# With RoPE, a cached step must rotate the new token's query and key by its real
# position: the new tokens sit after the `cache.seq_len` cached ones (section 4). A
# colleague's cached decoding rotates them with `rope(q, k)`, as if every new token
# were the first of the text. Before you run anything, predict: which steps of cached
# decoding still give the logits of decoding without a cache? All of them (RoPE's
# scores depend only on differences of positions), none, or some? Then write
# `rotate_new(rope, q, k, n_cached)`, which rotates the new tokens' queries and keys,
# shape (B, H, T_new, d_head), when `n_cached` positions are already cached. The
# check decodes a small RoPE GPT through your function, with the cache and without,
# and says at which step the two part; run it on the colleague's version first.


# %%
def rotate_new(rope, q, k, n_cached):
    # YOUR CODE HERE (the colleague's version: return rope(q, k))
    raise NotImplementedError


# %% tags=["solution", "hide-cell"]
def rotate_new(rope, q, k, n_cached):
    return rope(q, k, offset=n_cached)  # positions n_cached, n_cached + 1, ...


# %%
checks.check_rope_offset(rotate_new)

# %% [markdown]
# What the check measures on the colleague's version:

# %% tags=["nbval-ignore-output"]
try:
    checks.check_rope_offset(lambda rope, q, k, n_cached: rope(q, k))
    raise AssertionError("the colleague's version passed the check")
except checks.ExerciseError as err:
    print(err)
    assert "at step 1 " in str(err)  # the prompt's step agrees, the next one does not

# %% [markdown]
# The first step reads the prompt with nothing cached, so its positions start at 0
# either way, and it agrees. Every later step rotates the new query as position 0
# while the cached keys sit at their real positions, so the differences of positions
# are wrong, and the wrong key goes into the cache for all later steps. A cache that
# equals no cache is the test that catches it; the tokens alone might not.
#
# ### Exercise 2: fix the repeat
#
# A colleague wrote `repeat_kv` with `x.repeat(1, n_rep, 1, 1)`. The shapes are right and
# the model runs, but its GQA no longer equals the MHA with tiled weights. Find out why
# (print which key/value head each query head gets) and fix it.


# %%
def repeat_kv(x, n_rep):
    # YOUR CODE HERE (the broken version: return x.repeat(1, n_rep, 1, 1))
    raise NotImplementedError


# %% tags=["solution", "hide-cell"]
def repeat_kv(x, n_rep):
    B, G, T, Dh = x.shape
    # (B, G, 1, T, Dh) -> (B, G, n_rep, T, Dh) -> (B, G·n_rep, T, Dh)
    # heads in the order kv0, kv0, kv1, kv1, ...
    return x[:, :, None].expand(B, G, n_rep, T, Dh).reshape(B, G * n_rep, T, Dh)


# %%
checks.check_repeat_kv(repeat_kv)

# %% [markdown]
# ### Exercise 3: what growing by concatenation costs
#
# The simplest cache grows with `torch.cat`: each step makes a new tensor holding the
# old tokens' keys and the new token's. `kv_cache.KVCache` writes into a buffer
# allocated once instead. Predict first: to grow a cache to 512 tokens one token at
# a time, how many times more bytes does concatenation write than the buffer? Then
# write `cat_copies(n_tokens, bytes_per_token)`, the bytes `torch.cat` writes while a
# cache grows from empty, one token per step, to `n_tokens` tokens. The cell after the
# check measures both on real tensors.


# %%
def cat_copies(n_tokens, bytes_per_token):
    # YOUR CODE HERE
    raise NotImplementedError


# %% tags=["solution", "hide-cell"]
def cat_copies(n_tokens, bytes_per_token):
    # step t writes all t tokens: 1 + 2 + ... + n = n (n + 1) / 2
    return bytes_per_token * n_tokens * (n_tokens + 1) // 2


# %%
checks.check_cat_copies(cat_copies)

# %% [markdown]
# Measured: the bytes torch allocates while one layer's keys grow to 512 tokens
# (fp32, 6 heads of 64: 1,536 bytes per token) by concatenation and in a `KVCache`
# (whose update writes keys and values: count the keys' half). CPU tensors, where
# torch's profiler counts every allocation; the first token needs no copy in the
# concatenation (it starts the cache).

# %%
n, one = 512, torch.zeros(1, 6, 1, 64)  # one token's keys: 1,536 bytes in fp32


def grow_by_cat():
    keys = one
    for _ in range(n - 1):
        keys = torch.cat((keys, one), dim=2)  # a new tensor: all tokens so far


def grow_in_buffer():
    cache = kv_cache.KVCache(max_len=n)
    for _ in range(n):
        cache.update(one, one)  # writes one token's keys and values


by_cat = benchmark.allocated_bytes(grow_by_cat)
in_buffer = benchmark.allocated_bytes(grow_in_buffer) // 2  # the keys' half
counted = cat_copies(n, one.nbytes) - one.nbytes  # the first token is not copied
print(f"torch.cat allocates {by_cat:,} bytes; counted: {counted:,}")
print(f"the buffer: {in_buffer:,} bytes, {by_cat / in_buffer:.0f}x fewer")

# %% [markdown]
# ## What we added to the package
#
# - `transformer_book.attention`: `MultiHeadAttention(..., n_kv_heads=None)` for MHA, GQA
#   and MQA, with a `cache=` argument; `repeat_kv`.
# - `transformer_book.grouped_heads`: `gqa_from_mha` (mean pooling) and `mha_from_gqa`
#   (tiling).
# - `transformer_book.kv_cache`: `KVCache` (a static buffer: `update`, `seq_len`,
#   `capacity`, `nbytes`, `capacity_nbytes`), `new_cache`, `DecoderCache` and
#   `new_decoder_cache` (chapter 7's decoder), `cache_nbytes` and the size formula
#   `kv_cache_bytes`.
# - `transformer_book.decoding_speed`: `decode_step_times` and `cached_step_seconds`
#   (section 5's timings), `speed_benchmark_summary` (the benchmark's result read back)
#   and `weights_rate_reading` (what a step's rate of reading its weights says).
# - `transformer_book.lm_data`: `char_vocab`, `split_stream`, `WindowBatches` (seeded
#   random windows), `sequential_windows` (the held-out text once), `next_token_loss`
#   and `mean_loss`; chapter 14 trains with them too.
# - `transformer_book.gpt`: `GPTConfig` (learned or rotary positions, LayerNorm or
#   RMSNorm, activation, biases, tied embeddings, `n_kv_heads`), `GPT` with
#   `forward(ids, cache=None)` and `generate(...)`, and `gqa_from_mha` for a whole model.
#   Chapter 14 trains it for real, and samples with it.
# - `blocks.EncoderBlock` and `blocks.Encoder` take `n_kv_heads`, `bias` and a `cache`;
#   `positions.RotaryEmbedding` takes the position `offset` of the first new token.
# - `transformer_book.diagrams.kv_cache`: `shared_heads`, `cache_growth`.
# - `transformer_book.checkpoints`: `load` (a model the book trained, its weights
#   checked against the sha256 digest on its card) and `save`; the recipes that trained
#   them are in `scripts/train_checkpoints.py`. `transformer_book.baselines`: the
#   unigram and bigram models every held-out loss is compared with, and
#   `window_losses`, both scored on the targets of a model's held-out windows.
# - `benchmarks/kv_cache_speed.py`: cached against uncached decoding, side by side, its
#   result committed in `benchmarks/results/kv_cache_speed.json`.
# - `transformer_book.checks`: `check_rope_offset`, `check_repeat_kv`,
#   `check_cat_copies`.
