"""transformer_book.slot_features: chapter 5's slot-and-intent features (vocabularies,
encoding, batches, training and predictions), the lookup baseline and the cool-down
verdict, each against the chapters' old inline code."""

import pytest
import torch

from transformer_book import batching, classifiers, frames, slot_features, training
from transformer_book.classifiers import (
    ClassifierConfig,
    SentenceClassifier,
    WordTagger,
)


def tiny_split():
    from transformer_book.data import SlotIntentSplit

    sentences = [
        ["flights", "from", "boston", "to", "denver"],
        ["boston", "fares"],
        ["cheapest", "fare", "to", "boston", "please"],
        ["ground", "transport", "in", "denver"],
    ]
    tags = [
        ["O", "O", "B-fromloc.city_name", "O", "B-toloc.city_name"],
        ["B-city_name", "O"],
        ["B-cost", "O", "O", "B-toloc.city_name", "O"],
        ["O", "O", "O", "B-city_name"],
    ]
    intents = ["flight", "airfare", "airfare", "ground_service"]
    return SlotIntentSplit(sentences, tags, intents)


def test_slot_intent_features_encode_as_the_chapters_did():
    from transformer_book.vocab import Vocab

    train = tiny_split()
    atis = slot_features.SlotIntentFeatures.from_split(train)
    words = Vocab.from_corpus(train.sentences)
    tag_vocab = Vocab.from_corpus(train.tags, pad_token=None, unk_token=None)
    intents = Vocab.from_corpus(
        [[x] for x in train.intents], pad_token=None, unk_token=None
    )
    assert atis.words.itos == words.itos and atis.tags.itos == tag_vocab.itos
    assert atis.intents.itos == intents.itos
    ids, lengths = words.encode_batch(train.sentences)
    tag_ids, _ = tag_vocab.encode_batch(train.tags, pad_value=-100)
    assert torch.equal(atis.ids, ids) and torch.equal(atis.lengths, lengths)
    assert torch.equal(atis.tag_ids, tag_ids)
    assert atis.intent_ids.tolist() == [intents[x] for x in train.intents]
    # the batches: the chapter's PaddedBatches with word dropout, batch for batch
    drop = lambda x, gen: words.word_dropout(x, 0.5, generator=gen)  # noqa: E731
    old = batching.PaddedBatches(ids, lengths, tag_ids, 2, 3, augment=drop)
    new = atis.batches("tags", 2, seed=3, p_unk=0.5)
    for (x0, y0), (x1, y1) in zip(list(old) + list(old), list(new) + list(new)):
        assert torch.equal(x0, x1) and torch.equal(y0, y1)
    x, y = next(iter(atis.batches("intents", 4, seed=0, p_unk=0.0)))
    assert y.shape == (4,) and x.shape[0] == 4


def test_slot_intent_features_train_and_predict_as_the_chapters_did():
    train = tiny_split()
    atis = slot_features.SlotIntentFeatures.from_split(train)
    sizes = dict(d_model=16, n_heads=2, d_ff=32, dropout=0.0, positions="relative")
    torch.manual_seed(0)
    model, history, scores = atis.train_model(
        "tags", 5, 1e-2, batch_size=2, seed=1, p_unk=0.1, warmup=1, **sizes
    )
    assert len(history) == 6 and scores == {}
    # the same run written out, as chapter 07 had it
    torch.manual_seed(0)
    cfg = ClassifierConfig(len(atis.words), len(atis.tags), pad_id=0, **sizes)
    batches = atis.batches("tags", 2, 1, 0.1)
    ref = WordTagger(cfg)
    old = training.train(ref, batches, classifiers.token_loss, 6, lr=1e-2, warmup=1,
                         cooldown=1)  # fmt: skip
    assert old == history
    for a, b in zip(model.parameters(), ref.parameters()):
        assert torch.equal(a, b)
    names = atis.tags_for(model, train.sentences)
    ids, lengths = atis.words.encode_batch(train.sentences)
    rows = classifiers.predict_tags(model, ids, lengths)
    assert names == [atis.tags.decode(r) for r in rows]
    assert [len(n) for n in names] == [len(s) for s in train.sentences]
    # intents, scored along the way by classifiers.fit
    torch.manual_seed(0)
    clf, _, scores = atis.train_model(
        "intents", 5, 1e-2, batch_size=2, seed=1, p_unk=0.1, score=lambda m: 0.5,
        every=2, pooling="mean", **sizes,
    )  # fmt: skip
    assert isinstance(clf, SentenceClassifier) and clf.cfg.pooling == "mean"
    assert sorted(scores) == [2, 4, 5, 6]
    said = atis.intents_for(clf, train.sentences)
    assert len(said) == 4 and set(said) <= set(train.intents)
    # the frames of chapter 07: the tagger's slots, the classifier's intent
    got = atis.frames_for(model, clf, train.sentences)
    assert got == list(map(frames.frame_from_tags, train.sentences, names, said))


def test_lookup_tagger_is_the_chapters_table():
    train = tiny_split()
    lookup = slot_features.LookupTagger(train.sentences, train.tags)
    # ties: the first tag seen (denver: toloc, then city_name)
    expected = [["B-fromloc.city_name", "B-toloc.city_name", "O"]]
    assert lookup([["boston", "denver", "paris"]]) == expected
    # ties: the first tag seen (boston: fromloc, city_name, toloc once each)
    assert lookup.best["boston"] == "B-fromloc.city_name"
    assert lookup.kind_of("boston") == "several training tags"
    assert lookup.kind_of("fares") == "one tag"
    assert lookup.kind_of("paris") == "unseen in train"
    sentences = [["to", "boston", "paris"]]
    gold = [["O", "B-toloc.city_name", "B-toloc.city_name"]]
    errors = lookup.errors_by_kind(sentences, gold, lookup(sentences))
    assert errors == {"several training tags": 1, "unseen in train": 1}
    wrong, n_kind, text = lookup.errors_table(
        sentences, gold, {"lookup": lookup(sentences), "gold": gold}
    )
    assert wrong == {"lookup": errors, "gold": {}}
    assert n_kind == {"one tag": 1, "several training tags": 1, "unseen in train": 1}
    head, kinds, first, second = text.split("\n")
    assert head.startswith("wrongly tagged test words") and head.endswith("one tag")
    assert kinds == f"{'(test words of the kind)':<26}" + f"{1:>23}" * 3
    assert first == f"{'lookup':<26}{1:>23}{1:>23}{0:>23}"
    with pytest.raises(ValueError, match="preds must name at least one tagger"):
        lookup.errors_table(sentences, gold, {})


def test_cooldown_verdict_credits_the_tail_only_beyond_the_jitter():
    assert slot_features.cooldown_verdict(0.95, 0.93, 0.01).startswith("ahead")
    assert slot_features.cooldown_verdict(0.95, 0.945, 0.01).startswith("not ahead")
