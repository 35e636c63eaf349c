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
# An encoder turns $T$ word vectors into $T$ contextual vectors. This chapter puts a single
# encoder block to work on real data, the ATIS flight-booking queries {cite}`hemphill1990atis`,
# in the two ways every encoder is used: one label per word and one label per sentence.
#
# By the end of it you will be able to
#
# - turn sentences into padded batches of ids with a vocabulary built from the training data only;
# - train a token classifier that tags every word of a query with its slot (slot filling);
# - explain why token accuracy flatters a tagger, and score it by spans (precision, recall, F1)
#   against the all-"O" baseline;
# - decode the most likely tag sequence that obeys the BIO rules (Viterbi);
# - classify whole sentences (the query's intent) from a prepended [CLS] vector or from the
#   average of the contextual vectors, and compare the two.

# %% tags=["remove-cell"]
# Colab only: install this book's package (does nothing anywhere else).
import sys

if "google.colab" in sys.modules:
    import subprocess

    repo = "https://github.com/transformers-step-by-step/transformers-step-by-step"
    pip = [sys.executable, "-m", "pip", "install", "-q"]
    subprocess.run([*pip, f"transformer-book @ git+{repo}"], check=True)

# %%
import dataclasses
from collections import Counter

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

from transformer_book import checks, classifiers, data, metrics, runtime, training
from transformer_book.vocab import Vocab

# %% tags=["parameters"]
device = "auto"  # "auto": cuda when available, else cpu
profile = "auto"  # "auto": full on a GPU, quick on a CPU

# %%
run = runtime.setup(
    device, profile, seed=0, cpu_threads=1
)  # tiny models: one CPU thread is enough
print(run)
# model size and training length per profile (the same sizes for the slot and the intent models)
d_model, n_heads, d_ff = run.pick(quick=64, full=128), 8, run.pick(quick=128, full=512)
dropout, p_unk = run.pick(quick=0.0, full=0.3), run.pick(quick=0.1, full=0.2)
slot_steps, intent_steps = (
    run.pick(quick=400, full=5000),
    run.pick(quick=250, full=1500),
)  # +1/5 at lr/10
batch_size, lr = 64, run.pick(quick=1e-2, full=1e-3)

# %% [markdown]
# ## 1. The data: ATIS
#
# Each ATIS query comes with two kinds of labels: a *slot* tag for every word (which words
# name the departure city, the date, the airline, ...) and an *intent* for the whole query
# (asking for flights, for a fare, for ground transport, ...). We use the standard split of
# {cite:t}`goo2018slotgated`, as redistributed with JointBERT {cite}`chen2019bertjoint`.
# `data.load_atis` reads it from the folder in `$TRANSFORMER_BOOK_DATA` or the local cache,
# and downloads it (checking every file's sha256) when neither has it.

# %%
train, dev, test = (data.load_atis(split) for split in ("train", "dev", "test"))
print(
    {
        name: len(split)
        for name, split in (("train", train), ("dev", dev), ("test", test))
    }
)
i = 0
print(" ".join(train.sentences[i]), "->", train.intents[i])
for word, tag in zip(train.sentences[i], train.tags[i]):
    print(f"{word:>12}  {tag}")

# %% [markdown]
# The slot tags follow the BIO scheme {cite}`ramshaw1995chunking`: `B-x` begins a slot of
# type `x`, `I-x` continues it, and `O` marks a word outside every slot. A few intents are
# two intents joined by `#`; we keep each combination as a class of its own. The test split
# also holds some intents and tags that never occur in training, which no model trained here
# can predict.

# %%
slot_types = {t[2:] for tags in train.tags for t in tags if t != "O"}
train_intents = set(train.intents)
print(
    f"{len(slot_types)} slot types, {len({t for s in train.tags for t in s})} distinct tags in train"
)
print(
    f"{len(train_intents)} intents in train, {sum('#' in x for x in train.intents)} train queries with two"
)
print(
    "test queries whose intent is unseen in train:",
    sum(x not in train_intents for x in test.intents),
)
all_train_tags = {t for s in train.tags for t in s}
print(
    "test queries with a tag unseen in train:",
    sum(any(t not in all_train_tags for t in s) for s in test.tags),
)

# %% [markdown]
# ## 2. From words to ids
#
# A vocabulary maps each word to an integer, the row of the embedding table. It is built from
# the training split only: a word seen first at test time is mapped to `<unk>`, as it would be
# for a deployed model. `<pad>` fills short sentences up to the longest one in a batch. The
# slot tags and intents get their own vocabularies, without either special token.

# %%
words = Vocab.from_corpus(train.sentences)
tag_vocab = Vocab.from_corpus(train.tags, pad_token=None, unk_token=None)
intent_vocab = Vocab.from_corpus(
    [[x] for x in train.intents], pad_token=None, unk_token=None
)
print(words, f"pad_id={words.pad_id} unk_id={words.unk_id}")
print(f"{len(tag_vocab)} tags, {len(intent_vocab)} intents")
test_words = [w for s in test.sentences for w in s]
print(
    f"test words not in the vocabulary: {sum(w not in words for w in test_words)} of {len(test_words)}"
)

# %%
ids, lengths = words.encode_batch(
    [["flights", "to", "ulan", "bator"], ["cheapest", "fare"]]
)
print(
    ids, lengths, sep="\n"
)  # ids (B=2, T_max=4); the unknown city became <unk>, the short query <pad>
print(words.decode(ids[0]))

# %% [markdown]
# ## 3. A slot depends on its neighbours
#
# The same word can fill different slots. Here is how *boston* is tagged in the training
# data, overall and right after *from* or *to*:


# %%
def tags_of(word, previous=None):
    """Counter of the tags `word` gets in train, optionally only right after the word `previous`."""
    return Counter(
        tags[t]
        for sent, tags in zip(train.sentences, train.tags)
        for t in range(len(sent))
        if sent[t] == word and (previous is None or (t > 0 and sent[t - 1] == previous))
    )


for previous in (None, "from", "to"):
    print(
        f"{'anywhere' if previous is None else 'after ' + previous:>10}:",
        tags_of("boston", previous).most_common(3),
    )

# %% [markdown]
# The word alone leaves the slot open; the word on its left nearly settles it. So the model
# must know *where* the other words are, relative to the one being tagged. Chapter 4's T5
# relative bias {cite}`raffel2020t5` says exactly that: each head adds one learned number per
# (bucketed) distance to its attention scores, so "look one word to the left" costs a single
# parameter and works at every position. Our classifiers take `positions="relative"` for it;
# `positions="learned"` would add BERT-style absolute vectors instead.
#
# ## 4. A token classifier: one block and a linear layer per token
#
# Embed the ids, run one encoder block with a padding mask (the padded keys get no attention),
# and map each contextual vector $h_t \in \mathbb{R}^{d}$ to one score per tag:
#
# $$\text{logits}_t = W h_t + b, \qquad W \in \mathbb{R}^{C \times d},$$
#
# with $C$ the number of tags. The same $W$ serves every position.

# %%
slot_cfg = classifiers.ClassifierConfig(
    vocab_size=len(words),
    n_classes=len(tag_vocab),
    d_model=d_model,
    n_heads=n_heads,
    d_ff=d_ff,
    n_layers=1,
    dropout=dropout,
    pad_id=words.pad_id,
    positions="relative",
)
slot_model = classifiers.TokenClassifier(slot_cfg).to(run.device)
print(slot_cfg)
print(f"{sum(p.numel() for p in slot_model.parameters()):,} parameters")
print(
    slot_model(ids.to(run.device)).shape
)  # (B, T, C): one score per tag for every token

# %% [markdown]
# Padding must not change the answer. The mask keeps every real token from attending to
# `<pad>`, and everything else in the block works token by token, so a query's scores are the
# same alone and padded inside a batch with a longer one:

# %%
slot_model.eval()  # no dropout while comparing (training.train switches it back on)
short, long = (
    ["cheapest", "fare"],
    ["flights", "from", "boston", "to", "denver", "on", "monday"],
)
alone = slot_model(torch.tensor([words.encode(short)], device=run.device))  # (1, 2, C)
batch_ids, _ = words.encode_batch(
    [short, long]
)  # (2, 7): the short one padded with 5 <pad>
in_batch = slot_model(batch_ids.to(run.device))[:1, : len(short)]  # (1, 2, C)
torch.testing.assert_close(alone, in_batch, atol=1e-5, rtol=1e-5)
print("same scores alone and padded:", alone.shape)

# %% [markdown]
# ## 5. Training
#
# The loss is the cross-entropy of the correct tag $y_t$, averaged over the real tokens of
# the batch (padding positions get the target $-100$, which `F.cross_entropy` skips):
#
# $$\mathcal{L} = -\frac{1}{N} \sum_{\text{real tokens } t} \log \operatorname{softmax}(\text{logits}_t)_{y_t}.$$
#
# Two details make training cheaper and the model sturdier. Batches group queries of similar
# length, so little compute goes into padding. And since every test query may contain words
# the model has never seen, a fraction `p_unk` of the training words is replaced by `<unk>`
# on the fly, so that the `<unk>` embedding is trained and the model learns to fall back on
# the context.
#
# After its warm-up, `training.train` keeps the learning rate constant. We end with a fifth
# more steps at a tenth of the rate, so that the weights settle instead of hopping around a
# minimum: compare the mean loss just before and just after the switch.


# %%
class LengthBatches:
    """Shuffled batches of queries of similar length; a fraction p_unk of the words becomes <unk>."""

    def __init__(self, vocab, ids, lengths, targets, batch_size, p_unk=0.0, seed=0):
        self.pad_id, self.unk_id = vocab.pad_id, vocab.unk_id
        self.ids, self.lengths, self.targets = ids, lengths, targets
        self.batch_size, self.p_unk = batch_size, p_unk
        self.gen = torch.Generator().manual_seed(seed)

    def __iter__(self):  # one epoch
        order = torch.randperm(len(self.ids), generator=self.gen)
        order = order[
            self.lengths[order].argsort(stable=True)
        ]  # by length, random among equal lengths
        chunks = order.split(self.batch_size)
        for j in torch.randperm(len(chunks), generator=self.gen).tolist():
            idx = chunks[j]
            T = int(self.lengths[idx].max())
            x = self.ids[
                idx, :T
            ].clone()  # (b, T): padded only up to this batch's longest query
            drop = (torch.rand(x.shape, generator=self.gen) < self.p_unk) & (
                x != self.pad_id
            )
            x[drop] = self.unk_id
            y = (
                self.targets[idx, :T] if self.targets.dim() == 2 else self.targets[idx]
            )  # (b, T) or (b,)
            yield x, y


# %%
train_ids, train_lengths = words.encode_batch(train.sentences)  # (N, T_max), (N,)
train_tags, _ = tag_vocab.encode_batch(train.tags, pad_value=-100)  # (N, T_max)
slot_batches = LengthBatches(
    words, train_ids, train_lengths, train_tags, batch_size, p_unk=p_unk, seed=run.seed
)
x, y = next(
    iter(LengthBatches(words, train_ids, train_lengths, train_tags, batch_size))
)  # a look at one batch
print(
    x.shape,
    y.shape,
    f"{len(train)} queries -> {-(-len(train) // batch_size)} batches per epoch",
)


# %%
def padding_share(batches_of_indices):
    """Fraction of the positions in padded batches that are <pad>."""
    real = sum(int(train_lengths[idx].sum()) for idx in batches_of_indices)
    return 1 - real / sum(
        len(idx) * int(train_lengths[idx].max()) for idx in batches_of_indices
    )


by_length = train_lengths.argsort(stable=True).split(batch_size)
shuffled = torch.randperm(len(train), generator=torch.Generator().manual_seed(0)).split(
    batch_size
)
print(
    f"<pad> fills {padding_share(shuffled):.0%} of the positions in shuffled batches, "
    f"{padding_share(by_length):.0%} in batches grouped by length"
)


# %%
def slot_loss(model, batch):
    x, y = (t.to(run.device) for t in batch)
    logits = model(x)  # (b, T, C)
    return F.cross_entropy(
        logits.flatten(0, 1), y.flatten(), ignore_index=-100
    )  # (b·T, C) against (b·T,)


def fit(model, batches, loss_fn, steps):
    """`steps` AdamW steps at `lr` after a warm-up, then steps // 5 more at lr / 10; returns the losses."""
    history = training.train(model, batches, loss_fn, steps, lr=lr, warmup=50)
    return history + training.train(model, batches, loss_fn, steps // 5, lr=lr / 10)


slot_history = fit(slot_model, slot_batches, slot_loss, slot_steps)
tail = slot_steps // 5  # the steps at lr / 10
before, after = (
    sum(slot_history[-2 * tail : -tail]) / tail,
    sum(slot_history[-tail:]) / tail,
)
print(
    f"{len(slot_history)} steps ({len(slot_history) * batch_size / len(train):.1f} epochs); "
    f"mean loss of the {tail} steps before the switch {before:.4f}, of the {tail} after it {after:.4f}"
)

# %% tags=["hide-input"]
plt.figure(figsize=(6, 3))
plt.plot(slot_history)
plt.axvline(slot_steps, color="gray", linestyle=":", label="learning rate / 10")
plt.legend()
plt.yscale("log")
plt.xlabel("training step")
plt.ylabel("cross-entropy per token")
plt.title("Slot filling: training loss")
plt.show()

# %% [markdown]
# ## 6. Token accuracy, and the baseline that never moves
#
# The simplest score is the fraction of test tokens whose predicted tag is right,
#
# $$\text{token accuracy} = \frac{\#\{t : \hat y_t = y_t\}}{\#\text{tokens}}.$$
#
# Most words are outside every slot, so a "model" that answers `O` for every word already
# scores well. Any accuracy has to be read against that majority baseline.


# %%
@torch.no_grad()
def predict_tags(model, sentences):
    ids, lengths = words.encode_batch(sentences)  # (N, T_max), unknown words -> <unk>
    best = model(ids.to(run.device)).argmax(dim=-1).cpu()  # (N, T_max)
    return [
        tag_vocab.decode(best[n, :length]) for n, length in enumerate(lengths.tolist())
    ]


pred_tags = predict_tags(slot_model, test.sentences)
all_o = [["O"] * len(s) for s in test.sentences]
print(
    f"token accuracy, model:                 {metrics.token_accuracy(test.tags, pred_tags):.4f}"
)
print(
    f"token accuracy, all-'O' baseline:      {metrics.token_accuracy(test.tags, all_o):.4f}"
)
print(
    f"model, only tokens whose gold tag != O: {metrics.token_accuracy(test.tags, pred_tags, ignore='O'):.4f}"
)

# %% [markdown]
# ## 7. Scoring by spans
#
# A slot filler is used to fill a form: departure city *new york*, date *monday*. What
# counts is whether each slot comes out whole, with the right type and the right boundaries.
# So we read the BIO tags as spans $(\text{type}, \text{start}, \text{end})$ and compare the
# predicted spans $\hat S$ with the gold spans $S$, the way the CoNLL `conlleval` script does
# {cite}`tjongkimsang2000conll`:
#
# $$P = \frac{|\hat S \cap S|}{|\hat S|}, \qquad R = \frac{|\hat S \cap S|}{|S|}, \qquad
# F_1 = \frac{2PR}{P + R}.$$
#
# A span that is half right counts as wrong, and `O` is not a span, so predicting `O`
# everywhere earns nothing.

# %%
example = ["flights", "from", "new", "york", "to", "las", "vegas", "on", "monday"]
gold = [
    "O",
    "O",
    "B-fromloc.city_name",
    "I-fromloc.city_name",
    "O",
    "B-toloc.city_name",
    "I-toloc.city_name",
    "O",
    "B-depart_date.day_name",
]
for kind, start, end in metrics.bio_spans(gold):
    print(f"{kind:<24} words {start}:{end}  {' '.join(example[start:end])}")

# %%
print("model:           ", metrics.span_scores(test.tags, pred_tags))
print("all-'O' baseline:", metrics.span_scores(test.tags, all_o))

# %% [markdown]
# Two test queries show the gap between the scores. First, the all-`O` baseline on the first
# test query with at least three slots: most of its words are right, yet not one slot is
# found. Second, the model's query with the highest token accuracy among those where it gets
# a span wrong: a single wrong tag is enough to lose a slot.


# %%
def compare(n, pred):
    """Print test query n word by word with its gold and predicted tags, then its two scores."""
    for w, g, p in zip(test.sentences[n], test.tags[n], pred[n]):
        print(f"{w:>12}  {g:<28} {p:<28} {'' if g == p else 'wrong'}")
    acc = metrics.token_accuracy([test.tags[n]], [pred[n]])
    spans = metrics.span_scores([test.tags[n]], [pred[n]])
    print(
        f"token accuracy {acc:.2f}, spans found {spans.n_correct} of {spans.n_gold}, span F1 {spans.f1:.2f}\n"
    )


n = next(n for n, tags in enumerate(test.tags) if len(metrics.bio_spans(tags)) >= 3)
compare(n, all_o)
wrong = [
    n
    for n in range(len(test))
    if set(metrics.bio_spans(test.tags[n])) != set(metrics.bio_spans(pred_tags[n]))
]
n = max(
    wrong, key=lambda n: (metrics.token_accuracy([test.tags[n]], [pred_tags[n]]), -n)
)
compare(n, pred_tags)

# %% [markdown]
# ## 8. Tags that fit together
#
# The model chooses each word's tag on its own, so nothing keeps it from writing
# `I-toloc.city_name` after `O` or after `B-fromloc.city_name`: the continuation of a slot
# that was never opened. `conlleval` reads such a stray `I-` as the start of a new span,
# which is then almost surely wrong, and the span it broke off is lost as well. How often
# does it happen?


# %%
def stray_inside(tags):
    """Positions of I-x tags that do not continue a B-x or I-x."""
    return [
        t
        for t, tag in enumerate(tags)
        if tag.startswith("I-") and (t == 0 or tags[t - 1][2:] != tag[2:])
    ]


print(
    f"{sum(len(stray_inside(tags)) for tags in pred_tags)} stray I- tags "
    f"in {sum(bool(stray_inside(tags)) for tags in pred_tags)} of {len(test)} test queries"
)

# %% [markdown]
# Instead of the best tag for each word, take the best *sequence* of tags among those that
# obey BIO (`I-x` only after `B-x` or `I-x`): maximise $\sum_t \log p_t(y_t)$ over the valid
# sequences. The Viterbi algorithm {cite}`viterbi1967error` finds it in one pass over the words, keeping for every
# tag $j$ the score of the best valid prefix that ends in $j$,
#
# $$\delta_t(j) = \log p_t(j) + \max_{i \,:\, i \to j \text{ allowed}} \delta_{t-1}(i),$$
#
# and then following the winning choices back from the end. No parameter changes; only the
# way we read the model's probabilities.

# %%
may_start, may_follow = classifiers.bio_transitions(tag_vocab.itos)  # (C,), (C, C) bool
print(
    f"{int(may_start.sum())} of {len(tag_vocab)} tags may start a query; "
    f"{int(may_follow.sum())} of {may_follow.numel()} (tag, next tag) pairs are allowed"
)


@torch.no_grad()
def predict_tags_bio(model, sentences):
    ids, lengths = words.encode_batch(sentences)  # (N, T_max)
    log_probs = model(ids.to(run.device)).log_softmax(dim=-1)  # (N, T_max, C)
    best = classifiers.bio_viterbi(
        log_probs, lengths, may_start, may_follow
    ).cpu()  # (N, T_max)
    return [
        tag_vocab.decode(best[n, :length]) for n, length in enumerate(lengths.tolist())
    ]


bio_tags = predict_tags_bio(slot_model, test.sentences)
print("stray I- tags left:", sum(len(stray_inside(tags)) for tags in bio_tags))
print("queries whose tags changed:", sum(a != b for a, b in zip(pred_tags, bio_tags)))

# %%
slot_scores = metrics.span_scores(test.tags, bio_tags)
print(f"token accuracy {metrics.token_accuracy(test.tags, bio_tags):.4f}")
print("per-word argmax: ", metrics.span_scores(test.tags, pred_tags))
print("BIO Viterbi:     ", slot_scores)
target = run.pick(quick=0.90, full=0.95)
assert slot_scores.f1 >= target, (
    f"span F1 {slot_scores.f1:.4f} is below the {run.profile} target {target}"
)
print(f"span F1 {slot_scores.f1:.4f} >= target {target} ({run.profile} profile)")

# %% [markdown]
# What goes wrong? Count the wrongly tagged test words by (gold, predicted) pair, and split
# them into words where a slot was missed or invented (one side is `O`) and words that were
# put in a slot of the wrong type (neither side is `O`).

# %%
confusions = Counter(
    (g, p) for gs, ps in zip(test.tags, bio_tags) for g, p in zip(gs, ps) if g != p
)
wrong_type = sum(n for (g, p), n in confusions.items() if g != "O" and p != "O")
print(
    f"{sum(confusions.values())} wrongly tagged words, {wrong_type} of them in a slot of the wrong type"
)
for (g, p), count in confusions.most_common(8):
    print(f"{count:>4}  gold {g:<30} predicted {p}")

# %% [markdown]
# Most mistakes keep the slot and get its type wrong. The largest group is a city or airport
# that the annotators tagged without a role (plain `city_name`, `airport_name`) and the model
# gave one (`toloc.`, `fromloc.`). The role-less tags belong to particular kinds of
# question, as the intents of the test queries that contain them show:

# %%
roleless = [
    n
    for n, tags in enumerate(test.tags)
    if {"B-city_name", "B-airport_name"} & set(tags)
]
print(
    len(roleless),
    "test queries with a role-less city or airport:",
    Counter(test.intents[n] for n in roleless).most_common(4),
)
given_a_role = [
    n
    for n in roleless
    if "B-toloc.city_name" in bio_tags[n] and "B-toloc.city_name" not in test.tags[n]
]
print(
    f"in {len(given_a_role)} of them the model tagged a toloc. city that the annotators did not",
    end="",
)
print(", e.g.:", " ".join(test.sentences[given_a_role[0]]) if given_a_role else "")

# %% [markdown]
# Questions about ground transport, airports and distances name a city as a place, not as
# the end of a flight; telling them apart takes the whole query, while the model has learnt
# that a city next to words such as *to* or *and* usually ends a trip. Per type, the frequent slots
# score well and the rare ones pull the average down:

# %%
by_type = metrics.span_scores_by_type(test.tags, bio_tags)
frequent = sorted(by_type, key=lambda t: -by_type[t].n_gold)[:15]
for t in frequent[:5]:
    print(f"{t:<28} {by_type[t]}")
rare = [t for t in by_type if by_type[t].n_gold < 20]
rare_total = metrics.SpanScores(
    *(
        sum(getattr(by_type[t], k) for t in rare)
        for k in ("n_gold", "n_pred", "n_correct")
    )
)
print(f"{len(rare)} types with < 20 test spans, pooled: {rare_total}")

# %% tags=["hide-input"]
plt.figure(figsize=(6, 5))
plt.barh(range(len(frequent)), [by_type[t].f1 for t in frequent])
plt.yticks(range(len(frequent)), [f"{t} ({by_type[t].n_gold})" for t in frequent])
plt.gca().invert_yaxis()
plt.xlim(0, 1)
plt.xlabel("span F1 on the test split")
plt.ylabel("slot type (number of gold spans)")
plt.title("Slot filling: F1 of the 15 most frequent slot types")
plt.show()

# %% [markdown]
# ## 9. One label per sentence: a [CLS] token or the average
#
# For the intent, the $T$ contextual vectors must become one vector $s$ for a linear layer.
# Two ways:
#
# - **mean pooling**: average the vectors of the real tokens, with $m_t = 1$ for a real
#   token and $0$ for padding,
#   $$s = \frac{\sum_t m_t h_t}{\sum_t m_t};$$
# - **[CLS] pooling**: prepend one extra input vector, learned like any weight, to every
#   query and take its output, $s = h_{\text{[CLS]}}$. Attention lets that position gather
#   what it needs from every word, with weights learned for the task, as in BERT
#   {cite}`devlin2019bert`.
#
# The mask matters for the mean: the encoder also produces vectors at the padding positions,
# and averaging them in would make a query's vector depend on the batch it sits in.

# %%
h = torch.randn(
    2, 4, 3, generator=torch.Generator().manual_seed(0)
)  # (B, T, D) contextual vectors
keep = torch.tensor(
    [[True, True, True, True], [True, True, False, False]]
)  # (B, T): 2nd query has 2 <pad>
mine = (h * keep[..., None]).sum(dim=1) / keep.sum(dim=1, keepdim=True)  # (B, D)
torch.testing.assert_close(mine, classifiers.masked_mean(h, keep))
print("masked mean:", mine[1])
print("plain mean: ", h[1].mean(dim=0), "(includes the two padding vectors)")

# %% [markdown]
# Both models get the same configuration and the same number of training steps on the same
# batches; the [CLS] model has $d$ extra parameters, its [CLS] vector.

# %%
train_intents_ids = torch.tensor([intent_vocab[x] for x in train.intents])  # (N,)


def intent_loss(model, batch):
    x, y = (t.to(run.device) for t in batch)
    return F.cross_entropy(model(x), y)  # model(x): (b, n_intents)


@torch.no_grad()
def predict_intents(model, sentences):
    ids, _ = words.encode_batch(sentences)  # (N, T_max)
    return intent_vocab.decode(model(ids.to(run.device)).argmax(dim=-1).cpu())


# %%
def train_intent_model(pooling):
    runtime.seed_everything(run.seed)  # the same start for both
    cfg = dataclasses.replace(
        slot_cfg, n_classes=len(intent_vocab), pooling=pooling
    )  # same sizes as the tagger
    model = classifiers.SentenceClassifier(cfg).to(run.device)
    batches = LengthBatches(
        words,
        train_ids,
        train_lengths,
        train_intents_ids,
        batch_size,
        p_unk=p_unk,
        seed=run.seed,
    )
    return model, fit(model, batches, intent_loss, intent_steps)


# %%
intent_runs = {pooling: train_intent_model(pooling) for pooling in ("cls", "mean")}
print(f"{'pooling':<8} {'parameters':>10} {'train loss':>11} {'test accuracy':>14}")
for pooling, (model, history) in intent_runs.items():
    accuracy = metrics.accuracy(test.intents, predict_intents(model, test.sentences))
    n_params = sum(p.numel() for p in model.parameters())
    print(
        f"{pooling:<8} {n_params:>10,} {sum(history[-20:]) / 20:>11.4f} {accuracy:>14.4f}"
    )
ceiling = sum(x in train_intents for x in test.intents) / len(test)
majority = metrics.accuracy(
    test.intents, [Counter(train.intents).most_common(1)[0][0]] * len(test)
)
print(
    f"majority-intent baseline {majority:.4f}; best possible (intents seen in train) {ceiling:.4f}"
)

# %% tags=["hide-input"]
plt.figure(figsize=(6, 3))
for pooling, (_, history) in intent_runs.items():
    plt.plot(history, label=f"{pooling} pooling")
plt.yscale("log")
plt.xlabel("training step")
plt.ylabel("cross-entropy per query")
plt.title("Intent classification: training loss")
plt.legend()
plt.show()

# %% [markdown]
# Where does the [CLS] position look? Its attention weights over the words of one test
# query, averaged over the heads of the block:

# %%
cls_model = intent_runs["cls"][0]
query = test.sentences[
    next(n for n, x in enumerate(test.intents) if x == "atis_airfare")
]
with torch.no_grad():
    q_ids = torch.tensor([words.encode(query)], device=run.device)  # (1, T)
    weights = cls_model.attention_weights(
        q_ids
    )  # (1, H, 1 + T, 1 + T): [CLS] is position 0
cls_weights = (
    weights[0, :, 0].mean(dim=0).cpu()
)  # (1 + T,): row of the [CLS] query, mean over heads
print(" ".join(query), "->", predict_intents(cls_model, [query])[0])
top = cls_weights.argsort(descending=True)[:3].tolist()
print(
    "largest weights:", [(["[CLS]"] + query)[k] + f" {cls_weights[k]:.2f}" for k in top]
)

# %% tags=["hide-input"]
plt.figure(figsize=(7, 2.5))
plt.bar(range(len(query) + 1), cls_weights)
plt.xticks(range(len(query) + 1), ["[CLS]"] + query, rotation=60, ha="right")
plt.xlabel("key (word attended to)")
plt.ylabel("attention weight")
plt.title("Where the [CLS] position looks (mean over heads)")
plt.show()

# %% [markdown]
# Both poolings beat the majority baseline by a wide margin, and neither reaches the ceiling
# set by the test intents never seen in training. They differ in how the words are weighed:
# the mean gives *on*, *i* and *a* the same say as *ticket*, while the [CLS] position
# weighs the words through attention, with weights trained for the task (the plot shows
# which words it favoured in one query). Each variant was
# trained once, with one seed, so the table is one sample rather than a verdict; exercise 3
# writes the masked mean itself, and a later chapter meets [CLS] again in BERT, where
# pre-training prepares it before any task is seen.
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
# predicted and gold spans over the whole corpus, then return $F_1$ (0 when nothing is
# predicted and nothing is gold). You may use `metrics.bio_spans`.


# %%
def span_f1(gold, pred):
    # YOUR CODE HERE
    raise NotImplementedError


# %% tags=["solution", "hide-cell"]
def span_f1(gold, pred):
    g = {(n, *s) for n, tags in enumerate(gold) for s in metrics.bio_spans(tags)}
    p = {(n, *s) for n, tags in enumerate(pred) for s in metrics.bio_spans(tags)}
    return (
        2 * len(g & p) / (len(g) + len(p)) if g or p else 0.0
    )  # 2PR/(P+R) = 2|g∩p| / (|g| + |p|)


# %%
checks.check_span_f1(span_f1)

# %% [markdown]
# ### Exercise 3: mean pooling without the padding
#
# Write `mean_pool(h, lengths)`: `h` has shape (B, T, D) and row `b` has `lengths[b]` real
# tokens followed by padding. Return the (B, D) averages over the real tokens only.


# %%
def mean_pool(h, lengths):
    # YOUR CODE HERE
    raise NotImplementedError


# %% tags=["solution", "hide-cell"]
def mean_pool(h, lengths):
    keep = torch.arange(h.shape[1]) < lengths[:, None]  # (B, T)
    return (h * keep[..., None]).sum(dim=1) / lengths[:, None]  # (B, D)


# %%
checks.check_mean_pool(mean_pool)

# %% [markdown]
# ## What we added to the package
#
# - `transformer_book.data`: a registry of the book's datasets (ATIS, SNIPS, Tiny
#   Shakespeare, SST-2, rt-polarity) with canonical URLs and sha256 digests; `data.path`
#   looks in `$TRANSFORMER_BOOK_DATA`, then the cache, then downloads and verifies;
#   loaders `load_atis`, `load_snips`, `load_tinyshakespeare`, `load_sst2`, `load_rt_polarity`.
# - `transformer_book.vocab.Vocab`: a word (or label) vocabulary with `<pad>` and `<unk>`,
#   built from the training split, with `encode_batch` for padded batches.
# - `transformer_book.classifiers`: `ClassifierConfig`, `TokenClassifier`,
#   `SentenceClassifier` (`pooling="cls"` or `"mean"`, `positions="learned"` or
#   `"relative"`), `masked_mean`, and `bio_transitions` with `bio_viterbi` for decoding
#   valid BIO sequences.
# - `transformer_book.metrics`: `token_accuracy`, `accuracy`, `bio_spans`, `span_scores`,
#   `span_scores_by_type` (conlleval-style spans).
# - `transformer_book.checks`: `check_bio_spans`, `check_span_f1`, `check_mean_pool`.
