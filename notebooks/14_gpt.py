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
# # 14. Decoder-only language models
#
# A decoder-only model learns from raw text alone: every position of every window is an
# example whose label is simply the next token. This chapter trains such a model, a
# small GPT, on Tiny Shakespeare until it beats a published baseline in less time, shows
# what decoding does to its output distribution, checks the book's `gpt.GPT` against
# Hugging Face's GPT-2, scales the arithmetic up to GPT-3, and runs the same training on
# several processes. By the end you will be able to
#
# - explain why next-token prediction is *self-supervised*, and build its inputs and
#   targets from a stream of characters;
# - train a character-level GPT below nanoGPT's validation loss of 1.88 in less CPU
#   time than nanoGPT's recipe takes on the same machine, and say which choices got it
#   there;
# - read off what temperature, top-$k$ and top-$p$ sampling leave of the model's
#   distribution, and measure what that does to the text;
# - load a Hugging Face GPT-2 into `gpt.GPT` and verify the logits (GPT-2's layout,
#   checked here with random weights);
# - compute GPT-3's parameters, training compute, weight bytes and KV cache;
# - train with `python -m transformer_book.train` on one process, or on many with
#   `torchrun`, and resume a run from its checkpoint.

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
import math
import statistics
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

from transformer_book import (
    attention,
    baselines,
    benchmark,
    checks,
    data,
    diagrams,
    gpt,
    gpt2_weights,
    gpt_measurements,
    gpt_training,
    kv_cache,
    lm_data,
    metrics,
    params,
    plotting,
    report,
    runtime,
    sampling,
    training,
)

# %% tags=["parameters"]
device = "auto"  # "auto": CUDA, else Apple MPS, else the CPU
profile = "auto"  # "auto": quick on every device; "full" by name

# %%
run = runtime.setup(device, profile, seed=0, cpu_threads=1)  # a small model: 1 thread
print(run)
# quick: the book's recipe, a narrower cousin of nanoGPT's CPU model (sections 2 and 5);
# full (a GPU): nanoGPT's GPU model for Shakespeare (6 layers, d_model 384, context 256)
recipe = gpt_training.RECIPES[run.pick("book-quick", "book-full")]
# quick: nanoGPT's CPU result; full: its GPU one (1.47) + margin
target = run.pick(1.88, 1.60)
samples_per_setting = run.pick(8, 32)  # sequences sampled per decoding setting

# %% [markdown]
# ## 1. Next-token prediction needs no labels
#
# A language model assigns a probability to a text by the chain rule,
# $p(x_1, \dots, x_{T+1}) = p(x_1) \prod_{t=1}^{T} p(x_{t+1} \mid x_{\le t})$, and
# learns the conditional factors: on a window of $T + 1$ characters it minimises the
# cross-entropy of each next character,
# $\mathcal{L} = -\frac{1}{T}\sum_{t=1}^{T} \ln p(x_{t+1} \mid x_{\le t})$; the first
# character is context only, never a target. The labels are the text itself, shifted
# by one position: no one annotates anything. That is why this
# objective is called **self-supervised**: it turns any amount of raw text into training
# data, which is what let GPT-2 and GPT-3 learn from the web
# {cite}`radford2019language,brown2020gpt3`.
#
# Here the text is Tiny Shakespeare, read character by character. We keep nanoGPT's
# split {cite}`karpathy2022nanogpt`: the first 90 % of the characters to train on, the
# last 10 % held out, so our validation loss is comparable with its published 1.88.

# %%
text = data.load_tinyshakespeare()
chars = lm_data.char_vocab(text)
ids = torch.tensor(chars.encode(list(text)))  # (N,): one id per character
train_ids, val_ids = lm_data.split_stream(ids, 0.9)
print(f"{len(text):,} characters, {len(chars)} distinct")
print(f"train: the first {len(train_ids):,}; validation: the last {len(val_ids):,}")

# %% [markdown]
# A window of $T + 1$ consecutive characters gives $T$ examples at once: the first $T$
# are the input $x$, the last $T$ the targets $y$, and the causal mask lets position $t$
# read only $x_1, \dots, x_t$ when it predicts $y_t = x_{t+1}$.
# `lm_data.windows_at` cuts them; `lm_data.WindowBatches` draws them at random places,
# as nanoGPT's `get_batch` does.

# %%
x, y = lm_data.windows_at(train_ids, torch.tensor([0]), context=16)  # (1, 16) each
print("x:", repr("".join(chars.decode(x[0].tolist()))))
print("y:", repr("".join(chars.decode(y[0].tolist()))))
n_windows = len(train_ids) - 64
print(f"distinct training windows of 64: {n_windows:,}, each with 64 targets")

# %% tags=["hide-input"] mystnb={"image": {"alt": "Left: the characters 'First C' as inputs at the bottom, each feeding a box labelled 'GPT: causal self-attention times n_layers'; above it the targets 'irst Ci', the same characters shifted by one, so position t predicts character t + 1. Right: the 7 by 7 causal mask, filled on and below the diagonal where a query position may attend to a key position, empty above it where the keys lie in the future."}}
diagrams.gpt.next_token("First Ci")
plt.show()

# %% [markdown]
# ## 2. The model and the baseline to beat
#
# nanoGPT's README trains a character-level GPT on a CPU with 4 layers, 4 heads,
# $d_\text{model} = 128$, a context of 64, batches of 12, no dropout and no biases, for
# 2,000 iterations, and reports a validation loss of **1.88**
# {cite}`karpathy2022nanogpt`. `gpt.GPT` builds the same model: pre-norm blocks with
# causal attention, learned positions, exact GELU, and an output head that shares the
# token embedding's matrix {cite}`press2017using`. The two have the same number of
# parameters (the benchmark script of section 4 checks it).
#
# 1.88 is one model's number. The ceiling every loss of this chapter has to get below
# is the simplest language model there is (a floor would be a bound that no model can
# beat, such as the entropy of the text itself): a **bigram**, which predicts a
# character from the one before it by counting pairs in the training text
# (`baselines.bigram_log_probs`, add-one smoothing). Scored on the same held-out
# characters the GPT will be scored on (every target of the validation windows), it
# costs:

# %% tags=["nbval-ignore-output"]
bigram = baselines.bigram_log_probs(train_ids, len(chars))  # (V, V): log p(next | char)
n_val = (len(val_ids) - 1) // 64 * 64  # the targets of the 64-character windows
bigram_nats = baselines.bigram_loss(bigram, val_ids[:n_val], val_ids[1 : n_val + 1])
uniform_nats = math.log(len(chars))
print(f"held-out loss: uniform {uniform_nats:.3f}, bigram {bigram_nats:.3f} nats/char.")
report.glue("bigram_nats", bigram_nats, "{:.2f}")
assert 2.3 < bigram_nats < 2.7 < uniform_nats  # counting pairs already helps a lot

# %% [markdown]
# A model that reads 64 characters has to do much better than
# {glue:text}`bigram_nats` nats to show that it uses more than the last one.

# %%
nano = gpt_training.RECIPES["nanogpt-cpu"]
model_config = gpt_training.model_config(nano, vocab_size=len(chars))
toy = gpt.GPT(model_config)
n_toy = params.count_params(toy)
print(model_config)
print(f"parameters: {n_toy:,}")

# %% [markdown]
# The book's recipe, `book-quick`, makes four changes (seven settings in the printout
# below: three of the schedule, width with batch, activation, positions). It takes 40 %
# of the steps at a ten times higher peak learning rate (with a shorter warm-up); it
# halves the width while batches grow from 12 windows to 32, so that a step costs about
# as much as one of nanoGPT's but reads 2.7 times as much text; it uses ReLU, a simpler
# function than the exact GELU; and it encodes positions with RoPE (chapter 4) instead
# of a learned table. Everything else is nanoGPT's setting (AdamW with
# $\beta_2 = 0.99$, weight decay 0.1 on matrices, gradients clipped at 1, cosine decay
# to a tenth of the peak, context 64, 4 layers and 4 heads, a tied head). Section 5
# measures what each change does.

# %%
quick_recipe = gpt_training.RECIPES["book-quick"]
print("book-quick differs from nanogpt-cpu in (nanogpt-cpu, book-quick):")
for name, (old, new) in gpt_training.recipe_changes(nano, quick_recipe).items():
    print(f"  {name:14s} {old!s:>8} -> {new}")
quick_model = gpt.GPT(gpt_training.model_config(quick_recipe, len(chars)))
print(f"parameters of the book-quick model: {params.count_params(quick_model):,}")
print("this run trains the recipe:", run.pick("book-quick", "book-full"))

# %% [markdown]
# ## 3. Training below 1.88
#
# `gpt_training.run` is the function behind the command line of section 9: it reads
# the text, splits it 90/10, trains `gpt.GPT` with `training.train`, and evaluates on
# **every** held-out character once (nanoGPT's CPU run estimates its loss on 20 random
# batches of 12 × 64 characters, a noisier number than ours). It times
# the training in wall-clock seconds and in CPU seconds (the sum over all threads). On
# a machine shared with other programs, CPU seconds are the fairer clock, but only
# between runs on the same processor and the same number of threads (another processor
# does the same work in other seconds; a second thread adds its own seconds,
# including any it spends waiting for the other). The runs of the ablation in section 5
# have one thread each; the quick edition trains on two, the cores it is given, to stay
# within its minute, so section 5 sets its loss beside the table's, not its clock.
#
# Inside it is the loop every chapter since chapter 5 has run. Here it is once, by hand,
# for the first 20 of the recipe's steps: draw a batch, forward, loss, backward, clip
# the gradient, an AdamW step, clear the gradients, and set the next learning rate from
# the schedule (warm-up, then cosine decay).

# %% tags=["nbval-ignore-output"]
torch.manual_seed(0)
demo = gpt.GPT(gpt_training.model_config(recipe, len(chars))).to(run.device)
matrices = [p for p in demo.parameters() if p.dim() >= 2]  # decayed, as in nanoGPT
vectors = [p for p in demo.parameters() if p.dim() < 2]  # norm gains: not decayed
opt = torch.optim.AdamW([dict(params=matrices, weight_decay=recipe.weight_decay),
                         dict(params=vectors, weight_decay=0.0)],
                        lr=recipe.lr, betas=(0.9, recipe.beta2))  # fmt: skip
stream = iter(lm_data.WindowBatches(train_ids, recipe.batch_size, recipe.context,
                                    seed=0, device=run.device))  # fmt: skip
demo_losses = []
for step in range(20):
    factor = training.lr_factor(step, recipe.steps, recipe.warmup, recipe.decay,
                                recipe.min_lr_factor)  # fmt: skip
    for group in opt.param_groups:
        group["lr"] = recipe.lr * factor  # the schedule
    x, y = next(stream)  # (B, T) each: windows and their shifted targets
    logits = demo(x)  # (B, T, V)
    loss = F.cross_entropy(logits.flatten(0, 1), y.flatten())  # nats per character
    loss.backward()
    torch.nn.utils.clip_grad_norm_(demo.parameters(), recipe.clip)
    opt.step()
    opt.zero_grad(set_to_none=True)
    demo_losses.append(loss.item())
print(f"step 1: loss {demo_losses[0]:.2f} (uniform guess {uniform_nats:.2f}); "
      f"step 20: {demo_losses[-1]:.2f} (bigram {bigram_nats:.2f})")  # fmt: skip
assert demo_losses[-1] < demo_losses[0] - 0.5  # it learns from the first steps
del demo, opt

# %% [markdown]
# `gpt_training.run` runs the same loop for all the steps (through `training.train`,
# which adds devices, mixed precision, several processes and checkpoints) and then
# scores every held-out character.

# %% tags=["nbval-ignore-output"]
config = dataclasses.replace(  # quick: two CPU threads, the cores of a laptop or Colab
    recipe, log_every=0, device=str(run.device), threads=run.pick(quick=2, full=0)
)
result = gpt_training.run(config)
model, val_loss = result["model"], result["val_loss"]
n_model = params.count_params(model)
tokens = config.steps * config.batch_size * config.context
print(f"validation loss after {config.steps} steps: {val_loss:.3f} "
      f"(target {target}; bigram {bigram_nats:.3f})")  # fmt: skip
print(f"training: {result['train_wall_seconds']:.0f} s wall, "
      f"{result['train_cpu_seconds']:.0f} CPU s on {result['threads']} "
      f"thread(s), {tokens:,} tokens")  # fmt: skip
torch.set_num_threads(1)  # the rest of the chapter is small: one thread
final_train = statistics.mean(result["history"][-100:])  # the last 100 steps
print(f"training loss over the last 100 steps: {final_train:.3f}")
report.glue("n_model_m", n_model / 1e6, "{:.1f}")
assert val_loss <= target  # below nanoGPT's published 1.88 (quick)
assert 0 < val_loss - final_train < 0.25  # fits its training text only a little better

# %% tags=["hide-input"]
references = {"validation, at the end": val_loss, "nanoGPT's 1.88": 1.88,
              "bigram, validation": bigram_nats}  # fmt: skip
ax = plotting.training_curve(result["history"], references, window=50,
                             ylabel="cross-entropy (nats per char.)",
                             title=f"{run.pick('book-quick', 'book-full')}: a GPT "
                             "learns Shakespeare")  # fmt: skip
ax.set_ylim(1.0, 3.5)
plt.show()

# %% [markdown]
# The training loss ends a little below the validation loss. Two things produce such a
# gap, and this run does not separate them: a model of {glue:text}`n_model_m` M
# parameters fitting the text it has read, and held-out scenes (the last tenth of the
# file, other plays) that are simply harder to predict.
#
# ## 4. The cost of a step, next to nanoGPT's model
#
# Before comparing recipes, the implementations: on the *same* configuration, does a
# step of `gpt.GPT` cost what a step of nanoGPT's model does? `gpt.GPT` does what
# nanoGPT's model does to keep a step cheap: causal attention
# through PyTorch's fused kernel without building a mask (`is_causal=True`), LayerNorm
# through its fused kernel, and the query, key and value projections stored as one
# matrix.
#
# That last one changes how chapter 2's attention keeps its weights. There, `q_proj`,
# `k_proj` and `v_proj` are three layers, and $A_Q$ is `q_proj.weight.T`. A step
# multiplies the same input by all three, and an optimiser and a gradient clip pay a
# little for every parameter tensor they touch, so `gpt.GPT` stacks them:
# `MultiHeadAttention.stack_projections` moves the three weight matrices into one
# layer, `qkv_proj`, their rows one under another, as nanoGPT's `c_attn` holds them
# (so $A_Q$, $A_K$ and $A_V$ sit side by side as the columns of its transpose). It draws
# no new weights. Afterwards `q_proj`, `k_proj` and `v_proj` are no longer layers of
# their own but views of the matrix's row blocks: they leave the list of modules, and a
# checkpoint stores one `qkv_proj` where it stored three (a checkpoint written before
# still loads: chapter 9's does). One product gives Q, K and V, forward and backward; the attention's
# output stays what it was:

# %%
mha = attention.MultiHeadAttention(
    model_config.d_model, model_config.n_heads, bias=False
)  # chapter 2's attention, three layers
x = torch.randn(2, 5, model_config.d_model)  # (B, T, d_model)
with torch.no_grad():
    before = mha(x)[0]  # (2, 5, d_model)
    mha.stack_projections()  # the three weights become rows of one matrix
    after = mha(x)[0]
# qkv_proj: A_Q, A_K and A_V transposed, their rows stacked, (3·d_model, d_model);
# k_proj: its rows d_model:2·d_model (the end excluded), a view
print(mha.qkv_proj, mha.k_proj, sep="\n")
same = torch.allclose(before, after, atol=1e-6)
print(f"the output before and after the stacking the same: {same}")
print(f"parameter tensors of gpt.GPT here: {len(list(toy.parameters()))}")
assert same

# %% [markdown]
# `benchmarks/nanogpt_throughput.py` trains both models on the same configuration, in
# the same process and with the same threads, taking turns, and writes the medians and
# the rounds' paired ratios (below). Its result is committed in the repository (the
# script needs nanoGPT's `model.py`, which this book does not ship):
# `benchmark.committed_result` reads it back, and `gpt_measurements.throughput` reads
# its ratios:

# %%
bench = benchmark.committed_result("nanogpt_throughput.json")
print(gpt_measurements.measured_on(bench))  # when, torch, threads; the processor
same = bench["parameters"] == n_toy
print(f"same number of parameters as nanoGPT's configuration above: {same}")

# %% tags=["nbval-ignore-output"]
# tokens per second of each model, their ratio, tensors and operations, ratio per round
lines, words = gpt_measurements.throughput(bench)  # words: for the prose below
print("\n".join(lines))
print(gpt_measurements.live_throughput(result, config, run.device))  # the same units
assert min(bench["ratio"], bench["ratio_cpu"]) > 0.9  # about equal speed, or faster
tensors = bench["parameter_tensors"]
assert tensors["gpt.GPT"] == tensors["nanoGPT"]  # q, k, v stacked: as many tensors
assert bench["paired"]["wall"]["low"] <= 1  # fewer operations: not measurably faster
report.glue_all(words)  # the ratios, rounds, tensors, the loop's and phases' verdicts

# %% [markdown]
# The script ran {glue:text}`rounds` rounds. In each round the two models trained back
# to back, each going first in half of the rounds, so a round's ratio of their speeds
# leaves out what the machine was doing then: the rounds are paired measurements, as
# seeds were in the chapters before. Their median comes with the sign test's interval,
# which only counts how many rounds fall above or below a value. Each round lands
# above the true median ratio with probability 1/2, so sorting the ratios and taking
# the {glue:text}`rank` from each end gives an interval that holds the true median with
# probability {glue:text}`coverage` (95 % at least), whatever the shape of the noise,
# provided the rounds are independent. A round in which the machine stalled moves that
# interval by one rank, where it would stretch an interval around the mean.
#
# On the committed measurement, the median of the rounds' ratios of `gpt.GPT`'s tokens
# per second to nanoGPT's is {glue:text}`ratio` by the wall clock (interval
# {glue:text}`ratio_interval`) and {glue:text}`ratio_cpu` per CPU second
# ({glue:text}`ratio_cpu_interval`); single rounds ran from {glue:text}`rounds_mult`.
# The ratio is the fair comparison: both models measured side by side, taking turns.
# The live number is a different model (narrower, so more tokens per second) on other
# threads or another device, and includes what the benchmark leaves out (drawing
# batches, the schedule); it ran at another time, on a machine that may be busier or
# quieter.
#
# The two models have the same parameters (checked above), so the same matrix
# products, and with the projections stacked the same parameter tensors
# ({glue:text}`our_tensors` each). A step of `gpt.GPT` runs {glue:text}`extra_ops`
# (the profiler's count of small operations). An optimiser works tensor by tensor, so
# the script also timed the step with AdamW as a plain loop over the tensors
# (PyTorch's default on a CPU) instead of the book's multi-tensor AdamW:
# {glue:text}`loop_ratio` ({glue:text}`loop_ratio_interval`); {glue:text}`loop_verdict`.
#
# The script's last pass times the phases of a step apart, the models again taking
# turns (added up, the phases come close to the step time from the throughput:
# {glue:text}`phase_sums`). Per phase, `gpt.GPT`'s time over nanoGPT's, each round
# timed as the median of its steps and the rounds read the same way:
# {glue:text}`phase_intervals`; {glue:text}`phase_verdict`. In milliseconds per step,
# `gpt.GPT`'s time minus nanoGPT's: {glue:text}`phase_extra`. Fewer operations did not
# make `gpt.GPT`'s step measurably faster. What the stacking settles is the tensor count: kept as three
# tensors per attention, the projections would give the model eight more tensors for
# clipping and AdamW to handle (35 against 27) and add a stacking of the weights to
# every step.
#
# The script also ran a second time on the same chip, held to AVX2: the vector
# instructions of CPUs without AVX-512, such as AMD's before Zen 4. Three environment
# variables do that, one each for torch's own kernels, for MKL (which makes the matrix
# products) and for oneDNN; the file records which were set, and torch confirms its
# own. This imitates those CPUs' instructions only, not their caches, their clocks or
# how MKL treats a chip that is not Intel's:

# %%
# the same benchmark, the same chip, held to another kind of CPU's instructions
avx2 = benchmark.committed_result("nanogpt_throughput_avx2.json")
lines, words = gpt_measurements.code_paths([bench, avx2])  # rounds paired, per file
print("\n".join(lines))
intervals = [b["paired"][clock] for b in (bench, avx2) for clock in ("wall", "cpu")]
assert all(i["low"] <= 1 for i in intervals)  # gpt.GPT measurably faster nowhere
assert min(i["low"] for i in intervals) > 0.95  # nor 5 % behind anywhere
speed = [sum(b["tokens_per_s"].values()) for b in (bench, avx2)]  # both models
assert speed[1] < speed[0]  # held to AVX2, slower: the settings took effect
report.glue_all(words)  # each path's intervals and what they say

# %% [markdown]
# On each code path, the median of the rounds' ratios and its interval:
# {glue:text}`paths`. What the intervals say: {glue:text}`paths_verdict`. Both models
# together ran {glue:text}`paths_cost`, so the settings took effect.
#
# So the implementation saves no measurable time: on both code paths and both clocks
# the intervals lie {glue:text}`paths_span`, so whatever difference there is, it is
# smaller than about {glue:text}`paths_bound` in either direction. The time the book's
# recipe saves comes from the recipe itself.
#
# ## 5. What got it there: an ablation
#
# `benchmarks/shakespeare_ablation.py` trains a ladder of recipes, one change per rung,
# with three seeds each (the seed sets the initial weights and the batches), every run
# on one thread and evaluated on the full validation split. It starts from nanoGPT's
# recipe with its schedule fitted to the book's 800 steps (`nanogpt-short`), then raises
# the learning rate (`schedule`), trades width for batch (`width`: width 64, batches of
# 32), swaps GELU for ReLU (`relu`), and last replaces the learned positions by RoPE
# (`book-quick`). Two more rows sit outside the ladder: nanoGPT's own recipe with its
# 2,000 steps (the baseline), and an untied head on top of the book's recipe.
#
# One caution. Like nanoGPT, the book splits Shakespeare into training and validation
# text only, and the ladder was built by looking at the validation loss, so the
# table's numbers for the book's recipe are a little optimistic. Every run is therefore
# also scored on each half of the held-out text alone (`val_loss_halves`): after the
# ladder, the final pick among the recipes is made on the first half and reported on
# the second, which that pick did not see (the ladder's own steps did).
# `gpt_measurements.ablation_rows` reads the committed runs into one row per variant,
# `gpt_measurements.ablation_table` prints them, and `gpt_measurements.ladder_steps`
# compares each rung with the one before.

# %%
ablation = benchmark.committed_result("shakespeare_ablation.json")
rows = gpt_measurements.ablation_rows(ablation)  # one row per variant, its seeds' runs
print("\n".join(gpt_measurements.ablation_notes(ablation, rows)))  # and the file's note

# %% tags=["nbval-ignore-output"]
print("\n".join(gpt_measurements.ablation_table(rows)))
print(f"{'bigram':14s}{0:6d}{'-':>7s}  {bigram_nats:.3f} (counts, no training)")
ladder = ["nanogpt-short", "schedule", "width", "relu", "book-quick"]
steps_said = gpt_measurements.ladder_steps(rows, ladder)  # rung -> its change, in words
for before, after in zip(ladder, ladder[1:]):
    print(f"{before:>13s} -> {after:10s} {steps_said[after]}")
report.glue_all({f"step_{k.replace('-', '_')}": v for k, v in steps_said.items()})
book = rows["book-quick"]
assert len(book["losses"]) >= 3 and max(book["losses"]) <= 1.88  # every seed on file
nano_row = rows["nanogpt"]
report.glue("nano_loss", statistics.mean(nano_row["losses"]), "{:.3f}")
report.glue("nano_seeds", len(nano_row["losses"]))
untied_diff, _, untied_verdict = report.compared(
    book["losses"], rows["untied"]["losses"]
)
report.glue("untied_step", f"{untied_diff:+.3f} nats, {untied_verdict}")

# %% [markdown]
# Read the table as a ladder: each rung adds one change to the rung above, so each
# difference is what that change does *given the ones before it*, not on its own. Each
# comparison below gives the difference of the means and, in words from
# `report.compare_seeds`, what the seeds show: "lower for every seed" only when every
# seed of the rung lies below every seed of the rung before it *and* Welch's $t$-test
# at the 5 % level puts the gap beyond the seeds' spread (chapter 4 explains why
# separate ranges alone are not enough: two identical recipes of three seeds each
# fall apart that way one time in ten), "higher for every seed" the other way round,
# "no ranking" otherwise.
#
# - The schedule (`nanogpt-short` → `schedule`): {glue:text}`step_schedule`. With only
#   800 steps, nanoGPT's peak learning rate of $10^{-3}$ stops far short of 1.88; ten
#   times that peak, after half the warm-up, gets much closer.
# - Width for batch (`schedule` → `width`): {glue:text}`step_width`. The two go
#   together: a 64-wide model costs about a quarter of a 128-wide one per token in its
#   weight matrices, so a step can read 32 windows instead of 12 (whether the pair
#   costs less, the CPU column's noise, measured below, decides). The rung changes both at once, at a
#   learning rate chosen for the final recipe, so it cannot say whether the larger
#   batch, the narrower model, or how well $10^{-2}$ suits it did the work.
# - ReLU (`width` → `relu`): {glue:text}`step_relu`. ReLU changes neither the loss nor
#   any time the table can resolve; it stays as the simpler function (a comparison with
#   zero where the exact GELU evaluates the error function, forward and backward).
# - RoPE (`relu` → `book-quick`): {glue:text}`step_book_quick`. One reading (not
#   tested here): rotating queries and keys by their positions (chapter 4) gives every
#   attention score the distance between two characters with nothing to learn, while a
#   learned table must learn each of its 64 positions from the data, and 800 steps
#   are few for that.
#
# **The choice, on one half; the report, on the other.** Among nanoGPT's own recipe
# and the five rungs, `gpt_measurements.half_scores` picks the lowest mean loss on the
# first half of the held-out text, and the cell reads every candidate on both halves:

# %%
candidates = ["nanogpt", *ladder]
half_choice, halves = gpt_measurements.half_scores(ablation, candidates)
for name in candidates:
    first, second = map(report.mean_sd, halves[name])  # over the seeds, each half
    print(f"{name:>13s}  first half {first}  second half {second}")
half_diff, half_sd, half_verdict = report.compared(
    halves["nanogpt"][1], halves[half_choice][1]
)  # the choice against nanoGPT's recipe, on the half the choice never saw
print(f"chosen on the first half: {half_choice}; on the second, against nanogpt: "
      f"{half_diff:+.3f} nats, {half_verdict}")  # fmt: skip

# %% tags=["hide-input"]
assert half_choice == "book-quick" and half_verdict == "lower for every seed"
first_means = {n: statistics.mean(halves[n][0]) for n in candidates}
runner_up = min((m for n, m in first_means.items() if n != half_choice))
assert runner_up - first_means[half_choice] > 0.1  # a wide margin on the first half
assert all(  # every recipe scores worse on the second half than on the first
    statistics.mean(halves[n][1]) > statistics.mean(halves[n][0]) for n in candidates
)
half_words = {"half_choice": half_choice, "half_verdict": half_verdict,
              "half_book": report.mean_sd(halves[half_choice][1]),
              "half_nano": report.mean_sd(halves["nanogpt"][1]),
              "half_diff": f"{half_diff:+.3f}",
              "half_sd": f"{half_sd:.3f}"}  # fmt: skip
report.glue_all(half_words)

# %% [markdown]
# The first half picks {glue:text}`half_choice`, the recipe the ladder was built
# towards, by a wide margin. On the second half, which this last pick did not see, it
# scores {glue:text}`half_book` nats per character against {glue:text}`half_nano` for
# nanoGPT's own 2,000-step recipe ({glue:text}`half_diff`, larger spread
# {glue:text}`half_sd`: {glue:text}`half_verdict`). That removes the optimism of the
# final pick, not that of building the ladder, whose rungs and rates were tried on the
# whole validation text: only text set aside before any tuning would remove that.
# (Every recipe scores worse on the second half than on the first; the two halves are
# different text, so the change from one to the other is not the optimism.)
#
# Then the CPU column, recorded with two or three runs sharing the machine (the note
# printed above). How noisy is it? The file answers three ways: the seeds of one
# recipe; nanoGPT's model, the same in the `nanogpt` and `nanogpt-short` rows, whose
# cost per step should not depend on how many steps it takes; and the `schedule` row,
# nanoGPT's model again for as many steps as `nanogpt-short`
# (`gpt_measurements.clock_noise` reads all three).

# %% tags=["nbval-ignore-output"]
clock = gpt_measurements.clock_noise(rows)  # seeds' spread, nanoGPT's drift per step
print("\n".join(gpt_measurements.clock_lines(clock, rows)))  # and characters read
ms_per_step, noise = clock["ms_per_step"], clock["noise"]  # CPU ms per step, medians
# book-quick's share of nanoGPT's CPU time (medians of the seeds on file), of its steps
time_share, steps_share = clock["time_share"], clock["steps_share"]
assert time_share * (1 + noise) < 1  # a saving larger than the noise
step_cost = ms_per_step["book-quick"] / ms_per_step["nanogpt-short"] - 1
shares = {key: clock[key] for key in ("seed_spread", "noise")}
report.glue_all(shares | {"steps_share": steps_share}, "{:.0%}")
report.glue("step_drift", clock["step_drift"], "{:+.0%}")
report.glue("model_gap", clock["model_gap"], "{:+.0%}")
for key, value in ms_per_step.items():
    report.glue(f"ms_{key.replace('-', '_')}", value, "{:.0f}")
report.glue("time_share", time_share, "{:.0%}")
beyond = "within" if abs(step_cost) <= noise else "beyond"
report.glue("step_cost", f"{step_cost:+.0%}, {beyond} the clock's noise")

# %% [markdown]
# The seeds of one recipe differ in CPU time by up to {glue:text}`seed_spread`;
# nanoGPT's model costs {glue:text}`ms_nanogpt` ms of CPU per step in its 2,000-step
# runs and {glue:text}`ms_nanogpt_short` ms in the 800-step ones
# ({glue:text}`step_drift`); and `schedule`, the same model for the same 800 steps at
# another learning rate, took {glue:text}`model_gap` CPU time against `nanogpt-short`.
# So differences of {glue:text}`noise` or less in this column are noise. The book's
# recipe trains in {glue:text}`time_share` of the CPU time of nanoGPT's full recipe, a
# saving larger than the noise, and it comes from taking fewer steps: the step counts
# alone (800 of 2,000) predict {glue:text}`steps_share` of the time. A step of
# `book-quick` costs {glue:text}`ms_book_quick` ms against
# {glue:text}`ms_nanogpt_short` ms for nanoGPT's model in the same 800-step rows
# ({glue:text}`step_cost`). The book's recipe reads about as many characters in all
# (printed above): the saving is in steps, not in data.
#
# And this page's own run of section 3, next to the table:

# %% tags=["nbval-ignore-output"]
# the quick edition on a CPU reruns a row of the table
on_cpu = run.device.type == "cpu"
same_as_table = gpt_measurements.reruns_ablation(config, ablation, on_cpu)
assert same_as_table == (on_cpu and recipe == quick_recipe)  # any other run does not
live_clock = gpt_measurements.live_clock(
    result, config, ablation, run.pick("book-quick", "book-full"), run.device
)
print(live_clock)
report.glue("live_clock", live_clock)

# %% [markdown]
# {glue:text}`live_clock`
#
# Measured our way (every held-out character), nanoGPT's own recipe reaches
# {glue:text}`nano_loss` (mean of {glue:text}`nano_seeds` seeds), not quite its
# published 1.88; the book's recipe is below both, for every seed. The fused attention
# and projections of section 4 change the time of a step, not its result, and they serve
# nanoGPT's model as much as the book's. The tied head stays nanoGPT's: an untied head
# on the book's recipe gives {glue:text}`untied_step` against the tied one.

# %% [markdown]
# ## 6. Decoding: what temperature, top-k and top-p leave
#
# To write, the model turns the logits $z$ at the last position into a distribution
# and draws from it. The **temperature** $\tau$ divides the logits,
# $p_i \propto e^{z_i/\tau}$: $\tau < 1$ sharpens, $\tau > 1$ flattens. **Top-$k$**
# keeps the $k$ most likely tokens {cite}`fan2018hierarchical`; **top-$p$** (nucleus)
# keeps the fewest whose probabilities add up to at least $p$
# {cite}`holtzman2020curious`, so the number it keeps adapts to how sure the model is.
# Both renormalise what they keep. Here is what each leaves of the trained model's
# next-character distribution after "ROMEO:\nI will":

# %%
model.eval()
prompt = torch.tensor([chars.encode(list("ROMEO:\nI will"))], device=run.device)
z = sampling.next_logits(model, prompt)[0]  # (V,): logits of the next character
settings = {
    "model, τ = 1": z,
    "τ = 0.5": sampling.apply_temperature(z, 0.5),
    "τ = 2": sampling.apply_temperature(z, 2.0),
    "top-k, k = 3": sampling.top_k_filter(z, 3),
    "top-p, p = 0.9": sampling.top_p_filter(z, 0.9),
}
dists = {name: logits.softmax(-1) for name, logits in settings.items()}
# how many characters top-p keeps depends on the trained model: check what defines it
kept = dists["top-p, p = 0.9"] > 0
p_sorted = dists["model, τ = 1"].sort(descending=True).values  # (V,)
n_kept = int(kept.sum())
smallest = bool(p_sorted[: n_kept - 1].sum() < 0.9 <= p_sorted[:n_kept].sum())
print("top-k keeps", int((dists["top-k, k = 3"] > 0).sum()), "characters")
print("top-p keeps the fewest most likely characters with mass ≥ 0.9:", smallest)

# %% tags=["hide-input"]
# the model's 10 most likely characters, and what each setting keeps of them
fig = plotting.kept_distributions(dists, chars.itos, top=10, xlabel="next character")
fig.suptitle("What each decoding rule leaves of one next-character distribution")
plt.show()

# %% [markdown]
# How many characters top-$p$ keeps depends on how sure the model is. Where is it sure?
# The cell below asks the held-out text: at every position of 200 validation windows
# that has read at least 32 characters, it takes the probability of the most likely
# next character and the number of characters top-$p$ ($p = 0.9$) keeps, and averages
# them over three kinds of position: after a letter that the next letter continues
# (inside a word), after a letter that ends a word, and after a space. Then three single
# contexts, one of each kind. `sampling.certainty_by_kind` does the averaging.

# %% tags=["nbval-ignore-output"]
xv, yv = lm_data.windows_at(val_ids, torch.arange(200) * 64, context=64)  # (200, 64)
with torch.no_grad():
    zv = model(xv.to(run.device))[:, 31:].float().cpu()  # (200, 33, V): >= 32 read
letter = torch.tensor([c.isalpha() for c in chars.itos])  # (V,)
space = chars.encode([" "])[0]
# (200, 33) each: the character read, the one that came
where = sampling.certainty_by_kind(zv, xv[:, 31:], yv[:, 31:], letter, space, p=0.9)
print("\n".join(sampling.certainty_lines(where)))  # per kind: p, quartiles, nucleus
for kind, w in where.items():
    report.glue(f"top_{kind.split()[0]}", w["top"], "{:.2f}")
    report.glue(f"kept_{kind.split()[0]}", w["kept"], "{:.0f}")
contexts = {"end of a word": "ROMEO:\nI will",
            "inside a word": "First Citizen:\nBefore we proceed any furth",
            "after a space": "ROMEO:\nI will "}  # fmt: skip
n_nucleus = {}
for kind, context in contexts.items():
    ctx = torch.tensor([chars.encode(list(context))], device=run.device)
    zc = sampling.next_logits(model, ctx)[0]  # (V,)
    n_nucleus[kind] = int(sampling.nucleus_size(zc, 0.9))
    top, best = zc.softmax(-1).max(-1)
    said = f"{top:.2f} on {chars.itos[int(best)]!r}, top-p keeps {n_nucleus[kind]}"
    print(f"{kind:13s} ...{context[-10:]!r}: {said}")
    report.glue(f"ctx_{kind.split()[0]}", said)
inside, end, after = where.values()
assert after["top"] < min(inside["top"], end["top"]) / 2  # far less sure
assert after["kept"] > 2 * max(inside["kept"], end["kept"])  # a larger set
assert inside["top"] < 0.8  # sure, on average, is not certain
assert n_nucleus["after a space"] > max(n_nucleus["inside a word"],
                                        n_nucleus["end of a word"])  # fmt: skip

# %% [markdown]
# After a letter the model is far surer than after a space. Inside a word its most
# likely next character has on average $p =$ {glue:text}`top_inside`, and top-$p$ keeps
# {glue:text}`kept_inside` of the 65 characters; at the end of a word
# {glue:text}`top_end` and {glue:text}`kept_end`; after a space, where a new word
# begins, only {glue:text}`top_after`, and top-$p$ keeps {glue:text}`kept_after`. Surer
# is not certain: these are averages over positions that differ a great deal (the
# quartiles, printed), and a single context can sit anywhere among them. After
# "…I will" the model puts {glue:text}`ctx_end`; inside "…any furth",
# {glue:text}`ctx_inside`; after "…I will ", {glue:text}`ctx_after`. The nucleus
# follows the model's certainty, not the position in the word as such.

# %% [markdown]
# A distribution is not yet a text. The cell below samples
# {glue:text}`samples_per_setting` continuations of 300 characters for each setting and
# measures two things: the share of generated words that occur in the training text
# (are the words real?), and, sample by sample, the share of distinct strings among
# the 297 strings of 4 characters a sample holds, averaged over the samples (does the
# text repeat itself?). Every sample has the same length, so that share does not depend
# on how many words a setting writes. Greedy decoding is deterministic: from one prompt
# it writes one text however often it runs, so it is scored once. For scale, the same
# share on pieces of 300 characters of held-out Shakespeare. `sampling.continuations`
# samples; `metrics.known_word_share` and `metrics.mean_distinct_share` (the mean of
# `metrics.distinct_ngram_share` over the samples) measure.

# %% tags=["nbval-ignore-output"]
known = set(text[: len(train_ids)].split())
decode_settings = {"greedy": dict(temperature=0.0), "τ = 0.5": dict(temperature=0.5),
                   "τ = 1": {}, "τ = 1.5": dict(temperature=1.5),
                   "top-p 0.9": dict(top_p=0.9)}  # fmt: skip
val_text = "".join(chars.decode(val_ids.tolist()))
every = len(val_text) // samples_per_setting  # pieces spread over the split
pieces = [val_text[i : i + 300] for i in range(0, samples_per_setting * every, every)]
reference = metrics.mean_distinct_share(pieces)  # strings of 4 characters, per piece
print(f"held-out text : distinct 4-character strings {reference:5.1%} per piece")
# greedy: one text, see above; the others: samples_per_setting each, (B, 300) ids
new_ids = sampling.continuations(
    model, prompt, 300, samples_per_setting, decode_settings
)
texts = {n: ["".join(chars.decode(r.tolist())) for r in b] for n, b in new_ids.items()}
# setting -> share of real words; of distinct strings, per sample, then averaged
share = {name: metrics.known_word_share(new, known) for name, new in texts.items()}
variety = {name: metrics.mean_distinct_share(new) for name, new in texts.items()}
for name in texts:
    print(f"{name:14s}: words found in the training text {share[name]:5.1%}, "
          f"distinct 4-character strings {variety[name]:5.1%}")  # fmt: skip
greedy_text, sample_text = texts["greedy"][0], texts["τ = 1"][0]
report.glue("samples_per_setting", samples_per_setting)
report.glue("greedy_variety", f"{variety['greedy']:.0%}")
report.glue("text_variety", f"{reference:.0%}")
assert share["τ = 0.5"] > share["τ = 1"] > share["τ = 1.5"]  # colder: more real ones
assert variety["greedy"] < variety["τ = 0.5"] < variety["τ = 1"]  # and more repeats
assert variety["greedy"] < reference / 2  # greedy repeats itself: a loop
assert share["top-p 0.9"] > share["τ = 1"]  # cutting the tail removes misspellings
# of the words not in the training text at τ = 1, the share top-p no longer produces,
# and how far another draw of as many samples could move it (bootstrap, 90 %)
removed, low, high = metrics.unknown_words_removed(
    texts["τ = 1"], texts["top-p 0.9"], known
)
print(f"top-p 0.9 removes {removed:.0%} of the unknown words of τ = 1 "
      f"(90 % bootstrap interval {low:.0%} to {high:.0%})")  # fmt: skip
report.glue("topp_removed", f"{removed:.0%} ({low:.0%} to {high:.0%})")
assert removed > 0 and high < 1  # top-p removes some of the invented words, not all

# %% [markdown]
# Colder sampling produces more real words and repeats itself more. Greedy decoding,
# the coldest, falls into a loop: only {glue:text}`greedy_variety` of its strings of 4
# characters are distinct, against {glue:text}`text_variety` in held-out Shakespeare
# (its text is printed below). Sampling at $\tau = 1$ reproduces the model's
# own distribution, mistakes included. Top-$p$ cuts off the unlikely tail, and with it
# some of the words that sampling at $\tau = 1$ invents (words found nowhere in the
# training text), not all: {glue:text}`topp_removed` of them in this draw of
# {glue:text}`samples_per_setting` samples per setting. In brackets, the 90 % interval
# when the samples are drawn again from the ones we have: how far the samples alone
# move the share, for this trained model. The invented words top-p still writes come
# from characters inside the nucleus, each plausible after the one before it, that
# together make no word. The start of greedy's text, and a sample at $\tau = 1$:

# %% tags=["nbval-ignore-output"]
print("greedy:\nROMEO:\nI will" + greedy_text[:120] + "...\n")
print("τ = 1:\nROMEO:\nI will" + sample_text)
assert len(sample_text) == 300 and set(sample_text) <= set(chars.itos)

# %% [markdown]
# ## 7. The same code is GPT-2
#
# GPT-2 {cite}`radford2019language` is this model with learned positions, pre-norm
# LayerNorm ($\varepsilon = 10^{-5}$), the tanh approximation of GELU, biases
# everywhere and a tied head: `gpt2_weights.gpt2_config()` builds that architecture,
# and `gpt2_weights.load_hf_gpt2` copies the weights of a Hugging Face
# `GPT2LMHeadModel` into it.
# GPT-2 stores its linear layers transposed (`Conv1D`) and its query, key and value
# projections side by side in one matrix; the loader cuts them apart. What this section
# checks is GPT-2's *layout*, not OpenAI's trained weights: a small `GPT2LMHeadModel`
# with random weights is built from a configuration (`gpt2_weights.random_hf_gpt2`, no
# download), copied, and both models must give the same logits. Trained weights are numbers in the same layout, so
# the loader treats them alike, but this chapter neither downloads nor runs them.

# %%
sizes = dict(vocab_size=101, max_len=32, d_model=64, n_layers=2, n_heads=4)
hf_gpt2 = gpt2_weights.random_hf_gpt2(**sizes, seed=0)  # a GPT2LMHeadModel, no download
ours = gpt.GPT(gpt2_weights.gpt2_config(**sizes)).eval()
gpt2_weights.load_hf_gpt2(ours, hf_gpt2)  # GPT-2's layout into ours
ids_check = torch.randint(0, 101, (3, 32), generator=torch.Generator().manual_seed(1))
with torch.no_grad():
    gap = (ours(ids_check) - hf_gpt2(ids_check).logits).abs().max().item()
print(f"logits agree with GPT2LMHeadModel within 1e-4: {gap < 1e-4}")

# %% tags=["nbval-ignore-output"]
print(f"largest difference of the logits: {gap:.1e}")
assert gap < 1e-4

# %% [markdown]
# ## 8. GPT-3's scale
#
# GPT-3 {cite}`brown2020gpt3` is the same decoder-only stack at a different scale: 96
# layers, $d_\text{model} = 12{,}288$, 96 heads of 128 dimensions, a context of 2,048
# tokens, trained on 300 billion tokens. Its parameters follow from the shapes. Each
# block has the four attention projections ($4d^2 + 4d$ with biases), a feed-forward
# layer of width $4d$ ($8d^2 + 5d$) and two LayerNorms ($4d$); add the token and
# position embeddings and the final LayerNorm, the head being tied:
#
# $$N = n_\text{layers}\,(12 d^2 + 13 d) + (V + T_\text{max})\, d + 2d.$$
#
#
#
# Chapter 10 wrote this formula as `params.gpt_params`; here it meets a real module.

# %%
gpt_params = params.gpt_params  # (vocab_size, max_len, d_model, n_layers, d_ff=4d)
gpt2_small = gpt.GPT(gpt2_weights.gpt2_config())  # 12 layers, d_model 768
print(f"GPT-2 small: formula {gpt_params(50257, 1024, 768, 12):,}, "
      f"counted {params.count_params(gpt2_small):,}")  # fmt: skip
n_gpt3 = gpt_params(50257, 2048, 12288, 96)
print(f"GPT-3: {n_gpt3:,} parameters ({n_gpt3 / 1e9:.1f} B)")
del gpt2_small

# %% [markdown]
# The formula reproduces the counted parameters of a real module (GPT-2 small, 124 M),
# and gives GPT-3's 175 B. Training costs about $6ND$ floating-point operations for $N$
# parameters and $D$ tokens (2 for the forward pass, 4 for the backward)
# {cite}`kaplan2020scaling`; the weights take 2 bytes each in fp16; and the KV cache of
# one sequence at full context holds $2 \cdot n_\text{layers} \cdot n_\text{heads}
# \cdot d_\text{head} \cdot T$ values (chapter 9). Next to the model we just trained:

# %%
models = {
    "this chapter": dict(N=n_model, D=tokens, L=config.n_layers, H=config.n_heads,
                         dh=config.d_model // config.n_heads, T=config.context),
    "GPT-3": dict(N=n_gpt3, D=300e9, L=96, H=96, dh=128, T=2048),
}  # fmt: skip
for name, m in models.items():
    cache = kv_cache.kv_cache_bytes(m["L"], m["H"], m["dh"], seq_len=m["T"])
    print(f"{name:12s} N = {m['N']:.3g}, D = {m['D']:.3g} tokens, "
          f"6ND = {6 * m['N'] * m['D']:.2e} FLOP")  # fmt: skip
    size = 2 * m["N"]  # bytes of fp16 weights
    weights = f"{size / 1e9:,.1f} GB" if size >= 1e9 else f"{size / 1e6:,.1f} MB"
    print(f"{'':12s} fp16 weights {weights}, KV cache at "
          f"{m['T']} tokens {cache / 2**20:9,.2f} MiB")  # fmt: skip
report.glue("gpt3_gb", 2 * n_gpt3 / 1e9, "{:.0f}")
report.glue("gpt3_flop", 6 * n_gpt3 * 300e9, "{:.1e}")
ratio = 6 * n_gpt3 * 300e9 / (6 * n_model * tokens)
print(f"GPT-3's training took {ratio:.1e} times this chapter's compute")

# %% [markdown]
# {glue:text}`gpt3_gb` GB of weights do not fit on any single accelerator, and
# {glue:text}`gpt3_flop` operations take weeks on a thousand GPUs (exercise 3): that
# is why the rest of this chapter is about
# spreading training over many processes.
#
# ## 9. Training that scales out
#
# The chapter's model trains from the command line too, as a script would on a
# cluster. `python -m transformer_book.train gpt` takes a recipe, a JSON configuration
# and single options, each overriding the one before; it logs, evaluates, and with
# `--out` writes `config.json`, a checkpoint and `history.json`:
#
# ```bash
# python -m transformer_book.train gpt --recipe book-quick --out runs/quick
# python -m transformer_book.train gpt --recipe nanogpt-cpu --lr 2e-3 --steps 500
# python -m transformer_book.train gpt --out runs/quick --resume   # after a stop
# ```
#
# The checkpoint stores the weights as safetensors (`model.safetensors`) and the
# optimiser's moments and the step in `trainer.pt`, each process's random state in
# `rng-<rank>.pt`, so a resumed run continues the same loss curve rather than a similar
# one. Checked here on a tiny model: stopped after 3 of 8 steps, then resumed.

# %%
tiny = dataclasses.replace(nano, d_model=32, n_layers=1, n_heads=2, context=16,
                           batch_size=4, steps=8, warmup=2, lr=3e-3, log_every=0,
                           device=str(run.device))  # fmt: skip
with tempfile.TemporaryDirectory() as tmp:
    whole = gpt_training.run(tiny, out=f"{tmp}/whole")
    gpt_training.run(tiny, out=f"{tmp}/cut", stop_at=3)  # as if the job were killed
    resumed = gpt_training.run(tiny, out=f"{tmp}/cut", resume=True)
    files = sorted(p.name for p in Path(tmp, "cut").iterdir())
diff = max(abs(a - b) for a, b in zip(whole["history"], resumed["history"]))
print(f"files: {files}")
print(f"resumed curve equals the uninterrupted one within 1e-6: {diff < 1e-6}")

# %% [markdown]
# **Several processes.** Under `torchrun`, every process runs the same program.
# `training.train` joins the process group (gloo on CPUs, NCCL on GPUs), wraps the
# model in PyTorch's `DistributedDataParallel` {cite}`li2020pytorch`, and each process
# reads its own share of every batch; after the backward pass the gradients are
# averaged across processes, so every copy takes the same step. `--batch_size` is per
# process: 4 processes with batch 12 train like 1 process with batch 48. The book's
# tests check that 2 gloo processes with batch $b$ give the same loss curve as one
# process with batch $2b$ (within $10^{-5}$ over 10 steps).

# %% tags=["hide-input"] mystnb={"image": {"alt": "Three ranks side by side under one batch of 3 times b windows drawn from the same seeded generator on every rank. Rank r takes windows r times b to (r + 1) times b minus 1, runs a model copy forward and computes its loss, then the backward pass gives its gradients g0, g1, g2. Double arrows between the gradient boxes are the all-reduce, which averages them to g-bar, the gradient of the whole batch; every rank then takes the same AdamW step with g-bar."}}
diagrams.gpt.data_parallel(3)
plt.show()

# %% [markdown]
# **On a cluster.** One node with 8 GPUs, and 4 such nodes (run the same command on
# every node, with its `--node_rank`):
#
# ```bash
# torchrun --standalone --nproc_per_node=8 \
#     -m transformer_book.train gpt --recipe book-full --out runs/full
#
# torchrun --nnodes=4 --node_rank=$NODE_RANK --nproc_per_node=8 \
#     --rdzv_backend=c10d --rdzv_endpoint=$HEAD_NODE:29500 \
#     -m transformer_book.train gpt --recipe book-full --out runs/full
# ```
#
# Nothing in the model code changes. What changes is the effective batch (processes ×
# `--batch_size`: divide the recipe's `--batch_size` by the number of processes to keep
# it; a larger effective batch is a different recipe, and raising `--lr` with it, as
# the linear scaling rule does, adapts to that recipe without promising the same
# result), that only rank 0 logs and writes the checkpoint (put `--out` on a shared
# file system, so that `--resume` finds it from any node), and the backend: NCCL
# between GPUs, gloo between CPUs.
#
# ## Exercises
#
# ### Exercise 1: top-k and top-p, ties included
# Write `top_k_probs(logits, k)` and `top_p_probs(logits, p)` for a vector of logits
# (V,): each returns the next-token distribution (V,) after filtering, renormalised.
# Top-k keeps the $k$ largest logits *and every logit tied with the $k$-th*; top-p
# keeps the fewest most likely tokens whose probabilities reach $p$, so the token that
# crosses $p$ stays. Predict first: for logits $(2, 1, 1, 1, 0)$ and $k = 2$, how many
# tokens survive? The check names the usual mistakes (keeping exactly $k$ indices on
# ties, dropping the token past $p$, forgetting to renormalise).


# %%
def top_k_probs(logits, k):
    # YOUR CODE HERE
    raise NotImplementedError


def top_p_probs(logits, p):
    # YOUR CODE HERE
    raise NotImplementedError


# %% tags=["solution", "hide-cell"]
def top_k_probs(logits, k):
    kth = logits.topk(k).values[-1]  # the k-th largest value: ties with it stay
    return logits.masked_fill(logits < kth, float("-inf")).softmax(-1)


def top_p_probs(logits, p):
    probs = logits.softmax(-1)  # (V,)
    sorted_p, order = probs.sort(descending=True)
    before = sorted_p.cumsum(0) - sorted_p  # the mass of the more likely tokens
    keep = torch.zeros_like(probs, dtype=torch.bool)
    keep[order[before < p]] = True  # still short of p before this token: keep it
    kept = probs * keep
    return kept / kept.sum()


# %%
checks.check_top_k_top_p(top_k_probs, top_p_probs)

# %% [markdown]
# ### Exercise 2: catch a model reading the future
# A model whose causal mask is broken trains to a suspiciously low loss: it copies the
# next character instead of predicting it. Write `future_leak(model, ids, t)`: replace
# every token after position `t` with a different one and return the largest change of
# the logits at positions $0 \dots t$. Predict what it returns for `gpt.GPT`; the check
# also runs it on the same weights without the mask.


# %%
def future_leak(model, ids, t):
    # YOUR CODE HERE
    raise NotImplementedError


# %% tags=["solution", "hide-cell"]
def future_leak(model, ids, t):
    changed = ids.clone()
    changed[:, t + 1 :] = (changed[:, t + 1 :] + 1) % model.config.vocab_size
    with torch.no_grad():
        a, b = model(ids)[:, : t + 1], model(changed)[:, : t + 1]
    return (a - b).abs().max().item()


# %%
checks.check_future_leak(future_leak)

# %% [markdown]
# ### Exercise 3: how long did GPT-3 train?
# Write `training_days(n_params, n_tokens, n_gpus, flops_per_gpu, utilization)`: the
# days of training at $6ND$ operations on `n_gpus` accelerators that each deliver
# `utilization` × `flops_per_gpu` operations per second. Predict first: weeks or
# months for GPT-3 on 1,024 A100s (312 TFLOP/s in bf16) at 40 %?


# %%
def training_days(n_params, n_tokens, n_gpus, flops_per_gpu, utilization):
    # YOUR CODE HERE
    raise NotImplementedError


# %% tags=["solution", "hide-cell"]
def training_days(n_params, n_tokens, n_gpus, flops_per_gpu, utilization):
    return 6 * n_params * n_tokens / (n_gpus * flops_per_gpu * utilization) / 86400


# %%
checks.check_training_days(training_days)

# %% [markdown]
# ## What we added to the package
#
# - `lm_data`: character vocabularies, nanoGPT's 90/10 split, windows with shifted
#   targets, `WindowBatches` (seeded, shared out between processes), the exact
#   held-out loss.
# - A `gpt.GPT` training step as cheap as nanoGPT's (section 4): causal attention through the fused kernel
#   (`is_causal`), the query, key and value projections stored as one matrix
#   (`MultiHeadAttention.stack_projections`, built by `stacked_linear`, with
#   `stacked_linear.RowBlock` views of its rows), the fused LayerNorm; its speed beside
#   nanoGPT's read as paired rounds (`report.median_ratio`,
#   `gpt_measurements.code_paths`). `gpt2_weights.gpt2_config` and `gpt2_weights.load_hf_gpt2` load a
#   Hugging Face GPT-2's weights (checked on GPT-2's layout with random weights).
# - `training.train` runs under `torchrun` (DistributedDataParallel) and saves and
#   resumes safetensors checkpoints; its signature and results for chapters 5–9 are
#   unchanged.
# - `python -m transformer_book.train`, the command line of section 9, with its
#   recipes (`gpt_training.RECIPES`) and `gpt_training.run`.
# - `benchmarks/nanogpt_throughput.py` and `benchmarks/shakespeare_ablation.py`, whose
#   committed results sections 4 and 5 show.
# - `benchmark.committed_result`, which reads those committed results back;
#   `gpt_measurements`, which reads them into rows, tables and words (`throughput`,
#   `ablation_rows`, `ablation_table`, `ladder_steps`, `clock_noise`, `live_clock`);
#   and `report.compare_seeds`, which words the ablation's comparisons.
# - `plotting.training_curve` (a run's loss beside its baselines) and
#   `plotting.kept_distributions` (what each decoding rule leaves);
#   `sampling.next_logits`, `sampling.certainty_lines`, `metrics.mean_distinct_share`,
#   `metrics.unknown_words_removed` (with its bootstrap interval)
#   and `gpt2_weights.random_hf_gpt2` (a GPT-2 with random weights, no download).
# - `diagrams.gpt` (next-token prediction, data parallelism) and `checks.gpt`.
