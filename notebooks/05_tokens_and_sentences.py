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
# # 5. Using the encoder: tokens and sentences
#
# An encoder turns $T$ word vectors into $T$ contextual vectors. This chapter puts a
# single encoder block to work on real data, the ATIS flight-booking queries
# {cite}`hemphill1990atis`, in the two ways every encoder is used: one label per word and
# one label per sentence.
#
# By the end of it you will be able to
#
# - turn sentences into padded batches of ids with a vocabulary built from the training
#   data only;
# - train a token classifier that tags every word of a query with its slot (slot filling),
#   choosing what needs choosing on a development split and scoring the test split once;
# - explain why token accuracy flatters a tagger, and score it by spans (precision,
#   recall, F1) against the all-"O" baseline and a lookup table that reads each word
#   alone;
# - decode the most likely tag sequence that obeys the BIO rules (Viterbi);
# - classify whole sentences (the query's intent) from a prepended [CLS] vector or from
#   the average of the contextual vectors, and compare the two over several seeds.

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
import statistics
from collections import Counter

import matplotlib.pyplot as plt
import torch

from transformer_book import (
    batching,
    bio,
    checks,
    classifiers,
    data,
    diagrams,
    masks,
    metrics,
    plotting,
    pooling,
    report,
    runtime,
    slot_features,
)
from transformer_book.vocab import Vocab

# %% tags=["parameters"]
device = "auto"  # "auto": CUDA, else Apple MPS, else the CPU
profile = "auto"  # "auto": quick on every device; "full" by name

# %%
# tiny models: one CPU thread is enough
run = runtime.setup(device, profile, seed=0, cpu_threads=1)
print(run)
# model sizes per profile, the same for the slot and the intent models
d_model, n_heads, d_ff = run.pick(quick=64, full=128), 8, run.pick(quick=128, full=512)
dropout, p_unk = run.pick(quick=0.0, full=0.3), run.pick(quick=0.1, full=0.2)
batch_size, lr = 64, run.pick(quick=1e-2, full=1e-3)
# steps at the full learning rate; every run then takes a fifth more at lr / 10
slot_steps = run.pick(quick=400, full=5000)
intent_steps = run.pick(quick=200, full=1500)
seeds = run.pick(quick=[0, 1, 2], full=[0, 1, 2, 3, 4])  # for the intent comparison
eval_every = run.pick(quick=40, full=250)  # steps between two scores on the dev split

# %% [markdown]
# ## 1. The data: ATIS
#
# Each ATIS query comes with two kinds of labels: a *slot* tag for every word (which words
# name the departure city, the date, the airline, ...) and an *intent* for the whole query
# (asking for flights, for a fare, for ground transport, ...). We use the standard split of
# {cite:t}`goo2018slotgated`, as redistributed with JointBERT {cite}`chen2019bertjoint`.
# `data.load_atis` reads it from the folder in `$TRANSFORMER_BOOK_DATA` or the local cache,
# and downloads it (checking every file's sha256) when neither has it.
#
# The three splits have three jobs. The model learns from *train*. The choice this
# chapter makes, how to decode the tags, is made by looking at *dev*; for the pooling,
# dev shows which way the seeds lean, and the test split scores both poolings. Dev
# also shows whether training was long enough. The *test* split is scored once, at the end, for the final report: a
# score on data that informed no choice is the only honest estimate of how the model
# will do on new queries. (The sizes, learning rates and numbers of steps in the
# parameters cell were set by hand before this edition was executed; no cell here
# searches over them.)

# %%
train, dev, test = (data.load_atis(split) for split in ("train", "dev", "test"))
print({"train": len(train), "dev": len(dev), "test": len(test)})
i = 0
print(" ".join(train.sentences[i]), "->", train.intents[i])
for word, tag in zip(train.sentences[i], train.tags[i]):
    print(f"{word:>12}  {tag}")

# %% [markdown]
# The slot tags follow the BIO scheme {cite}`ramshaw1995chunking`: `B-x` begins a slot of
# type `x`, `I-x` continues it, and `O` marks a word outside every slot. A few intents are
# two intents joined by `#`; we keep each combination as a class of its own. The test split
# also holds some intents and tags that never occur in training, which no model trained
# here can predict.

# %%
slot_types = {t[2:] for tags in train.tags for t in tags if t != "O"}
all_train_tags = {t for tags in train.tags for t in tags}
train_intents = set(train.intents)
n_double = sum("#" in x for x in train.intents)
print(f"{len(slot_types)} slot types, {len(all_train_tags)} distinct tags in train")
print(f"{len(train_intents)} intents in train, {n_double} train queries with two")
unseen_intent = sum(x not in train_intents for x in test.intents)
unseen_tag = sum(any(t not in all_train_tags for t in tags) for tags in test.tags)
print("test queries whose intent is unseen in train:", unseen_intent)
print("test queries with a tag unseen in train:", unseen_tag)

# %% [markdown]
# ## 2. From words to ids
#
# A vocabulary maps each word to an integer, the row of the embedding table. It is built
# from the training split only: a word seen first at test time is mapped to `<unk>`, as it
# would be for a deployed model. `<pad>` fills short sentences up to the longest one in a
# batch. The slot tags and intents get their own vocabularies, without either special
# token.

# %%
words = Vocab.from_corpus(train.sentences)
tag_vocab = Vocab.from_corpus(train.tags, pad_token=None, unk_token=None)
intent_vocab = Vocab.from_corpus(
    [[x] for x in train.intents], pad_token=None, unk_token=None
)
print(words, f"pad_id={words.pad_id} unk_id={words.unk_id}")
print(f"{len(tag_vocab)} tags, {len(intent_vocab)} intents")
test_words = [w for s in test.sentences for w in s]
n_unknown = sum(w not in words for w in test_words)
print(f"test words not in the vocabulary: {n_unknown} of {len(test_words)}")

# %%
queries = [["flights", "to", "ulan", "bator"], ["cheapest", "fare"]]
# ids (B=2, T_max=4): the unknown city becomes <unk>, the short query gets <pad>
ids, lengths = words.encode_batch(queries)
print(ids, lengths, sep="\n")
print(words.decode(ids[0]))

# %% [markdown]
# ## 3. A slot depends on its neighbours
#
# The same word can fill different slots. Here is how *boston* is tagged in the training
# data, overall and right after *from* or *to* (`bio.tag_counts` counts them):

# %%
for previous in (None, "from", "to"):
    where = "anywhere" if previous is None else "after " + previous
    counts = bio.tag_counts(train.sentences, train.tags, "boston", previous)
    print(f"{where:>10}:", counts.most_common(3))

# %% [markdown]
# The word alone leaves the slot open; the word on its left nearly settles it. So the
# model must know *where* the other words are, relative to the one being tagged. Chapter
# 4's T5 relative bias {cite}`raffel2020t5` says exactly that: each head adds one learned
# number per (bucketed) distance to its attention scores, so "look one word to the left"
# costs a single parameter and works at every position. Our classifiers take
# `positions="relative"` for it; `positions="learned"` would add BERT-style absolute
# vectors instead. This choice follows from the argument above, not from data: the
# chapter never trains the slot model with `positions="learned"`, so it does not know
# how much the relative bias gains over it on ATIS. What reading the neighbours gains
# over the word alone, though, it does measure: section 6 builds a lookup table that
# tags each word by itself, and section 9 scores it beside the model.
#
# ## 4. A token classifier: one block and a linear layer per token
#
# Embed the ids, run one encoder block with a padding mask (the padded keys get no
# attention), and map each contextual vector $h_t \in \mathbb{R}^{d}$ to one score per tag:
#
# $$\text{logits}_t = W h_t + b, \qquad W \in \mathbb{R}^{C \times d},$$
#
# with $C$ the number of tags. The same $W$ serves every position. This is
# `classifiers.WordTagger` (chapter 12's `bert_heads.TokenClassifier` puts the same
# per-token layer on a pre-trained encoder).

# %% tags=["hide-input"] mystnb={"image": {"alt": "Four words, flights to new york, enter one encoder block with a padding mask. Above the block each word has its contextual vector h_1 to h_4; the same linear layer W, b maps every h_t to that word's tag: O, O, B-toloc.city and I-toloc.city."}}
diagrams.classifiers.token_classification()
plt.show()

# %%
sizes = dict(d_model=d_model, n_heads=n_heads, d_ff=d_ff, n_layers=1, dropout=dropout,
             positions="relative")  # fmt: skip
slot_cfg = classifiers.ClassifierConfig(
    len(words), len(tag_vocab), pad_id=words.pad_id, **sizes
)
slot_model = classifiers.WordTagger(slot_cfg).to(run.device)
print(slot_cfg)
print(f"{sum(p.numel() for p in slot_model.parameters()):,} parameters")
# (B, T, C): one score per tag for every token
print(slot_model(ids.to(run.device)).shape)

# %% [markdown]
# Padding must not change the answer. The mask keeps every real token from attending to
# `<pad>`, and everything else in the block works token by token, so a query's scores are
# the same alone and padded inside a batch with a longer one:

# %%
slot_model.eval()  # no dropout while comparing (training.train switches it back on)
short = ["cheapest", "fare"]
long = ["flights", "from", "boston", "to", "denver", "on", "monday"]
alone = slot_model(torch.tensor([words.encode(short)], device=run.device))  # (1, 2, C)
batch_ids, _ = words.encode_batch([short, long])  # (2, 7): the short one gets 5 <pad>
in_batch = slot_model(batch_ids.to(run.device))[:1, : len(short)]  # (1, 2, C)
torch.testing.assert_close(alone, in_batch, atol=1e-5, rtol=1e-5)
print("same scores alone and padded:", alone.shape)

# %% [markdown]
# ## 5. Training
#
# The loss is the cross-entropy of the correct tag $y_t$, averaged over the real tokens of
# the batch (padding positions get the target $-100$, which `F.cross_entropy` skips):
#
# $$\mathcal{L} = -\frac{1}{N} \sum_{\text{real tokens } t}
# \log \operatorname{softmax}(\text{logits}_t)_{y_t}.$$
#
# Two details make training cheaper and the model sturdier. First, a batch is padded to
# its longest query, so batches of queries of similar length waste little compute on
# `<pad>`. `batching.LengthBatches` draws such batches of indices: each epoch it shuffles
# the queries, sorts them by length (random among equal lengths), cuts the order into
# batches and serves the batches in random order.

# %%
# the training split encoded once: atis.ids (N, T_max), atis.lengths (N,)
atis = slot_features.SlotIntentFeatures(train, words, tag_vocab, intent_vocab)
grouped = batching.LengthBatches(atis.lengths, batch_size, seed=0)
shuffled = torch.randperm(len(train), generator=torch.Generator().manual_seed(0))
share = {"shuffled": shuffled.split(batch_size), "grouped by length": list(grouped)}
print(f"{len(grouped)} batches per epoch; <pad> fills")
for how, index_batches in share.items():  # the share of the positions that are <pad>
    pad = batching.padding_share(atis.lengths, index_batches)
    print(f"  {pad:.0%} of the positions if {how}")

# %% [markdown]
# Second, a test query may contain words the model has never seen, while the training
# set, which built the vocabulary, holds no unknown word at all: the `<unk>` embedding
# would never be trained. Word dropout fixes that: `Vocab.word_dropout` replaces each
# training word by `<unk>` with probability `p_unk`, afresh in every batch, so `<unk>`
# gets trained and the model learns to fall back on the context. (This is the simplest
# form, one rate for every word; {cite:t}`kiperwasser2016simple` drop rare words more
# often than frequent ones.) `batching.PaddedBatches` turns the index batches into
# `(x, y)` batches, each cut to its longest query, and applies the word dropout to every
# `x`; `training.train` goes through it again and again, as many batches as it needs.
# `atis.batches` builds them (y: the tags (b, T) for the slots, one intent (b,) for the
# intents).

# %%
x, y = next(iter(atis.batches("tags", batch_size, seed=0, p_unk=p_unk)))
n_words = int((x != words.pad_id).sum())
print(x.shape, y.shape, f"{int((x == words.unk_id).sum())} of {n_words} words -> <unk>")

# %% [markdown]
# After its warm-up, `training.train` keeps the learning rate constant. We end every run
# with a fifth more steps at a tenth of the rate (`cooldown=`, in the same optimiser), so
# that the weights settle instead of hopping around a minimum. Whether that helps, and
# whether the model has trained long enough, is a choice, so we read it off the dev
# split: `classifiers.fit` is one `training.train` run that scores the model on dev every
# `eval_every` steps and where the cool-down starts (for the slots, the span F1 of
# section 7, which counts a slot only when it comes out whole; higher is better). The
# loss is `classifiers.token_loss`, the cross-entropy above: `F.cross_entropy` over the
# `(b·T, C)` scores with `ignore_index=-100`. `classifiers.predict_tags` predicts in
# batches of similar length (`batching.sorted_batches`, in a fixed order) and puts each
# sentence's tags back in its place; `atis.tags_for` turns the ids into tag names.


# %%
def dev_span_f1(model):
    return metrics.span_scores(dev.tags, atis.tags_for(model, dev.sentences)).f1


def batches(seed):  # the slots' training batches
    return atis.batches("tags", batch_size, seed, p_unk)


cooldown = slot_steps // 5  # then a fifth more steps, at lr / 10
slot_init = copy.deepcopy(slot_model.state_dict())  # for the control of the tail
slot_history, slot_dev = classifiers.fit(
    slot_model, batches(run.seed), classifiers.token_loss,
    slot_steps + cooldown, dev_span_f1, eval_every, lr, warmup=50, cooldown=cooldown,
)  # fmt: skip
epochs = len(slot_history) * batch_size / len(train)
print(f"{len(slot_history)} steps, {epochs:.1f} epochs, {len(slot_dev)} dev scores")

# %% [markdown]
# The training loss of single batches jumps up and down (batches differ in length and
# content), so the plot draws it faintly and, on top, its mean over the last 20 steps,
# starting once 20 steps exist, so that the curve's ends are not distorted. Right: the dev
# span F1.


# %% tags=["hide-input"]
fig, (ax_loss, ax_dev) = plt.subplots(1, 2, figsize=plotting.WIDE)
ax_loss.plot(range(1, len(slot_history) + 1), slot_history, alpha=0.25, linewidth=1)
ax_loss.plot(*plotting.trailing_mean(slot_history), label="mean of the last 20 steps")
ax_loss.set(yscale="log", xlabel="training step", ylabel="cross-entropy per token",
            title="Slot filling: training loss")  # fmt: skip
at, scores = zip(*slot_dev.items())
ax_dev.plot(at, scores, marker="o", color=plotting.PALETTE[2])
ax_dev.set(xlabel="training step", ylabel="span F1", title="Slot filling: dev span F1")
for ax in (ax_loss, ax_dev):
    ax.axvline(slot_steps, color="gray", linestyle=":", label="learning rate / 10")
ax_loss.legend()
plt.show()

# %% [markdown]
# At the full rate, the dev score makes nearly all its gain in the first half of the
# steps: {glue:text}`gain_first` from step 0 (the initial weights) to step
# {glue:text}`half_step`, against {glue:text}`gain_second` from there to step
# {glue:text}`full_steps`. More steps at that rate would buy little. Part of the drop in
# training loss after the switch only says that smaller steps hop around less; the dev
# score reads {glue:text}`dev_after` after the tail against {glue:text}`dev_before`
# before it (the mean of the last three scores at the full rate); whether that change
# exceeds the score's own jitter is what the control below decides. The tail also adds steps, though,
# so the cell below runs a control: the same initial weights and the same batches, the
# same {glue:text}`total_steps` steps, all at the full rate. One run of each, so the
# yardstick is how much the dev score moves between evaluations at the full rate (the
# range of the last three scores, {glue:text}`dev_jitter`).

# %% tags=["nbval-ignore-output"]
at_full_rate = [slot_dev[s] for s in sorted(slot_dev) if s <= slot_steps]
untrained = classifiers.WordTagger(slot_cfg).to(run.device)
untrained.load_state_dict(slot_init)  # the weights at step 0
half = slot_steps // 2  # a step with a dev score: a multiple of eval_every
dev_at = {0: dev_span_f1(untrained)} | {s: slot_dev[s] for s in (half, slot_steps)}
gains = dev_at[half] - dev_at[0], dev_at[slot_steps] - dev_at[half]
before, after = statistics.mean(at_full_rate[-3:]), slot_dev[len(slot_history)]
gain = dict(gain_first=gains[0], gain_second=gains[1])
first, second = report.glue_all(gain, "{:+.3f}").values()
report.glue_all(dict(half_step=half, full_steps=slot_steps))
print(f"dev span F1 at steps 0, {half}, {slot_steps}: "
      + ", ".join(f"{v:.3f}" for v in dev_at.values()))  # fmt: skip
print(f"gain over steps 0-{half}: {first}; over steps {half}-{slot_steps}: {second}")
was, now = report.glue_all(dict(dev_before=before, dev_after=after), "{:.3f}").values()
print(f"mean of the last three scores at the full rate {was}, after the tail {now}")
assert gains[0] > 5 * gains[1], "nearly all the gain comes in the first half"

# %% tags=["nbval-ignore-output"]
# the control: the same weights at the start, the same batches, no tail
control = classifiers.WordTagger(slot_cfg).to(run.device)
control.load_state_dict(slot_init)
total = slot_steps + cooldown
_, control_dev = classifiers.fit(
    control, batches(run.seed), classifiers.token_loss, total,
    dev_span_f1, total, lr, warmup=50,
)  # fmt: skip
no_tail = control_dev[total]
assert 0.8 < no_tail <= 1, "the control learns the task too"
jitter = max(at_full_rate[-3:]) - min(at_full_rate[-3:])
report.glue("total_steps", total)
report.glue_all(dict(dev_jitter=jitter, dev_no_tail=no_tail), "{:.3f}")
print(f"dev span F1 after {total} steps: with the tail {after:.3f}, "
      f"all at the full rate {no_tail:.3f}")  # fmt: skip
print(f"range of the last three full-rate scores: {jitter:.3f}")
report.glue("tail_verdict", slot_features.cooldown_verdict(after, no_tail, jitter))

# %% [markdown]
# The control ends at {glue:text}`dev_no_tail`: the run with the tail is
# {glue:text}`tail_verdict`. Every run in this chapter ends with this fifth of steps at
# lr / 10.

# %% [markdown]
# ## 6. Token accuracy, and the baseline that never moves
#
# The simplest score is the fraction of tokens whose predicted tag is right,
#
# $$\text{token accuracy} = \frac{\#\{t : \hat y_t = y_t\}}{\#\text{tokens}}.$$
#
# Most words are outside every slot, so a "model" that answers `O` for every word already
# scores well. Any accuracy has to be read against that majority baseline. We score on
# dev, the split this chapter's choices look at; the test split waits for section 9.
#
# The all-`O` baseline reads no word at all. A stronger one reads each word, but only
# the word: tag it with the tag it has most often in the training data
# (`baselines.majority_class` of its training tags), and tag a word that training never
# shows `O` (`slot_features.LookupTagger`). This lookup table is section 3's "the word
# alone" as a tagger: no model, no training, and every *boston* gets the same tag,
# wherever it stands. Whatever the model scores above it, the model owes to reading the
# other words of the query.

# %%
all_o = [["O"] * len(s) for s in dev.sentences]
baseline = metrics.token_accuracy(dev.tags, all_o)
print(f"dev token accuracy of the all-'O' baseline: {baseline:.4f}")
lookup_tags = slot_features.LookupTagger(train.sentences, train.tags)
dev_lookup = lookup_tags(dev.sentences)
lookup_acc = metrics.token_accuracy(dev.tags, dev_lookup)
print(f"dev token accuracy of the lookup table:     {lookup_acc:.4f}")

# %% tags=["nbval-ignore-output"]
dev_pred = atis.tags_for(slot_model, dev.sentences)
acc = metrics.token_accuracy(dev.tags, dev_pred)
acc_slots = metrics.token_accuracy(dev.tags, dev_pred, ignore="O")
print(f"dev token accuracy, model:                  {acc:.4f}")
print(f"model, only the tokens whose gold tag != O: {acc_slots:.4f}")
assert acc > 0.9 and acc_slots < acc, "the O words lift the model's accuracy"
assert acc > lookup_acc + 0.05, "the model beats the word-by-word lookup"

# %% [markdown]
# ## 7. Scoring by spans
#
# A slot filler is used to fill a form: departure city *new york*, date *monday*. What
# counts is whether each slot comes out whole, with the right type and the right
# boundaries. So we read the BIO tags as spans $(\text{type}, \text{start}, \text{end})$ and
# compare the predicted spans $\hat S$ with the gold spans $S$, the way the CoNLL
# `conlleval` script does {cite}`tjongkimsang2000conll`:
#
# $$P = \frac{|\hat S \cap S|}{|\hat S|}, \qquad R = \frac{|\hat S \cap S|}{|S|}, \qquad
# F_1 = \frac{2PR}{P + R}.$$
#
# A span that is half right counts as wrong, and `O` is not a span, so predicting `O`
# everywhere earns nothing.

# %%
example = ["flights", "from", "new", "york", "to", "las", "vegas", "on", "monday"]
gold = ["O", "O", "B-fromloc.city_name", "I-fromloc.city_name", "O"]
gold += ["B-toloc.city_name", "I-toloc.city_name", "O", "B-depart_date.day_name"]
for kind, start, end in metrics.bio_spans(gold):
    print(f"{kind:<24} words {start}:{end}  {' '.join(example[start:end])}")
print("all-'O' baseline on dev:", metrics.span_scores(dev.tags, all_o))
lookup_dev = metrics.span_scores(dev.tags, dev_lookup)
print("lookup table on dev:   ", lookup_dev)
report.glue("lookup_dev_f1", lookup_dev.f1, "{:.3f}")

# %% tags=["nbval-ignore-output"]
dev_spans = metrics.span_scores(dev.tags, dev_pred)
print("model on dev:", dev_spans)
report.glue("model_dev_f1", dev_spans.f1, "{:.3f}")
assert dev_spans.f1 < acc, "span F1 is the stricter score"
assert dev_spans.f1 > lookup_dev.f1 + 0.15, "the model beats the lookup table by far"

# %% [markdown]
# By spans the all-`O` baseline scores nothing, and the lookup table, which reads each
# word alone, reaches a span F1 of {glue:text}`lookup_dev_f1` on dev; the model, which
# also reads the rest of the query, {glue:text}`model_dev_f1`. Section 9 scores both on
# the test split and looks at where the difference comes from.
#
# Two dev queries show the gap between token accuracy and span F1. First, the all-`O`
# baseline on the first dev query with at least three slots: most of its words are right,
# yet not one slot is found.


# %%
def compare(n, pred):
    """Print dev query n word by word with gold and predicted tags, then two scores."""
    for w, g, p in zip(dev.sentences[n], dev.tags[n], pred[n]):
        print(f"{w:>12}  {g:<28} {p:<28} {'' if g == p else 'wrong'}")
    acc = metrics.token_accuracy([dev.tags[n]], [pred[n]])
    spans = metrics.span_scores([dev.tags[n]], [pred[n]])
    print(f"token accuracy {acc:.2f}, spans found {spans.n_correct} of {spans.n_gold}")


three_slots = next(
    n for n, tags in enumerate(dev.tags) if len(metrics.bio_spans(tags)) >= 3
)
compare(three_slots, all_o)

# %% [markdown]
# Second, the model's query with the highest token accuracy among those where it gets a
# span wrong: a single wrong tag is enough to lose a slot.

# %% tags=["nbval-ignore-output"]
spans_of = metrics.bio_spans  # the spans of one query, left to right
wrong = [n for n in range(len(dev)) if spans_of(dev.tags[n]) != spans_of(dev_pred[n])]
n = max(wrong, key=lambda n: (metrics.token_accuracy([dev.tags[n]], [dev_pred[n]]), -n))
compare(n, dev_pred)
n_wrong_tags = sum(g != p for g, p in zip(dev.tags[n], dev_pred[n]))
assert n_wrong_tags == 1, "one wrong tag, and a slot is lost"

# %% [markdown]
# ## 8. Tags that fit together
#
# The model chooses each word's tag on its own, so nothing keeps it from writing
# `I-toloc.city_name` after `O` or after `B-fromloc.city_name`: the continuation of a slot
# that was never opened. `conlleval` reads such a stray `I-` as the start of a new span,
# which is then almost surely wrong; and when the stray tag interrupts another slot,
# that slot is lost as well. How often
# does it happen on dev? (`bio.stray_inside` finds them.)

# %% tags=["nbval-ignore-output"]
n_stray = sum(len(bio.stray_inside(tags)) for tags in dev_pred)
n_queries = sum(bool(bio.stray_inside(tags)) for tags in dev_pred)
print(f"{n_stray} stray I- tags in {n_queries} of {len(dev)} dev queries")
assert n_stray > 0

# %% [markdown]
# Instead of the best tag for each word, take the best *sequence* of tags among those that
# obey BIO (`I-x` only after `B-x` or `I-x`): maximise $\sum_t \log p_t(y_t)$ over the
# valid sequences. The Viterbi algorithm {cite}`viterbi1967error` finds it in one pass over
# the words, keeping for every tag $j$ the score of the best valid prefix that ends in $j$,
#
# $$\delta_t(j) = \log p_t(j) + \max_{i \,:\, i \to j \text{ allowed}} \delta_{t-1}(i),$$
#
# and then following the winning choices back from the end. No parameter changes; only the
# way we read the model's probabilities. `bio.bio_viterbi` computes this
# recursion for a whole batch at once (for every tag $j$, the max over the allowed
# previous tags $i$ of $\delta_{t-1}(i)$, kept with its arg-max as the back-pointer),
# over the log-softmax of the model's scores; `bio.bio_transitions` gives it
# the rules, which tags may start a query and which pairs may follow each other.
# `classifiers.predict_tags` runs it when `atis.tags_for` passes those rules on (below).

# %%
may_start, may_follow = bio.bio_transitions(tag_vocab.itos)  # (C,), (C, C) bool
print(
    f"{int(may_start.sum())} of {len(tag_vocab)} tags may start a query; "
    f"{int(may_follow.sum())} of {may_follow.numel()} (tag, next tag) pairs are allowed"
)


# %% [markdown]
# Which decoding to use is a choice, so dev decides:

# %% tags=["nbval-ignore-output"]
dev_bio = atis.tags_for(slot_model, dev.sentences, (may_start, may_follow))
viterbi_f1 = metrics.span_scores(dev.tags, dev_bio).f1
print(f"dev span F1: word by word {dev_spans.f1:.4f}, BIO Viterbi {viterbi_f1:.4f}")
n_left = sum(len(bio.stray_inside(tags)) for tags in dev_bio)
print("stray I- tags left:", n_left)
assert n_left == 0  # Viterbi obeys the BIO rules by construction
print("dev queries whose tags changed:", sum(a != b for a, b in zip(dev_pred, dev_bio)))
# dev decides: the decoding with the higher dev span F1 is the one the test split sees
use_viterbi = viterbi_f1 >= dev_spans.f1
rules = (may_start, may_follow) if use_viterbi else None
kept = report.glue("decoding", "BIO Viterbi" if use_viterbi else "word by word")
print(f"kept: {kept}")
assert abs(viterbi_f1 - dev_spans.f1) < 0.05  # a repair of the tags, not a new model

# %% [markdown]
# ## 9. The test split, once
#
# Training length, learning-rate tail and decoding are now fixed: the decoding by dev;
# the length and the tail were set beforehand, and section 5's dev curve shows that more
# steps at the full rate would buy little. This is the final report: the model
# with the decoding dev chose ({glue:text}`decoding`), scored once on the test split,
# against the stated target (span F1 of at least 0.90 in the quick profile, 0.95 in the
# full one) and against the two baselines of section 6. Nothing after this cell changes
# the slot model.

# %% tags=["nbval-ignore-output"]
test_pred = atis.tags_for(slot_model, test.sentences, rules)  # the decoding dev chose
test_o = [["O"] * len(s) for s in test.sentences]
slot_scores = metrics.span_scores(test.tags, test_pred)
print(f"test token accuracy {metrics.token_accuracy(test.tags, test_pred):.4f}", end="")
print(f" (all-'O' baseline {metrics.token_accuracy(test.tags, test_o):.4f})")
print("test spans:", slot_scores)
target = run.pick(quick=0.90, full=0.95)
assert slot_scores.f1 >= target, f"span F1 {slot_scores.f1:.4f} is below {target}"
print(f"span F1 {report.glue('slot_f1', slot_scores.f1, '{:.3f}')} >= target {target}")
test_lookup = lookup_tags(test.sentences)
lookup_test = metrics.span_scores(test.tags, test_lookup)
lookup_acc_test = metrics.token_accuracy(test.tags, test_lookup)
print(f"lookup table: token accuracy {lookup_acc_test:.4f}")
print("lookup table, test spans:", lookup_test)
gain = dict(lookup_test_f1=lookup_test.f1, lookup_gain=slot_scores.f1 - lookup_test.f1)
report.glue_all(gain, "{:.3f}")
assert slot_scores.f1 > lookup_test.f1 + 0.15, "reading the query beats the word alone"

# %% [markdown]
# The model's span F1 of {glue:text}`slot_f1` is {glue:text}`lookup_gain` above the
# lookup table's {glue:text}`lookup_test_f1`. Where does that gain come from? The lookup
# table gives each word one tag, the one training shows most often, so it cannot tag
# both uses of a word that training tags in more than one way, and neither can any other
# rule that reads a word by itself; the model reads the same word and the rest of the
# query. So count where each goes wrong: on words that training shows with more than one
# tag (like *boston* in section 3), on words training never shows, and on the rest
# (`LookupTagger.kind_of` and `errors_by_kind`, side by side in `errors_table`).

# %% tags=["nbval-ignore-output"]
# by_kind: tagger -> Counter of its wrongly tagged test words, by kind (errors_by_kind);
# n_kind: the test words of each kind (kind_of)
taggers = {"lookup table": test_lookup, "model": test_pred}
by_kind, n_kind, table = lookup_tags.errors_table(test.sentences, test.tags, taggers)
print(table)
lookup_wrong, model_wrong = by_kind["lookup table"], by_kind["model"]
several, unseen = "several training tags", "unseen in train"
share_several = lookup_wrong[several] / sum(lookup_wrong.values())
report.glue("lookup_several_share", share_several, "{:.0%}")
report.glue_all(dict(lookup_wrong=sum(lookup_wrong.values()), n_several=n_kind[several],
                     lookup_wrong_several=lookup_wrong[several],
                     model_wrong_several=model_wrong[several],
                     lookup_wrong_unseen=lookup_wrong[unseen],
                     model_wrong_unseen=model_wrong[unseen],
                     lookup_wrong_one=lookup_wrong["one tag"],
                     model_wrong_one=model_wrong["one tag"]), "{:,}")  # fmt: skip
# words tagged one way in training: the table is built to get them right
more = model_wrong["one tag"] > lookup_wrong["one tag"]
report.glue("one_tag_side", "more" if more else "no more")
assert share_several > 0.8, "the word alone fails where training tags it several ways"
assert model_wrong[several] < lookup_wrong[several] / 3, "the context settles them"

# %% [markdown]
# Of the lookup table's {glue:text}`lookup_wrong` wrongly tagged test words,
# {glue:text}`lookup_wrong_several` ({glue:text}`lookup_several_share`) are words that
# training tags in more than one way; of the {glue:text}`n_several` test words of that
# kind, the model tags {glue:text}`model_wrong_several` wrong. On such a word the model
# has nothing a per-word rule lacks except the rest of the query, so the difference
# ({glue:text}`lookup_wrong_several` against {glue:text}`model_wrong_several`) is what
# reading the context buys, and those words hold nearly all of the lookup table's
# mistakes. The words never seen in training are a small part of them
# ({glue:text}`lookup_wrong_unseen` wrong for the lookup table, which can only say `O`,
# against {glue:text}`model_wrong_unseen` for the model, which tags `<unk>` from its
# neighbours). On the words that training tags only one way, the model makes
# {glue:text}`one_tag_side` mistakes than the table ({glue:text}`model_wrong_one`
# against {glue:text}`lookup_wrong_one`), so its overall gain over the table is what
# the context buys net of those.

# %% [markdown]
# What goes wrong for the model? Count its wrongly tagged test words by (gold,
# predicted) pair, and split them three ways: words where a slot was missed or invented
# (one side is `O`), words put in a slot of the wrong type (neither side is `O`, and the
# types differ), and words with the right type but the wrong boundary tag (`B-x` for
# `I-x`, or the reverse; `metrics.confusion_kinds`).

# %% tags=["nbval-ignore-output"]
confusions = metrics.tag_confusions(test.tags, test_pred)  # (gold, predicted) -> count
n_wrong, kinds = sum(confusions.values()), metrics.confusion_kinds(confusions)
wrong_type = kinds["wrong type"]
print(f"{n_wrong} wrongly tagged words: {kinds['missed or invented']} slots missed or "
      f"invented, {wrong_type} of the wrong type, {kinds['boundary']} B-/I- of the "
      "right type")  # fmt: skip
for (g, p), count in confusions.most_common(8):
    print(f"{count:>4}  gold {g:<30} predicted {p}")
given_role = metrics.role_added(confusions, ("city_name", "airport_name"))
pct = report.glue("roleless_share", given_role / wrong_type, "{:.0%}")
print(f"{given_role} of those ({pct}): a role-less city or airport given a role")
assert wrong_type > n_wrong / 2, "most mistakes keep the slot, with the wrong type"
assert given_role > 0.2 * wrong_type

# %% [markdown]
# Most mistakes keep the slot and get its type wrong, and {glue:text}`roleless_share` of
# those are a city or airport that the annotators tagged without a role (plain
# `city_name`, `airport_name`) and the model gave one (`toloc.`, `fromloc.`). The
# role-less tags belong to particular kinds of question, as the intents of the test
# queries that contain them show:

# %%
roleless = {"B-city_name", "B-airport_name"}
roleless_queries = [n for n, tags in enumerate(test.tags) if roleless & set(tags)]
intents_of = Counter(test.intents[n] for n in roleless_queries)
print(len(roleless_queries), "test queries with a role-less city or airport:")
print(intents_of.most_common(4))

# %% tags=["nbval-ignore-output"]
to_city = "B-toloc.city_name"
given_a_role = [
    n
    for n in roleless_queries
    if to_city in test_pred[n] and to_city not in test.tags[n]
]
n_given = len(given_a_role)
print(f"in {n_given} of them the model tagged a toloc. city the annotators did not")
assert given_a_role
print("e.g.:", " ".join(test.sentences[given_a_role[0]]))

# %% [markdown]
# Questions about ground transport, airports and distances name a city as a place, not as
# the end of a flight; telling them apart takes the whole query. And the training data
# hardly ever shows it. How the city names of the training split are tagged:

# %%
city_roles = metrics.slot_roles(train.tags, "city_name")
n_cities = sum(city_roles.values())
for role, n in city_roles.most_common():
    print(f"{role:<8} {n:>5} of {n_cities} ({n / n_cities:.1%})")

# %% [markdown]
# Nearly every training city is the start or the end of a trip, so the model has learned
# to give a city one of those roles. Per type: the two most frequent types, the cities
# a trip starts and ends at, hold {glue:text}`top2_share` of the gold test spans, so the
# overall span F1 is largely made of them, and both score above it; the rare types pull
# it down; the other frequent types land on either side of it ({glue:text}`above_overall`
# of the twelve most frequent score above it). Among those twelve, the role-less
# `city_name` is by far the weakest:

# %% tags=["nbval-ignore-output"]
by_type = metrics.span_scores_by_type(test.tags, test_pred)
frequent = sorted(by_type, key=lambda t: -by_type[t].n_gold)[:12]
for t in frequent:
    print(f"{t:<28} {by_type[t]}")
rare = [t for t in by_type if by_type[t].n_gold < 20]
rare_total = metrics.pooled_span_scores([by_type[t] for t in rare])
print(f"{len(rare)} types with < 20 test spans, pooled: {rare_total}")
assert rare_total.f1 < slot_scores.f1 < min(by_type[t].f1 for t in frequent[:2])
top2 = sum(by_type[t].n_gold for t in frequent[:2]) / slot_scores.n_gold
top2_text = report.glue("top2_share", top2, "{:.0%}")
print(f"the two most frequent types hold {top2_text} of the gold spans")
# a few thousandths decide some of these (a type near the overall F1): quoted only
n_above = sum(by_type[t].f1 > slot_scores.f1 for t in frequent)
n_above = report.glue("above_overall", f"{n_above}")
print(f"{n_above} of the 12 most frequent types score above the overall span F1 "
      f"{slot_scores.f1:.4f}")  # fmt: skip
weakest, *others = sorted(frequent, key=lambda t: by_type[t].f1)
print(f"weakest of the 12 most frequent: {weakest} (F1 {by_type[weakest].f1:.2f})")
assert weakest == "city_name" and by_type[weakest].f1 < by_type[others[0]].f1 - 0.1

# %% tags=["hide-input"]
plt.figure(figsize=plotting.SINGLE)
plt.barh(range(len(frequent)), [by_type[t].f1 for t in frequent])
plt.yticks(range(len(frequent)), [f"{t} ({by_type[t].n_gold})" for t in frequent])
plt.gca().invert_yaxis()
plt.gca().set(xlim=(0, 1), xlabel="span F1 on the test split",
              ylabel="slot type (gold spans)",
              title="Slot filling: the 12 most frequent slot types")  # fmt: skip
plt.show()

# %% [markdown]
# ## 10. One label per sentence: a [CLS] token or the average
#
# For the intent, the $T$ contextual vectors must become one vector $s$ for a linear
# layer. Two ways:
#
# - **mean pooling**: average the vectors of the real tokens, with $m_t = 1$ for a real
#   token and $0$ for padding,
#   $$s = \frac{\sum_t m_t h_t}{\sum_t m_t};$$
# - **[CLS] pooling**: prepend one extra input vector, learned like any weight, to every
#   query and take its output, $s = h_{\text{[CLS]}}$. Attention lets that position gather
#   what it needs from every word, with weights learned for the task, as in BERT
#   {cite}`devlin2019bert`.

# %% tags=["hide-input"] mystnb={"image": {"alt": "Two panels. Left, [CLS] pooling: a learned [CLS] vector, the words cheapest and fare, and one pad enter an encoder block; only the output at the [CLS] position goes through the linear layer W, b to the intent. Right, mean pooling: cheapest, fare and a pad enter the encoder block; the outputs of the two real words are averaged, the pad's output is left out, and the average goes through W, b to the intent."}}
diagrams.classifiers.sentence_classification()
plt.show()

# %% [markdown]
# The mask matters for the mean: the encoder also produces vectors at the padding
# positions, and averaging them in would make a query's vector depend on the batch it
# sits in. With small whole numbers the arithmetic is easy to follow:

# %%
# (B=2, T=4, D=3); the second query has 2 real tokens, then 2 <pad>
h = torch.tensor(
    [
        [[1.0, 2, 3], [3, 4, 5], [5, 6, 7], [7, 8, 9]],
        [[1.0, 2, 3], [3, 4, 5], [9, 9, 9], [9, 9, 9]],
    ]
)
keep = torch.tensor([[True, True, True, True], [True, True, False, False]])  # (B, T)
mine = (h * keep[..., None]).sum(dim=1) / keep.sum(dim=1, keepdim=True)  # (B, D)
torch.testing.assert_close(mine, masks.masked_mean(h, keep))
print("masked mean of query 2:", mine[1].tolist())
print("plain mean of query 2: ", h[1].mean(dim=0).tolist(), "(padding included)")

# %% [markdown]
# Both models get the same configuration and the same training on the same batches; the
# [CLS] model has $d$ extra parameters, its [CLS] vector. Which pooling is better is a
# comparison of two training runs, and a training run is a random draw: the seed sets the
# initial weights, the batch order and the word dropout. So each pooling is trained with
# several seeds, and the table reports mean ± standard deviation and the range (min–max)
# over them. We state a ranking only when the seeds support it by chapter 4's rule: every
# seed on one side *and* a $t$-test at the 5 % level (ranges that merely separate are
# not enough: two identical poolings, three seeds each, do that 2 times in 20). First,
# the two reference points that need no
# model: always answering the most frequent training intent, and the best any model
# trained here can do (the share of queries whose intent occurs in train):

# %%
most_frequent = Counter(train.intents).most_common(1)[0][0]
majority, ceiling = {}, {}
for name, split in (("dev", dev), ("test", test)):
    majority[name] = metrics.accuracy(split.intents, [most_frequent] * len(split))
    ceiling[name] = sum(x in train_intents for x in split.intents) / len(split)
    print(f"{name:>4}: majority {majority[name]:.4f}, ceiling {ceiling[name]:.4f}")

# %%
poolings = ("cls", "mean")


def dev_accuracy(model):  # atis.intents_for: classifiers.predict_classes, as names
    return metrics.accuracy(dev.intents, atis.intents_for(model, dev.sentences))


def train_intent_model(pooling, seed):
    """One run: the model, its training losses and its dev accuracy {step: accuracy}."""
    # the same encoder weights at the start for both poolings; the [CLS] vector is drawn
    # after them and before the head, so the heads' initial weights differ
    runtime.seed_everything(seed)
    model, losses, dev_curve = atis.train_model(  # classifiers.fit, with the tail
        "intents", intent_steps, lr, batch_size=batch_size, seed=seed, p_unk=p_unk,
        warmup=50, device=run.device, score=dev_accuracy, every=eval_every,
        pooling=pooling, **sizes,
    )  # fmt: skip
    return {"model": model, "losses": losses, "dev": dev_curve}


# %%
intent_runs = {(p, s): train_intent_model(p, s) for p in poolings for s in seeds}
for p in poolings:
    n_params = sum(w.numel() for w in intent_runs[p, seeds[0]]["model"].parameters())
    print(f"{p:>4} pooling: {n_params:,} parameters, one model per seed in {seeds}")

# %% tags=["nbval-ignore-output"]
# dev: the last score of each run's dev curve; test: scored now, for the report
accuracy = {}
for p in poolings:
    runs = [intent_runs[p, s] for s in seeds]
    accuracy[p, "dev"] = [r["dev"][max(r["dev"])] for r in runs]
    accuracy[p, "test"] = [
        metrics.accuracy(test.intents, atis.intents_for(r["model"], test.sentences))
        for r in runs
    ]
    for name in ("dev", "test"):
        by_seed = ", ".join(f"{a:.3f}" for a in accuracy[p, name])
        print(f"{p:>4} pooling, {name:>4}, seed by seed: {by_seed}")
        assert majority[name] + 0.15 < min(accuracy[p, name]) < ceiling[name]

# %% [markdown]
# Every run beats the majority baseline by more than 15 points, and none reaches the
# ceiling set by the intents never seen in training. But runs that differ only in the
# seed land {glue:text}`seed_spread` apart on test. Summarised per pooling:


# %% tags=["nbval-ignore-output"]
print(f"intent accuracy over {len(seeds)} seeds: mean ± std (min–max)")
for p in poolings:
    dev_acc, test_acc = (report.mean_spread(accuracy[p, s]) for s in ("dev", "test"))
    print(f"{p:>4}  dev {dev_acc}  test {test_acc}")
test_ranges = [max(accuracy[p, "test"]) - min(accuracy[p, "test"]) for p in poolings]
assert max(test_ranges) > 0, "seeds alone move test accuracy"
points = 100 * max(test_ranges)  # the wider of the two poolings' ranges, in points
print(f"seeds alone move test accuracy by up to {points:.1f} points")
report.glue("seed_spread", f"up to {points:.1f} points")

# %% [markdown]
# Which pooling is better? For one seed, the two poolings start from the same encoder
# weights and train on the same batches with the same word dropout, so the seed pairs
# the two runs, and the per-seed difference $\Delta_s = \mathrm{acc}_\text{[CLS]} -
# \mathrm{acc}_\text{mean}$ removes what the seed does to both. The rule, computed in
# the next cell, is chapter 4's paired $t$-test (`report.compare_seeds(..., pairs=True)`):
# a ranking only when every $\Delta_s$ has the same sign and their mean exceeds
# $t \cdot \mathrm{SE}$, $t = 4.30$ for three seeds. `pooling.pooling_verdict` and
# `pooling.pooling_conclusion` put the outcome in words.

# %% tags=["nbval-ignore-output"]
for name in ("dev", "test"):
    cls, mean = accuracy["cls", name], accuracy["mean", name]
    differences = report.paired_differences(cls, mean, "[CLS] minus mean")
    print(f"{name}: {differences}")
    verdict = pooling.pooling_verdict(cls, mean)
    print(f"{name}: {report.glue(name + '_verdict', verdict)}")
    if name == "dev":
        report.glue("dev_edge", differences)
# A few thousandths decide these comparisons, and another CPU rounds differently: the
# prose below quotes what this run computed rather than asserting one outcome.
found = pooling.pooling_conclusion(cls, mean, len(test))  # the loop ends on test
gap_text = report.glue("test_gap", found.gap, "{:.3f}")
ranges = report.glue("test_ranges", " and ".join(f"{r:.3f}" for r in found.ranges))
print(f"test: the means differ by {gap_text}; the seeds' ranges span {ranges}")
report.glue("gap_vs_seeds", found.gap_vs_seeds)
report.glue("selective_reading", found.selective)
print(f"on test, {report.glue('pooling_conclusion', found.conclusion)}")
assert found.gap < 0.05  # whichever is ahead, the two poolings land within a few points

# %% [markdown]
# On dev, the split a choice of pooling would rest on, {glue:text}`dev_verdict`; this
# chapter keeps both poolings to compare them rather than choosing one, and the test
# split, the final report, scores both: {glue:text}`test_verdict`. The gap between the two poolings' mean test
# accuracies, {glue:text}`test_gap`, is {glue:text}`gap_vs_seeds` (their ranges span
# {glue:text}`test_ranges`). One run per pooling, as in the seed-by-seed rows above,
# would have measured partly which seeds were drawn. So on the test split, for these
# small one-block models briefly trained on ATIS intents,
# {glue:text}`pooling_conclusion`.
#
# Verdicts like these rest on three per-seed differences (on dev,
# {glue:text}`dev_edge`), and a difference near zero or a statistic near the threshold
# rests, in the end, on the last bits of the arithmetic: on another CPU, a verdict
# computed here may change. More seeds, or a larger test split, would narrow the
# question; they would not guarantee an answer.
#
# The learning curves, averaged over the seeds (in both panels the band spans the seeds'
# range):

# %% tags=["hide-input"]
fig, (ax_loss, ax_dev) = plt.subplots(1, 2, figsize=plotting.WIDE)
labels = {"cls": "[CLS] pooling", "mean": "mean pooling"}
loss_curves, dev_curves = {}, {}  # name -> (seeds, points): every run's curve
for p in poolings:
    runs = [intent_runs[p, s] for s in seeds]
    smoothed = [plotting.trailing_mean(r["losses"]) for r in runs]
    loss_curves[labels[p]] = torch.stack([means for _, means in smoothed])
    dev_curves[labels[p]] = torch.tensor([list(r["dev"].values()) for r in runs])
plotting.seed_bands(smoothed[0][0], loss_curves, ax_loss, xlabel="training step",
                    ylabel="cross-entropy per query",
                    title="Intent: training loss (mean of 20 steps)")  # fmt: skip
plotting.seed_bands(list(runs[0]["dev"]), dev_curves, ax_dev, xlabel="training step",
                    ylabel="accuracy", title="Intent: dev accuracy")  # fmt: skip
for ax in (ax_loss, ax_dev):
    ax.axvline(intent_steps, color="gray", linestyle=":", label="learning rate / 10")
    ax.legend()
ax_loss.set_yscale("log")
plt.show()

# %% [markdown]
# Where does the [CLS] position look? Mean pooling gives every word the same weight,
# $1/T$. The [CLS] position's attention weights in the block, averaged over the heads, for
# one dev query (the model of the first seed). They spread over $1 + T$ keys, [CLS]
# itself and the $T$ words, so an even spread would give each $1/(T + 1)$:

# %% tags=["nbval-ignore-output"]
cls_model = intent_runs["cls", seeds[0]]["model"]
query = dev.sentences[dev.intents.index("atis_airfare")]
with torch.no_grad():
    q_ids = torch.tensor([words.encode(query)], device=run.device)  # (1, T)
    # (1, H, 1 + T, 1 + T): [CLS] is position 0
    weights = cls_model.attention_weights(q_ids)
cls_weights = weights[0, :, 0].mean(dim=0).cpu()  # (1 + T,): the [CLS] row, head mean
print(" ".join(query), "->", atis.intents_for(cls_model, [query])[0])
keys = ["[CLS]"] + query
largest = cls_weights.argsort(descending=True)[:3].tolist()
top = ", ".join(f"{keys[k]} ({cls_weights[k]:.2f})" for k in largest)
print("largest weights:", report.glue("query_top", top))
assert cls_weights.max() > 2 / len(keys), "far from an even 1/(T + 1)"

# %% tags=["hide-input"]
plt.figure(figsize=plotting.SINGLE)
plt.bar(range(len(keys)), cls_weights, label="[CLS] pooling")
plt.axhline(
    1 / len(keys), color="black", linestyle="--", label="an even spread: 1/(T + 1)"
)
plt.xticks(range(len(keys)), keys, rotation=60, ha="right")
plt.gca().set(xlabel="key (word attended to)", ylabel="attention weight",
              title="Where the [CLS] position looks (mean over heads)")  # fmt: skip
plt.legend()
plt.show()

# %% [markdown]
# One query of one model is one example. Over all dev queries, here is each word's share
# of the attention that [CLS] gives to the words, relative to an even share (1 = the
# $1/T$ of mean pooling), averaged by the kind of its gold slot tag and, for the words
# that occur at least 30 times, by word. [CLS] sits at position 0 and the block's
# relative bias depends on the distance, so a share may say where a word sits rather than
# what it is; so `pooling.cls_attention_shares`, which computes all three for one
# model, also divides each word's share by the mean share of all dev words at the same
# position. Each [CLS] model, one per seed, gets its own reading; the table gives the
# mean over the seeds and the range:

# %% tags=["nbval-ignore-output"]
shares = [
    pooling.cls_attention_shares(
        intent_runs["cls", s]["model"], words, dev.sentences, dev.tags
    )
    for s in seeds
]  # per seed: (mean per kind, per frequent word, per kind at the same position)
names = {"O": "outside every slot", "city": "city names", "slot": "other slots"}
read, cities = {}, {}  # per table: one share per seed for every kind; the verdict
tables = {"share_": (0, ""), "matched_": (2, ", relative to the same position's mean")}
for table, (i, how) in tables.items():
    print(f"share of [CLS]'s attention / an even share{how}, mean (min–max)")
    # per kind: every seed's share, "mean (min–max)"; cities against other slots,
    # each seed's model against itself (paired by seed)
    read[table], texts, cities[table] = pooling.kind_shares(shares, i)
    for k, text in texts.items():
        print(f"{names[k]:<18} {report.glue(table + k, text)}")
    print(f"city names against other slots: {cities[table]}")
if run.profile == "quick":  # the text describes this edition's quick run
    shares_now, matched = read["share_"], read["matched_"]
    assert statistics.mean(shares_now["city"]) < 0.9 and min(shares_now["O"]) > 0.9
    # cities read least, by chapter 4's test, and at the same position too
    assert set(cities.values()) == {"lower for every seed"}
    assert max(matched["city"]) < 0.95  # position does not explain it

# %% [markdown]
# And the frequent words that *every* seed's model reads more than an even share, most
# read first, and those that every one reads less, least read first
# (`pooling.read_by_every`):

# %% tags=["nbval-ignore-output"]
by_words = [by_word for _, by_word, _ in shares]  # the same frequent words, every seed
most, least = pooling.read_by_every(by_words, 5)
print("read more by every model:", report.glue("most_read", ", ".join(most)))
print("read less by every model:", report.glue("least_read", ", ".join(least)))
tagged = zip(sum(dev.sentences, []), sum(dev.tags, []))  # (word, tag) of every word
dev_cities = {w for w, t in tagged if t.endswith("city_name")}
n_cities = sum(x in dev_cities for x in least)
are = "is a city name" if n_cities == 1 else "are city names"
print(report.glue("least_cities", f"{n_cities} of these {len(least)} {are}"))
assert len(least) == 5 and n_cities >= 1, "city names among the least read words"

# %% [markdown]
# What these cells show, and what they do not. Mean pooling weighs every position the
# same, $1/T$, but that does not give every *word* the same say: each $h_t$ has already
# mixed in the other words through the block's attention. [CLS] pooling adds one more
# weighted average, learned for the task, and its weights are far from even: in the
# query above the largest go to {glue:text}`query_top`. One query of one model shows
# little, though. Over all dev queries, averaged over the seeds' models, the words
# outside every slot get {glue:text}`share_O` times an even share, the words of other
# slots {glue:text}`share_slot`, and city names only {glue:text}`share_city`; and every
# seed's model reads city names less than the words of other slots (each model against
# itself, so the seed pairs the two shares: the paired test above passes, asserted).
# Every seed's model
# reads {glue:text}`most_read` more than an even share, and {glue:text}`least_read` less
# ({glue:text}`least_cities`). Where a word sits does not explain this away: compared
# with the words at the same position, city names get {glue:text}`matched_city` of the
# mean share there and the words of other slots {glue:text}`matched_slot`, and every
# seed's model still reads city names less than other slots' words (the paired test
# passes here too). That fits the task:
# a city says where a trip goes, rarely what is being asked. Still, an attention weight
# says where the [CLS] position reads from, not how much a word moves the decision, so a
# large weight does not explain a prediction {cite}`jain2019attention`; and on the test
# split, reading selectively {glue:text}`selective_reading` (the verdicts above). A later chapter meets
# [CLS] again in BERT, where pre-training prepares it before any task is seen.
#
# ## Exercises
#
# ### Exercise 1: BIO tags to spans
#
# Write `spans(tags)` returning the list of `(type, start, end)` spans of one tagged
# sentence, left to right, `end` exclusive. Follow `conlleval`: an `I-x` that does not
# continue a span of type `x` starts a new one.


# %%
def spans(tags):
    # YOUR CODE HERE
    raise NotImplementedError


# %% tags=["solution", "hide-cell"]
def spans(tags):
    out, kind, start = [], None, 0
    for t, tag in enumerate(tags + ["O"]):  # a final O closes the last span
        prefix, typ = (tag[0], tag[2:]) if tag != "O" else ("O", None)
        if kind is not None and not (prefix == "I" and typ == kind):
            out.append((kind, start, t))
            kind = None
        if typ is not None and kind is None:
            kind, start = typ, t
    return out


# %%
checks.check_bio_spans(spans)

# %% [markdown]
# ### Exercise 2: span F1 of a corpus
#
# Write `span_f1(gold, pred)` for two lists of tagged sentences: count the correct,
# predicted and gold spans over the whole corpus, then return $F_1$. $F_1$ is 0 when no
# span is correct, also when nothing is predicted (there $P = 0/0$). The equal form
# $F_1 = 2|\hat S \cap S| / (|\hat S| + |S|)$ needs a special case only when there is no
# span at all, predicted or gold: return 0 then. You may use `metrics.bio_spans`.


# %%
def span_f1(gold, pred):
    # YOUR CODE HERE
    raise NotImplementedError


# %% tags=["solution", "hide-cell"]
def span_f1(gold, pred):
    g = {(n, *s) for n, tags in enumerate(gold) for s in metrics.bio_spans(tags)}
    p = {(n, *s) for n, tags in enumerate(pred) for s in metrics.bio_spans(tags)}
    # 2PR / (P + R) = 2 |g ∩ p| / (|g| + |p|)
    return 2 * len(g & p) / (len(g) + len(p)) if g or p else 0.0


# %%
checks.check_span_f1(span_f1)

# %% [markdown]
# ### Exercise 3: a pooling bug that only padding shows (break and fix)
#
# Section 10 averaged the real tokens; another common sentence vector is their
# feature-wise **maximum** (max pooling). A colleague adapted section 10's masked mean
# to it, for a batch `h` of shape (B, T, D) whose row `b` has `lengths[b]` real tokens
# followed by padding. Their tests passed: each test batch held sentences of one length.


# %%
def colleague_max_pool(h, lengths):
    keep = torch.arange(h.shape[1]) < lengths[:, None]  # (B, T): the real tokens
    return (h * keep[..., None]).amax(dim=1)  # (B, D)


# %% [markdown]
# **Predict** before you run the next cell: for a query of three tokens, does
# `colleague_max_pool` return the feature-wise maximum of its three vectors when the
# query is alone in its batch? And when it is padded to six positions, as in a batch
# with a longer one? Does your answer depend on the values of the query's features?
# **Measure** with the cell (in the book its output stays folded until you open it).
# Then **fix** it: write `max_pool(h, lengths)` that returns the (B, D) maxima over the
# real tokens only. The check names the usual mistakes.

# %% tags=["hide-output"]
g = torch.Generator().manual_seed(0)
query_h = torch.randn(1, 3, 4, generator=g)  # (1, 3, D): three real tokens
padded_h = torch.cat([query_h, torch.randn(1, 3, 4, generator=g)], dim=1)  # (1, 6, D)
three = torch.tensor([3])
truth = query_h.amax(dim=1)  # (1, D)
alone, padded = colleague_max_pool(query_h, three), colleague_max_pool(padded_h, three)
print("alone, right: ", torch.equal(alone, truth))
print("padded, right:", torch.equal(padded, truth))
print("features < 0 at all three tokens:", (query_h < 0).all(dim=1).squeeze(0).tolist())
print("padded, right feature by feature:", (padded == truth).squeeze(0).tolist())


# %%
def max_pool(h, lengths):
    # YOUR CODE HERE
    raise NotImplementedError


# %% tags=["solution", "hide-cell"]
def max_pool(h, lengths):
    keep = torch.arange(h.shape[1]) < lengths[:, None]  # (B, T)
    # -inf, not 0: the neutral value of a max (0 is the neutral value of a sum)
    return h.masked_fill(~keep[..., None], float("-inf")).amax(dim=1)  # (B, D)


# %%
checks.check_max_pool(max_pool)

# %% [markdown]
# ## What we added to the package
#
# - `transformer_book.data_files`: a registry of the book's datasets (ATIS, SNIPS, Tiny
#   Shakespeare, SST-2, rt-polarity) with canonical URLs and sha256 digests;
#   `data_files.path` looks in `$TRANSFORMER_BOOK_DATA`, then the cache, then downloads
#   and verifies.
# - `transformer_book.data`: the loaders `load_atis`, `load_snips`,
#   `load_tinyshakespeare`, `load_sst2`, `load_rt_polarity`.
# - `transformer_book.vocab.Vocab`: a word (or label) vocabulary with `<pad>` and `<unk>`,
#   built from the training split, with `encode_batch` for padded batches and
#   `word_dropout` for training the `<unk>` embedding.
# - `transformer_book.batching`: `LengthBatches`, first used here (index batches of
#   similar length, reshuffled every epoch; chapters 6, 7 and 12 batch the same way),
#   `PaddedBatches` (training batches cut to their longest row, with an `augment` such
#   as word dropout), `sorted_batches` (evaluation in a fixed order) and
#   `padding_share`.
# - `transformer_book.classifiers`: `ClassifierConfig`, `WordTagger`,
#   `SentenceClassifier` (`pooling="cls"` or `"mean"`, `positions="learned"` or
#   `"relative"`), `token_loss`, `sentence_loss`, `mean_token_loss`, `predict_tags`,
#   `predict_classes`, and `fit` (one training run scored on dev every few steps).
# - `transformer_book.slot_features`: `SlotIntentFeatures` (a split's vocabularies,
#   encoded queries, batches with word dropout, trained models and their predictions as
#   names), `LookupTagger` (the word-by-word baseline, with `errors_table`: its
#   mistakes and a model's, by kind of word) and `cooldown_verdict`.
# - `transformer_book.pooling`: `cls_attention_shares` and `read_by_every` (where [CLS]
#   reads), and the verdicts `pooling_verdict` and `pooling_conclusion`;
#   `report.paired_differences` gives the per-seed differences and their t statistic,
#   and `report.glue_all` glues a dict of values in one call.
# - `transformer_book.bio`: `bio_transitions` with `bio_viterbi` for decoding valid BIO
#   sequences, `stray_inside` (the tags that break the rules) and `tag_counts`.
# - `transformer_book.masks.masked_mean`: the mean over the real tokens only.
# - `transformer_book.metrics`: `token_accuracy`, `accuracy`, `bio_spans`, `span_scores`,
#   `span_scores_by_type` (conlleval-style spans), `pooled_span_scores`, and
#   `tag_confusions`, `confusion_kinds`, `role_added` and `slot_roles` for reading a
#   tagger's mistakes.
# - `transformer_book.diagrams.classifiers`: the two diagrams of this chapter.
# - `transformer_book.checks`: `check_bio_spans`, `check_span_f1`, `check_max_pool`.
