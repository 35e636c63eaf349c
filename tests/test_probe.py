"""probe (chapters 10, 12 and 13): frozen features are the encoder's own vectors, in
the order of the texts and words, and the linear head learns a separable task with the
standardisation folded into its weights."""

import pytest
import torch

from transformer_book import bert, masks, probe, tagging
from transformer_book.tokenizer import SPECIAL_TOKENS, WordPiece

WORDS = ["to", "den", "##ver", "from", "boston", "a", ".", "m", "at", "5"]


@pytest.fixture
def tok():
    return WordPiece([*SPECIAL_TOKENS, *WORDS])


@pytest.fixture
def encoder(tok):
    config = bert.BertConfig(
        vocab_size=len(tok), d_model=16, n_layers=1, n_heads=2, d_ff=16, max_len=16
    )
    return bert.BertModel(config)


def test_frozen_features_are_the_encoder_vectors_in_text_order(tok, encoder):
    texts = ["to denver at 5", "from boston", "a.m.", "to boston from denver"]
    feats = probe.frozen_features(encoder, tok, texts, max_len=16, batch_size=2)
    assert {k: tuple(v.shape) for k, v in feats.items()} == {
        "cls": (4, 16), "pooled": (4, 16), "mean": (4, 16)
    }  # fmt: skip
    for i, text in enumerate(texts):  # each alone, without padding
        alone = tok.pad([tok.encode(text, max_len=16)])
        mask = alone["attention_mask"]
        hidden, pooled = encoder(alone["ids"], alone["token_type_ids"], mask)
        mean = masks.masked_mean(hidden, mask.bool())
        want = {"cls": hidden[0, 0], "pooled": pooled[0], "mean": mean[0]}
        for name, vector in want.items():
            torch.testing.assert_close(feats[name][i], vector, atol=1e-5, rtol=0)
    assert not encoder.training  # read in eval mode: no dropout


def test_token_features_are_the_encoder_vectors_at_first_pieces(tok, encoder):
    tag_ids = {"O": 0, "B-toloc": 1, "B-time": 2}
    sentences = [["to", "denver", "a.m."], ["from", "boston"], ["at", "5"]]
    tags = [["O", "B-toloc", "B-time"], ["O", "B-toloc"], ["O", "B-time"]]
    ex = tagging.tagging_examples(tok, sentences, tags, tag_ids, 16)
    x, y = probe.token_features(encoder, tok, ex, batch_size=2)
    assert x.shape == (7, 16) and y.tolist() == [0, 1, 2, 0, 1, 0, 2]
    alone = tok.pad([ex[0].encoding])  # the first sentence alone, without padding
    hidden, _ = encoder(alone["ids"], alone["token_type_ids"], alone["attention_mask"])
    first = [t for t, label in enumerate(ex[0].labels) if label != -100]
    torch.testing.assert_close(x[:3], hidden[0, first], atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="examples is empty"):
        probe.token_features(encoder, tok, [])


def test_fit_head_learns_a_separable_task_and_folds_the_scaling():
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 2, (200,), generator=g)
    x = torch.randn(200, 5, generator=g) * torch.tensor([1.0, 10.0, 0.1, 1.0, 1.0])
    x[:, 2] += 0.5 * (2 * y - 1)  # a small feature carries the label
    x += 3.0  # an offset the standardisation must undo
    head = torch.nn.Linear(5, 2)
    acc = probe.fit_head(head, x, y.tolist())
    assert acc >= 0.95
    with torch.no_grad():  # the folded weights predict on the raw features
        assert (head(x).argmax(-1) == y).float().mean().item() == acc
    raw = torch.nn.Linear(5, 2)  # on the raw features: the same task, other weights
    assert probe.fit_head(raw, x, y.tolist(), standardize=False) >= 0.9
    assert not torch.allclose(raw.weight, head.weight)
    with pytest.raises(ValueError, match=r"features must be \(N, 5\) with N = 3"):
        probe.fit_head(head, x, [0, 1, 0])


def test_linear_probe_fits_a_head_per_class():
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 3, (300,), generator=g)
    x = torch.randn(300, 4, generator=g) + 3 * torch.nn.functional.one_hot(y, 4)
    head = probe.linear_probe(x, y.tolist())
    assert (head.in_features, head.out_features) == (4, 3)
    assert (head(x).argmax(-1) == y).float().mean().item() > 0.95
    with pytest.raises(ValueError, match=r"features must be \(N, D\) with N = 2"):
        probe.linear_probe(x, [0, 1])


def test_embedding_accuracy_reads_labels_by_nearest_and_by_probe(tok, encoder):
    ref = (["to denver", "from boston", "to denver at 5", "from boston a.m."],
           ["city", "airport", "city", "airport"])  # fmt: skip
    # held-out copies of reference sentences: the nearest one is itself (cosine 1)
    knn, lin = probe.embedding_accuracy(encoder, tok, ref, (ref[0][:2], ref[1][:2]))
    assert knn == 1.0 and 0.0 <= lin <= 1.0
    flipped = (ref[0][:2], ["airport", "city"])  # the same texts, the wrong labels
    assert probe.embedding_accuracy(encoder, tok, ref, flipped)[0] == 0.0
    state = torch.random.get_rng_state()
    probe.embedding_accuracy(encoder, tok, ref, (ref[0][:2], ref[1][:2]))
    assert torch.equal(state, torch.random.get_rng_state())  # caller's state untouched
    with pytest.raises(ValueError, match="2 held-out texts for 1 labels"):
        probe.embedding_accuracy(encoder, tok, ref, (ref[0][:2], ["city"]))


def test_probe_accuracy_fits_on_train_and_scores_on_test():
    x = torch.tensor([[0.0, 1.0], [0.1, 0.9], [1.0, 0.0], [0.9, 0.1]])
    acc, head = probe.probe_accuracy(x, [0, 0, 1, 1], x[[0, 2]], [0, 1])
    assert acc == 1.0 and head.out_features == 2
    assert probe.probe_accuracy(x, [0, 0, 1, 1], x[[0, 2]], [1, 0])[0] == 0.0
    assert probe.probe_accuracy(x, [0, 0, 1, 1], x[[0]], [-1])[0] == 0.0  # unseen
    with pytest.raises(ValueError, match="x_test must be"):
        probe.probe_accuracy(x, [0, 0, 1, 1], x[[0, 2]], [0])
