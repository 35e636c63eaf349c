"""finetune (chapters 12 and 13): the one recipe learns a separable toy task and
leaves the caller's random state alone, batches of similar length, predictions read
back per text, word and answer."""

import pytest
import torch

from transformer_book import bert, bert_heads, finetune, qa, tagging
from transformer_book.tokenizer import SPECIAL_TOKENS, WordPiece

VOCAB = [
    *SPECIAL_TOKENS,
    "to",
    "den",
    "##ver",
    "from",
    "boston",
    "a",
    ".",
    "m",
    "what",
    "is",
    "the",
    "city",
    "?",
    "at",
    "5",
]


@pytest.fixture
def tok():
    return WordPiece(VOCAB)


def test_tagging_round_trip(tok):
    tags = ["O", "B-toloc", "B-time"]
    tag_ids = {"O": 0, "B-toloc": 1, "B-time": 2}
    ex = tagging.tagging_examples(tok, [["to", "denver", "a.m."]], [tags], tag_ids, 16)
    assert ex[0].labels[0] == -100 and ex[0].labels[1:4] == [0, 1, -100]

    class Oracle(torch.nn.Module):  # scores the gold label of every piece highest
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(()))

        def forward(self, ids, types, mask):
            labels = torch.tensor([[max(x, 0) for x in ex[0].labels]])
            return torch.nn.functional.one_hot(labels, 3).float() + self.w

    assert finetune.predict_tags(Oracle(), tok, ex, ["O", "B-toloc", "B-time"]) == [
        tags
    ]


def test_span_loss_and_predict_answers_read_the_gold_span(tok):
    questions = qa.qa_from_slots(
        [["from", "boston", "to", "denver"]], [["O", "B-from", "O", "B-to"]]
    )
    features = qa.qa_features(tok, questions, max_len=32)

    class Oracle(torch.nn.Module):  # scores each feature's gold start and end highest
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(()))

        def forward(self, ids, types, mask):
            hit = [
                (f.start, f.end)
                for f in features
                if f.encoding.ids == ids[0, : len(f)].tolist()
            ]
            start = torch.full(ids.shape, -10.0) + self.w
            end = start.clone()
            for row in range(len(ids)):
                f = next(
                    f for f in features if f.encoding.ids == ids[row, : len(f)].tolist()
                )
                start[row, f.start] = end[row, f.end] = 10.0
            del hit
            return start, end

    answers = finetune.predict_answers(Oracle(), tok, features)
    assert answers == ["boston", "denver"]
    batch = next(finetune.qa_batches(tok, features, 2, shuffle=False))
    assert batch["context"].dtype == torch.long and batch["context"].sum() > 0
    assert finetune.span_loss(Oracle(), batch).item() < 1e-6


def test_classification_batches_and_loss(tok):
    texts, labels = ["to denver", "from boston", "what city ?", "at 5"], [0, 1, 0, 1]
    it = finetune.classification_batches(tok, texts, labels, 2, 8, seed=0)
    seen = [next(it) for _ in range(2)]
    assert sorted(sum((b["labels"].tolist() for b in seen), [])) == [0, 0, 1, 1]
    assert sorted(sum((b["index"].tolist() for b in seen), [])) == [0, 1, 2, 3]
    assert all(b["ids"].device.type == "cpu" for b in seen)
    config = bert.BertConfig(
        vocab_size=len(tok),
        d_model=16,
        n_layers=1,
        n_heads=2,
        d_ff=16,
        max_len=16,
        dropout=0.0,
    )
    model = bert_heads.SequenceClassifier(bert.BertModel(config), 2)
    assert finetune.classification_loss(model, seen[0]).shape == ()
    assert len(finetune.predict_classes(model, tok, texts, 8)) == 4
    logits = finetune.predict_logits(model, tok, texts, 8, batch_size=3)
    for i, text in enumerate(texts):  # in the order of the texts, whatever the batch
        alone = tok.pad([tok.encode(text, max_len=8)])
        expected = model(alone["ids"], alone["token_type_ids"], alone["attention_mask"])
        torch.testing.assert_close(logits[i], expected[0], atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="one label per text"):
        next(finetune.classification_batches(tok, texts, labels[:3], 2, 8))


def test_classification_batches_cut_padding_and_reshuffle(tok):
    texts = ["to", "to denver", "from boston to denver at 5", "what city ?"] * 8
    labels = [0, 1, 0, 1] * 8  # 8, 16 and 8 texts of 3, 5 and 9 pieces
    it = finetune.classification_batches(tok, texts, labels, 4, 16, seed=0)
    one, two = [next(it) for _ in range(8)], [next(it) for _ in range(8)]  # 2 passes
    keys = {"ids", "token_type_ids", "attention_mask", "labels", "index"}
    assert set(one[0]) == keys
    assert sorted(sum((x["index"].tolist() for x in one), [])) == list(range(32))
    assert sum((1 - x["attention_mask"]).sum().item() for x in one) == 0  # no padding
    assert [x["index"].tolist() for x in one] != [x["index"].tolist() for x in two]
    fixed = finetune.classification_batches(tok, texts, labels, 5, 16, shuffle=False)
    assert sum(len(b["index"]) for b in fixed) == 32  # one pass, then it stops
    mixed = finetune.classification_batches(tok, texts, labels, 4, 16, by_length=False)
    padding = sum((1 - next(mixed)["attention_mask"]).sum().item() for _ in range(8))
    assert padding > 0  # random batches mix lengths


def test_encoding_batches_name_a_field_of_the_wrong_length(tok):
    encs = [tok.encode("to denver")] * 3
    with pytest.raises(ValueError, match=r"fields\['labels'\] must hold one value"):
        next(finetune.encoding_batches(tok, encs, 2, {"labels": [0, 1]}))


def _toy_classifier(tok, pooling="cls"):
    config = bert.BertConfig(
        vocab_size=len(tok), d_model=16, n_layers=1, n_heads=2, d_ff=32, max_len=16,
        dropout=0.1,
    )  # fmt: skip
    return bert_heads.SequenceClassifier(bert.BertModel(config), 2, pooling=pooling)


def test_fine_tune_learns_a_separable_toy_task_and_leaves_the_rng(tok):
    texts = ["to denver", "from boston", "to den", "from boston at 5"] * 8
    labels = [0, 1, 0, 1] * 8  # "to" -> 0, "from" -> 1
    torch.manual_seed(0)
    model = _toy_classifier(tok, pooling="mean")
    token = model.encoder.embeddings.token.weight
    before = token.detach().clone()
    state = torch.random.get_rng_state()
    batches = finetune.classification_batches(tok, texts, labels, 8, 16, seed=0)
    losses = finetune.fine_tune(model, batches, 60, 1e-2, seed=0)
    assert torch.equal(state, torch.random.get_rng_state())  # the caller's RNG
    assert len(losses) == 60 and sum(losses[-5:]) / 5 < 0.1 < 0.5 < losses[0]
    assert torch.equal(token, before) and token.requires_grad  # frozen, then thawed
    assert finetune.predict_classes(model, tok, texts, 16) == labels
    with pytest.raises(ValueError, match="freeze_token_embeddings"):
        finetune.fine_tune(torch.nn.Linear(2, 2), [None], 1, 1e-3)


def test_fine_tune_classifier_copies_or_reinitialises_and_is_seeded(tok):
    texts = ["to denver", "from boston", "to den", "from boston at 5"] * 8
    labels = [0, 1, 0, 1] * 8
    encoder = _toy_classifier(tok).encoder
    before = {k: v.clone() for k, v in encoder.state_dict().items()}
    state = torch.random.get_rng_state()
    run = finetune.fine_tune_classifier(
        encoder, tok, texts, labels, 40, 1e-2, pooling="mean", batch_size=8, seed=0
    )
    assert torch.equal(state, torch.random.get_rng_state())  # the caller's RNG
    assert all(torch.equal(v, encoder.state_dict()[k]) for k, v in before.items())
    assert run.model.pooling == "mean" and run.model.classifier.out_features == 2
    assert len(run.losses) == len(run.grad_norms) == 40 and run.losses[-1] < 0.3
    assert finetune.predict_classes(run.model, tok, texts, 16) == labels
    copied = run.model.encoder.embeddings.token.weight  # frozen: still the encoder's
    assert torch.equal(copied, encoder.embeddings.token.weight)
    again = finetune.fine_tune_classifier(
        encoder, tok, texts, labels, 40, 1e-2, pooling="mean", batch_size=8, seed=0
    )
    assert again.losses == run.losses  # the seed fixes head, batches and dropout
    scratch = finetune.fine_tune_classifier(
        encoder, tok, texts, labels, 1, 1e-9, seed=1, from_scratch=True,
        freeze_token_embeddings=False,
    )  # fmt: skip
    fresh = scratch.model.encoder.embeddings.token.weight
    assert fresh.shape == copied.shape and not torch.allclose(fresh, copied)
    with pytest.raises(ValueError, match="one label per text: 32 texts, 31"):
        finetune.fine_tune_classifier(encoder, tok, texts, labels[:31], 1, 1e-3)
