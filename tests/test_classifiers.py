"""Token and sentence classifiers: shapes, padding invariance, [CLS] and mean pooling;
the pooling exercise."""

import dataclasses

import pytest
import torch

from transformer_book import batching, bio, checks, classifiers, training
from transformer_book.classifiers import (
    ClassifierConfig,
    SentenceClassifier,
    WordTagger,
)

PAD = 0


def make_config(**overrides):
    base = dict(
        vocab_size=30,
        n_classes=5,
        max_len=16,
        d_model=16,
        n_heads=4,
        d_ff=32,
        dropout=0.0,
        pad_id=PAD,
    )
    return ClassifierConfig(**{**base, **overrides})


def padded(lengths, T, seed=0):
    """Random ids (B, T) with PAD after each row's length, and the (B, T) keep mask."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, 30, (len(lengths), T), generator=g)
    keep = torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]
    return ids.masked_fill(~keep, PAD), keep


@pytest.mark.parametrize("positions", classifiers.POSITIONS)
def test_token_classifier_shapes(positions):
    model = WordTagger(make_config(positions=positions)).eval()
    ids, _ = padded([7, 3], 7)
    assert model(ids).shape == (2, 7, 5)
    assert model.contextual(ids).shape == (2, 7, 16)


@pytest.mark.parametrize("positions", classifiers.POSITIONS)
@pytest.mark.parametrize("pooling", classifiers.POOLINGS)
def test_sentence_classifier_shapes(positions, pooling):
    model = SentenceClassifier(make_config(positions=positions, pooling=pooling)).eval()
    ids, _ = padded([7, 3], 7)
    assert model(ids).shape == (2, 5)
    assert model.pool(ids).shape == (2, 16)


@pytest.mark.parametrize("positions", classifiers.POSITIONS)
def test_padding_does_not_change_real_tokens(positions):
    torch.manual_seed(0)
    model = WordTagger(make_config(positions=positions)).eval()
    ids, _ = padded([4], 4)
    alone = model(ids)  # (1, 4, C)
    longer = torch.cat(
        [ids, torch.full((1, 6), PAD)], dim=1
    )  # the same sentence with 6 <pad>
    other, _ = padded([10], 10, seed=1)
    batch = torch.cat([longer, other])  # (2, 10)
    torch.testing.assert_close(model(batch)[:1, :4], alone, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("pooling", classifiers.POOLINGS)
def test_padding_does_not_change_sentence_predictions(pooling):
    torch.manual_seed(0)
    model = SentenceClassifier(
        make_config(pooling=pooling, positions="relative")
    ).eval()
    ids, _ = padded([5], 5)
    longer = torch.cat([ids, torch.full((1, 7), PAD)], dim=1)
    torch.testing.assert_close(model(longer), model(ids), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(
        model.pool(longer), model.pool(ids), atol=1e-5, rtol=1e-5
    )


def test_mean_pooling_is_the_masked_mean_of_the_contextual_vectors():
    torch.manual_seed(0)
    cfg = make_config(pooling="mean")
    model = SentenceClassifier(cfg).eval()
    ids, keep = padded([6, 2], 6)
    token_model = WordTagger(cfg).eval()
    token_model.body.load_state_dict(
        model.body.state_dict()
    )  # the same embeddings and encoder
    h = token_model.contextual(ids)  # (B, T, D)
    expected = torch.stack([h[0, :6].mean(0), h[1, :2].mean(0)])  # (B, D)
    torch.testing.assert_close(model.pool(ids), expected, atol=1e-6, rtol=1e-5)
    assert not torch.allclose(
        model.pool(ids)[1], h[1].mean(0), atol=1e-4
    )  # a plain mean would include padding


def test_cls_pooling_reads_the_prepended_vector():
    torch.manual_seed(0)
    model = SentenceClassifier(make_config(pooling="cls")).eval()
    assert model.cls.shape == (1, 1, 16)
    ids, _ = padded([5, 5], 5)
    before = model.pool(ids)
    with torch.no_grad():
        model.cls.add_(
            1.0
        )  # the pooled vector is the encoder's output at the [CLS] position ...
    assert not torch.allclose(model.pool(ids), before)
    n_cls = sum(p.numel() for p in model.parameters())
    n_mean = sum(
        p.numel() for p in SentenceClassifier(make_config(pooling="mean")).parameters()
    )
    assert n_cls - n_mean == 16  # ... and that vector is the only extra parameter


def test_cls_and_mean_differ():
    torch.manual_seed(0)
    cls_model = SentenceClassifier(make_config(pooling="cls")).eval()
    mean_model = SentenceClassifier(make_config(pooling="mean")).eval()
    mean_model.load_state_dict(
        {k: v for k, v in cls_model.state_dict().items() if k != "cls"}
    )
    ids, _ = padded([5], 5)
    assert not torch.allclose(cls_model.pool(ids), mean_model.pool(ids), atol=1e-3)


def test_learned_positions_stop_at_max_len():
    model = WordTagger(make_config(max_len=8))
    model(torch.ones(1, 8, dtype=torch.long))  # exactly max_len is fine
    with pytest.raises(ValueError, match="9 tokens is longer than max_len=8"):
        model(torch.ones(1, 9, dtype=torch.long))
    with pytest.raises(
        ValueError, match=r"8 tokens plus \[CLS\] is longer than max_len=8"
    ):
        SentenceClassifier(make_config(max_len=8, pooling="cls"))(
            torch.ones(1, 8, dtype=torch.long)
        )
    relative = WordTagger(make_config(max_len=8, positions="relative"))
    assert relative(torch.ones(1, 20, dtype=torch.long)).shape == (
        1,
        20,
        5,
    )  # no table to run out of


def test_positions_change_the_output_order_sensitively():
    torch.manual_seed(0)
    for positions in classifiers.POSITIONS:
        model = WordTagger(make_config(positions=positions)).eval()
        ids = torch.tensor([[3, 4, 5, 6]])
        flipped = ids.flip(1)
        # without positions the outputs would just be permuted; with them they are not
        assert not torch.allclose(model(flipped).flip(1), model(ids), atol=1e-4)


def test_bad_config_and_input():
    with pytest.raises(ValueError, match="pooling must be one of"):
        make_config(pooling="max")
    with pytest.raises(ValueError, match="positions must be one of"):
        make_config(positions="sinusoidal")
    with pytest.raises(ValueError, match="pad_id must lie in"):
        make_config(pad_id=30)
    with pytest.raises(ValueError, match="ids must be an integer tensor of shape"):
        WordTagger(make_config())(torch.zeros(2, 3))
    with pytest.raises(dataclasses.FrozenInstanceError):
        make_config().d_model = 8


def test_training_step_ignores_padding_targets():
    torch.manual_seed(0)
    model = WordTagger(make_config())
    ids, keep = padded([5, 2], 5)
    targets = torch.randint(0, 5, ids.shape).masked_fill(~keep, -100)
    logits = model(ids)  # (B, T, C)
    loss = torch.nn.functional.cross_entropy(
        logits.flatten(0, 1), targets.flatten(), ignore_index=-100
    )
    loss.backward()
    assert torch.isfinite(loss) and model.head.weight.grad is not None


# --- the exercise check -------------------------------------------------------------------


# --- BIO-constrained decoding ----------------------------------------------------------------


@pytest.mark.parametrize("positions", ["learned", "relative"])
def test_attention_weights_are_what_the_first_block_uses(positions):
    torch.manual_seed(0)
    cfg = classifiers.ClassifierConfig(
        vocab_size=20,
        n_classes=3,
        d_model=16,
        n_heads=4,
        d_ff=32,
        dropout=0.0,
        positions=positions,
        pooling="cls",
    )
    model = classifiers.SentenceClassifier(cfg).eval()
    ids = torch.tensor([[5, 6, 7, 0], [8, 9, 0, 0]])  # (B, T) with padding id 0
    w = model.attention_weights(ids)
    assert w.shape == (2, 4, 5, 5)  # [CLS] + 4 tokens
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 4, 5))
    assert torch.all(w[1, :, :, 3:] == 0)  # padding keys get no weight
    # the same weights the block's own attention produces inside the forward pass
    seen = {}
    hook = model.body.encoder.layers[0].attn.register_forward_hook(
        lambda mod, args, kwargs, out: seen.update(x=args[0], kw=kwargs),
        with_kwargs=True,
    )
    model(ids)
    hook.remove()
    _, ref = model.body.encoder.layers[0].attn(
        seen["x"], mask=seen["kw"]["mask"], bias=seen["kw"]["bias"], need_weights=True
    )
    torch.testing.assert_close(w, ref)


def test_predictions_come_back_in_the_rows_order_whatever_the_batching():
    lengths = [5, 1, 3, 2, 4]
    ids, keep = padded(lengths, 5, seed=1)
    lens = torch.tensor(lengths)
    tagger = WordTagger(make_config(positions="relative")).eval()
    alone = [tagger(ids[n : n + 1, :k])[0].argmax(-1).tolist() for n, k in
             enumerate(lengths)]  # fmt: skip
    for size in (1, 2, 128):
        assert classifiers.predict_tags(tagger, ids, lens, batch_size=size) == alone
    sentence = SentenceClassifier(make_config(pooling="mean")).eval()
    expected = [sentence(ids[n : n + 1, :k]).argmax(-1).item() for n, k in
                enumerate(lengths)]  # fmt: skip
    assert classifiers.predict_classes(sentence, ids, lens, batch_size=2) == expected
    tagger.train()
    classifiers.predict_tags(tagger, ids, lens)
    assert tagger.training, "the model's mode is restored"


def test_predict_tags_with_transitions_is_viterbi_and_obeys_them():
    tags = ["O", "B-a", "I-a", "B-b", "I-b"]
    start, allowed = bio.bio_transitions(tags)
    lengths = torch.tensor([5, 3])
    ids, _ = padded(lengths.tolist(), 5, seed=2)
    tagger = WordTagger(make_config()).eval()
    got = classifiers.predict_tags(tagger, ids, lengths, (start, allowed))
    log_probs = tagger(ids).log_softmax(-1)
    ref = bio.bio_viterbi(log_probs, lengths, start, allowed)
    assert got == [ref[0].tolist(), ref[1, :3].tolist()]
    for row in got:
        assert start[row[0]] and all(allowed[a, b] for a, b in zip(row, row[1:]))


def test_losses_skip_padding_and_mean_token_loss_counts_every_scored_token():
    torch.manual_seed(0)
    tagger = WordTagger(make_config()).eval()
    ids, keep = padded([4, 2, 3], 4)
    tags = torch.randint(0, 5, ids.shape).masked_fill(~keep, -100)
    per_token = torch.nn.functional.cross_entropy(
        tagger(ids)[keep], tags[keep]
    )  # over the 9 real tokens only
    torch.testing.assert_close(classifiers.token_loss(tagger, (ids, tags)), per_token)
    # two batches of unequal size: the mean over tokens, not of the batch means
    batches = [(ids[:1], tags[:1]), (ids[1:], tags[1:])]
    got = classifiers.mean_token_loss(tagger, batches)
    assert got == pytest.approx(per_token.item(), rel=1e-5)
    with pytest.raises(ValueError, match="no scored token"):
        classifiers.mean_token_loss(tagger, [(ids, torch.full_like(tags, -100))])
    sentence = SentenceClassifier(make_config()).eval()
    labels = torch.tensor([0, 3, 1])
    ref = torch.nn.functional.cross_entropy(sentence(ids), labels)
    torch.testing.assert_close(classifiers.sentence_loss(sentence, (ids, labels)), ref)


def test_fit_scores_every_few_steps_and_at_the_cooldown_and_the_end():
    torch.manual_seed(0)
    tagger = WordTagger(make_config())
    ids, keep = padded([4, 2, 3], 4)
    tags = torch.ones_like(ids).masked_fill(~keep, -100)  # tag 1 everywhere
    calls = []

    def score(model):
        calls.append(model.training)
        return classifiers.mean_token_loss(model, [(ids, tags)])

    history, scores = classifiers.fit(
        tagger, [(ids, tags)], classifiers.token_loss, 12, score, every=5, lr=1e-2,
        cooldown=3,
    )  # fmt: skip
    assert len(history) == 12 and list(scores) == [5, 9, 10, 12]
    assert scores[12] < scores[5] and all(calls), "scored mid-training, in train mode"
    with pytest.raises(ValueError, match="every must be >= 1, got 0"):
        classifiers.fit(
            tagger, [(ids, tags)], classifiers.token_loss, 2, score, 0, 1e-3
        )


def test_check_max_pool(capsys):
    def reference(h, lengths):
        keep = torch.arange(h.shape[1]) < lengths[:, None]
        return h.masked_fill(~keep[..., None], float("-inf")).amax(dim=1)

    checks.check_max_pool(reference)
    assert "Correct:" in capsys.readouterr().out

    def zeroed(h, lengths):
        keep = torch.arange(h.shape[1]) < lengths[:, None]
        return (h * keep[..., None]).amax(dim=1)

    def one_more(h, lengths):
        keep = torch.arange(h.shape[1]) <= lengths[:, None]
        return h.masked_fill(~keep[..., None], float("-inf")).amax(dim=1)

    for wrong, message in (
        (lambda h, lengths: h.amax(dim=1), "padding included"),
        (zeroed, "0 wins the max"),
        (one_more, "one position too many"),
        (lambda h, lengths: h.mean(dim=1), "differ"),
    ):
        with pytest.raises(checks.ExerciseError, match=message):
            checks.check_max_pool(wrong)


def test_deep_tagger_is_the_seeded_tagger_with_its_encoder_replaced():
    from transformer_book.blocks import Encoder
    from transformer_book.norms import RMSNorm

    torch.manual_seed(3)  # chapter 6's old inline construction, the same draws
    cfg = ClassifierConfig(
        30, 7, max_len=64, d_model=16, n_heads=2, d_ff=32, n_layers=1, dropout=0.0
    )
    ref = WordTagger(cfg)
    ref.body.encoder = Encoder(5, 16, 2, 32, norm_first=True, norm="layer")
    model = classifiers.deep_tagger(
        30, 7, 5, True, seed=3, d_model=16, n_heads=2, d_ff=32, pad_id=0
    )
    assert len(model.body.encoder.layers) == 5
    for (name, p), (ref_name, q) in zip(
        model.state_dict().items(), ref.state_dict().items(), strict=True
    ):
        assert name == ref_name
        torch.testing.assert_close(p, q, rtol=0, atol=0)
    ids = torch.randint(1, 30, (2, 6))
    assert model(ids).shape == (2, 6, 7)
    rms = classifiers.deep_tagger(
        30, 7, 2, False, "rms", d_model=16, n_heads=2, d_ff=32
    )
    assert isinstance(rms.body.encoder.layers[0].norm1, RMSNorm)
    other = classifiers.deep_tagger(
        30, 7, 5, True, seed=4, d_model=16, n_heads=2, d_ff=32
    )
    w_other, w = (m.body.encoder.layers[0].ff.up_proj.weight for m in (other, model))
    assert not torch.equal(w_other, w)  # the seed draws the weights


# --- the plumbing chapters 05 and 07 share, each against the chapter's old inline code


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
    atis = classifiers.SlotIntentFeatures.from_split(train)
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
    atis = classifiers.SlotIntentFeatures.from_split(train)
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


def test_lookup_tagger_is_the_chapters_table():
    train = tiny_split()
    lookup = classifiers.LookupTagger(train.sentences, train.tags)
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


def test_cls_attention_shares_are_the_chapters_reading():
    import statistics
    from collections import defaultdict

    train = tiny_split()
    atis = classifiers.SlotIntentFeatures.from_split(train)
    torch.manual_seed(0)
    model = SentenceClassifier(
        make_config(vocab_size=len(atis.words), positions="relative")
    ).eval()
    mean, frequent, matched = classifiers.cls_attention_shares(
        model, atis.words, train.sentences, train.tags, min_count=2
    )
    # the chapter's read_shares, inline
    ids, lengths = atis.words.encode_batch(train.sentences)
    with torch.no_grad():
        w = model.attention_weights(ids)[:, :, 0, 1:].mean(dim=1)
    w = w / w.sum(dim=1, keepdim=True) * lengths[:, None]
    real = torch.arange(w.shape[1]) < lengths[:, None]
    at_position = (w * real).sum(dim=0) / real.sum(dim=0)
    ratio = (w / at_position).tolist()
    by_kind, by_word, at_pos = defaultdict(list), defaultdict(list), defaultdict(list)
    for n, (sent, tags, row) in enumerate(zip(train.sentences, train.tags, w.tolist())):
        for t, (word, tag, share) in enumerate(zip(sent, tags, row)):
            kind = (
                "O" if tag == "O" else "city" if tag.endswith("city_name") else "slot"
            )
            by_kind[kind].append(share)
            at_pos[kind].append(ratio[n][t])
            by_word[word].append(share)
    assert mean == {k: statistics.mean(v) for k, v in by_kind.items()}
    assert matched == {k: statistics.mean(v) for k, v in at_pos.items()}
    assert frequent == {
        x: statistics.mean(v) for x, v in by_word.items() if len(v) >= 2
    }
    assert set(frequent) == {"boston", "to", "denver"}
    # every sentence's shares average to 1
    assert (
        abs(statistics.mean(by_kind["O"] + by_kind["city"] + by_kind["slot"]) - 1)
        < 1e-6
    )


def test_read_by_every_keeps_the_words_every_seed_agrees_on():
    per_seed = [{"a": 1.5, "b": 1.2, "c": 0.5, "d": 0.9, "e": 1.1},
                {"a": 1.1, "b": 1.4, "c": 0.7, "d": 1.2, "e": 0.8}]  # fmt: skip
    most, least = classifiers.read_by_every(per_seed, k=5)
    assert most == ["a", "b"]  # means 1.3 and 1.3: a first, as seen
    assert least == ["c"]  # d and e cross 1
    assert classifiers.read_by_every(per_seed, k=1) == (["a"], ["c"])


def test_verdicts_follow_the_seeds():
    from transformer_book import report

    cls, mean = [0.90, 0.91, 0.92], [0.85, 0.86, 0.87]  # 5 points apart on every seed
    assert classifiers.pooling_verdict(cls, mean).startswith("[CLS] pooling is ahead")
    assert classifiers.pooling_verdict(mean, cls).startswith("mean pooling is ahead")
    mixed = [0.86, 0.91, 0.84]
    assert classifiers.pooling_verdict(mixed, mean) == report.compare_seeds(
        mean, mixed, pairs=True
    )
    text = classifiers.paired_differences(cls, mean)
    assert text.startswith("[CLS] minus mean, seed by seed: +0.050, +0.050, +0.050")
    assert text.endswith("against 4.30")
    found = classifiers.pooling_conclusion(cls, mean, 1000)
    assert abs(found["gap"] - 0.05) < 1e-9
    assert found["ranges"] == pytest.approx([0.02, 0.02])
    assert found["gap_vs_seeds"] == "larger than the spread of either pooling's seeds"
    assert (
        found["conclusion"]
        == "the ranking holds for these 3 seeds, by 50 of the 1000 test queries"
    )
    assert found["selective"].startswith("put [CLS] pooling ahead")
    tied = classifiers.pooling_conclusion(mixed, mean, 1000)
    assert tied["conclusion"].startswith("3 seeds cannot tell the two poolings apart")
    assert (
        tied["selective"] == "did not make [CLS] pooling measurably more accurate here"
    )
    assert classifiers.cooldown_verdict(0.95, 0.93, 0.01).startswith("ahead")
    assert classifiers.cooldown_verdict(0.95, 0.945, 0.01).startswith("not ahead")
