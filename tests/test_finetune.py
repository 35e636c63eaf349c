"""Fine-tuning helpers (chapter 12): word pieces with first-sub-word labels, QA
features that point at the answer, prediction read back per word, gradient norms
before clipping, overlap filtering, and the exercise checks."""

import pytest
import torch

from transformer_book import bert, bert_heads, checks, finetune, squad, training
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


def test_encode_words_and_first_subword_labels(tok):
    ids, word_of = finetune.encode_words(tok, ["to", "denver", "a.m."])
    assert tok.itos[ids[1]] == "den" and tok.itos[ids[2]] == "##ver"
    assert word_of == [0, 1, 1, 2, 2, 2, 2]  # "a.m." -> a . m .
    labels = finetune.first_subword_labels(word_of, [3, 4, 5])
    assert labels == [3, 4, -100, 5, -100, -100, -100]
    with pytest.raises(ValueError, match="word 2, but there are 2 labels"):
        finetune.first_subword_labels([0, 1, 2], [1, 2])


def test_tagging_round_trip(tok):
    tags = ["O", "B-toloc", "B-time"]
    tag_ids = {"O": 0, "B-toloc": 1, "B-time": 2}
    ex = finetune.tagging_examples(tok, [["to", "denver", "a.m."]], [tags], tag_ids, 16)
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


def test_qa_features_point_at_the_answer(tok):
    qa = squad.qa_from_slots(
        [["from", "boston", "to", "denver"]], [["O", "B-from", "O", "B-to"]]
    )
    f = finetune.qa_features(tok, qa, max_len=32)
    for feat in f:
        pieces = feat.encoding.ids[feat.start : feat.end + 1]
        assert tok.decode(pieces) == feat.example.answer_texts()[0]
        assert all(feat.context_mask[feat.start : feat.end + 1])
    assert sum(f[1].context_mask) == 5  # from boston to den ##ver
    short = finetune.qa_features(tok, qa, max_len=len(f[1].encoding) - 2)
    assert (short[1].start, short[1].end) == (0, 0)  # answer cut off: points at [CLS]


def test_grad_norms_are_measured_before_clipping():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    x = torch.randn(8, 4) * 100

    def loss_fn(m, batch):
        return m(x).pow(2).mean()

    with finetune.GradNorms(model) as g:
        training.train(
            model,
            [None],
            loss_fn,
            3,
            lr=1e-3,
            clip=1.0,
            progress=False,
            on_step=g.on_step,
        )
    assert len(g.norms) == 3 and g.norms[0] > 1.0  # clipping to 1 happened after
    torch.manual_seed(0)
    fresh = torch.nn.Linear(4, 1)  # the same initial weights as `model`
    loss_fn(fresh, None).backward()
    total = torch.nn.utils.clip_grad_norm_(fresh.parameters(), 1.0)  # before clipping
    assert abs(g.norms[0] - total.item()) < 1e-6 * total.item()


def test_grad_norms_name_a_missing_gradient():
    g = finetune.GradNorms(torch.nn.Linear(2, 1))
    with pytest.raises(ValueError, match="no gradient was recorded"):
        g.on_step(0, 0.0)


def test_weight_drift_and_overlap():
    a, b = torch.nn.Linear(3, 3), torch.nn.Linear(3, 3)
    b.load_state_dict(a.state_dict())
    assert finetune.weight_drift(a, b) == 0.0
    with torch.no_grad():
        b.weight.mul_(2)
        b.bias.mul_(2)
    assert finetune.weight_drift(b, a) == pytest.approx(1.0)
    kept = finetune.without_overlap(
        ["It's a gem. Really.", "dull", "a -LRB- small -RRB- film"], ["it 's a gem ."]
    )
    assert kept == ["dull", "a -LRB- small -RRB- film"]


def test_classification_batches_and_loss(tok):
    texts, labels = ["to denver", "from boston", "what city ?", "at 5"], [0, 1, 0, 1]
    it = finetune.classification_batches(tok, texts, labels, 2, 8, seed=0)
    seen = [next(it) for _ in range(2)]
    assert sorted(sum((b["labels"].tolist() for b in seen), [])) == [0, 0, 1, 1]
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
    with pytest.raises(ValueError, match="batch_size=5"):
        next(finetune.classification_batches(tok, texts, labels, 5, 8))


def test_check_best_span():
    def right(s, e, L):
        i, j = squad.best_span(s[None], e[None], max_len=L)
        return i.item(), j.item()

    checks.check_best_span(right)
    with pytest.raises(checks.ExerciseError, match="best start and the best end"):
        checks.check_best_span(lambda s, e, L: (int(s.argmax()), int(e.argmax())))


def test_check_first_subword_labels():
    checks.check_first_subword_labels(finetune.first_subword_labels)
    with pytest.raises(checks.ExerciseError, match="Every piece got its word's label"):
        checks.check_first_subword_labels(lambda w, lab: [lab[i] for i in w])


def test_sorted_classification_batches_cut_padding(tok):
    texts = ["to", "to denver", "from boston to denver at 5", "what city ?"] * 8
    labels = [0, 1, 0, 1] * 8  # 8, 16 and 8 texts of 3, 5 and 9 pieces
    plain = finetune.classification_batches(tok, texts, labels, 4, 16, seed=0)
    short = finetune.sorted_classification_batches(tok, texts, labels, 4, 16, seed=0)
    a = [next(plain) for _ in range(8)]
    b = [next(short) for _ in range(8)]  # one pass over the 32 texts
    assert set(b[0]) == {"ids", "token_type_ids", "attention_mask", "labels"}
    assert sorted(sum((x["labels"].tolist() for x in b), [])) == sorted(labels)

    def pad(bs):
        return sum((1 - x["attention_mask"]).sum().item() for x in bs)

    assert pad(b) == 0 < pad(a)  # only equal lengths share a batch here
    with pytest.raises(ValueError, match="window must be >= 1 batch, got 0"):
        next(finetune.sorted_classification_batches(tok, texts, labels, 4, 16, 0, 0))
    with pytest.raises(ValueError, match="batch_size=50"):
        next(finetune.sorted_classification_batches(tok, texts, labels, 50, 16))


def test_fit_head_learns_a_separable_task_and_folds_the_scaling():
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 2, (200,), generator=g)
    x = torch.randn(200, 5, generator=g) * torch.tensor([1.0, 10.0, 0.1, 1.0, 1.0])
    x[:, 2] += 0.5 * (2 * y - 1)  # a small feature carries the label
    x += 3.0  # an offset the standardisation must undo
    head = torch.nn.Linear(5, 2)
    acc = finetune.fit_head(head, x, y.tolist())
    assert acc >= 0.95
    with torch.no_grad():  # the folded weights predict on the raw features
        assert (head(x).argmax(-1) == y).float().mean().item() == acc
    with pytest.raises(ValueError, match=r"features must be \(N, 5\) with N = 3"):
        finetune.fit_head(head, x, [0, 1, 0])


def test_token_features_are_the_encoder_vectors_at_first_pieces(tok):
    tag_ids = {"O": 0, "B-toloc": 1, "B-time": 2}
    sentences = [["to", "denver", "a.m."], ["from", "boston"], ["at", "5"]]
    tags = [["O", "B-toloc", "B-time"], ["O", "B-toloc"], ["O", "B-time"]]
    ex = finetune.tagging_examples(tok, sentences, tags, tag_ids, 16)
    config = bert.BertConfig(
        vocab_size=len(tok), d_model=16, n_layers=1, n_heads=2, d_ff=16, max_len=16
    )
    encoder = bert.BertModel(config)
    x, y = finetune.token_features(encoder, tok, ex, batch_size=2)
    assert x.shape == (7, 16) and y.tolist() == [0, 1, 2, 0, 1, 0, 2]
    alone = tok.pad([ex[0].encoding])  # the first sentence alone, without padding
    hidden, _ = encoder(alone["ids"], alone["token_type_ids"], alone["attention_mask"])
    first = [t for t, label in enumerate(ex[0].labels) if label != -100]
    torch.testing.assert_close(x[:3], hidden[0, first], atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="examples is empty"):
        finetune.token_features(encoder, tok, [])
