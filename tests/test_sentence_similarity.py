"""Chapter 11's sentence-similarity experiment: similarities within and across groups,
bags of words, the few-shot draws and 1-NN with all-MiniLM-L6-v2 or bags of words."""

import pytest
import torch

from transformer_book import bert, sentence_similarity


def test_similarity_by_group_equals_the_chapters_inline_means():
    torch.manual_seed(0)
    emb = torch.nn.functional.normalize(torch.randn(12, 5), dim=-1)
    sim = emb @ emb.T
    group_of = torch.arange(12) // 4
    same = (group_of[:, None] == group_of[None, :]) & ~torch.eye(12, dtype=bool)
    nearest = sim.clone().fill_diagonal_(-1).argmax(dim=1)  # chapter 11's inline code
    assert sentence_similarity.similarity_by_group(sim, group_of) == {
        "within": sim[same].mean().item(),
        "across": sim[group_of[:, None] != group_of].mean().item(),
        "hits": (group_of[nearest] == group_of).float().mean().item(),
    }
    tidy = torch.eye(3).repeat_interleave(2, dim=0)  # two identical vectors per group
    stats = sentence_similarity.similarity_by_group(tidy @ tidy.T, torch.arange(6) // 2)
    assert stats == {"within": 1.0, "across": 0.0, "hits": 1.0}


def test_bag_of_words_and_nearest_label_accuracy():
    bags = sentence_similarity.bag_of_words(["a b b", "c", "a c"])  # words a, b, c
    expected = torch.tensor([[1.0, 2, 0], [0, 0, 1], [1, 0, 1]])
    torch.testing.assert_close(bags, expected / expected.norm(dim=1, keepdim=True))
    queries = torch.tensor([[1.0, 0], [0, 1], [0.6, 0.8]])
    shots, shot_labels = torch.tensor([[0.0, 1], [1, 0]]), torch.tensor([7, 3])
    acc = sentence_similarity.nearest_label_accuracy(
        queries, torch.tensor([3, 7, 3]), shots, shot_labels
    )
    assert acc == pytest.approx(2 / 3)  # the third query is nearer [0, 1]: label 7


def test_few_shot_draws_per_label_reproducibly():
    pool = [(f"{y} {i}", y) for y in ("x", "y", "z") for i in range(10)]
    texts, labels = sentence_similarity.few_shot(pool, ["z", "x"], 3, seed=0)
    assert labels.tolist() == [0, 0, 0, 1, 1, 1] and len(set(texts)) == 6
    assert all(t.startswith("z") for t in texts[:3])
    assert sentence_similarity.few_shot(pool, ["z", "x"], 3, seed=0)[0] == texts
    assert sentence_similarity.few_shot(pool, ["z", "x"], 3, seed=1)[0] != texts


def test_few_shot_1nn_equals_the_chapters_inline_loop(minilm):
    import random

    model, tok = minilm
    pool = [(t, y) for y, ts in {"w": ["rain today", "is it sunny", "snow tomorrow",
            "weather in paris"], "m": ["play a song", "play jazz", "put on music",
            "play the album"]}.items() for t in ts]  # fmt: skip
    queries, labels = ["will it rain", "play some jazz", "sunny tomorrow"], ["w", "m"]
    query_y = torch.tensor([0, 1, 0])
    accs, bow_accs = sentence_similarity.few_shot_1nn(model, tok, pool, labels, queries, query_y,
                                       2, seeds=[0, 1])  # fmt: skip
    query_emb = bert.sentence_embeddings(model, tok, queries)
    for i, seed in enumerate([0, 1]):  # chapter 11's former inline loop
        rng = random.Random(seed)
        shots = [
            q for y in labels for q in rng.sample([p for p in pool if p[1] == y], 2)
        ]
        shot_y = torch.tensor([labels.index(y) for _, y in shots])
        shot_emb = bert.sentence_embeddings(model, tok, [q for q, _ in shots])
        pred = shot_y[(query_emb @ shot_emb.T).argmax(dim=1)]
        assert accs[i] == (pred == query_y).float().mean()
        bags = sentence_similarity.bag_of_words(queries + [q for q, _ in shots])
        pred = shot_y[(bags[:3] @ bags[3:].T).argmax(dim=1)]
        assert bow_accs[i] == (pred == query_y).float().mean()
    assert accs.shape == (2,) and accs.min() > 0.5
