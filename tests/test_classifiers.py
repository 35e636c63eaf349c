"""Token and sentence classifiers: shapes, padding invariance, [CLS] and mean pooling;
the pooling exercise."""

import dataclasses

import pytest
import torch

from transformer_book import bio, checks, classifiers
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
