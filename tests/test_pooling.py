"""transformer_book.pooling: where a [CLS] model reads (against the chapter's old
inline reading) and the [CLS]-against-mean verdicts over seeds."""

import pytest
import torch

from test_classifiers import make_config  # the same small sizes
from test_slot_features import tiny_split  # the same four queries
from transformer_book import pooling, report, slot_features
from transformer_book.classifiers import SentenceClassifier


def test_cls_attention_shares_are_the_chapters_reading():
    import statistics
    from collections import defaultdict

    train = tiny_split()
    atis = slot_features.SlotIntentFeatures.from_split(train)
    torch.manual_seed(0)
    model = SentenceClassifier(
        make_config(vocab_size=len(atis.words), positions="relative")
    ).eval()
    mean, frequent, matched = pooling.cls_attention_shares(
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
    most, least = pooling.read_by_every(per_seed, k=5)
    assert most == ["a", "b"]  # means 1.3 and 1.3: a first, as seen
    assert least == ["c"]  # d and e cross 1
    assert pooling.read_by_every(per_seed, k=1) == (["a"], ["c"])


def test_kind_shares_read_one_table_over_the_seeds():
    matched = {"O": 1, "city": 2, "slot": 3}
    seeds = [({"O": 1.2, "city": 0.5, "slot": 0.9}, {}, matched),
             ({"O": 1.1, "city": 0.6, "slot": 1.0}, {}, matched),
             ({"O": 1.0, "city": 0.4, "slot": 0.8}, {}, matched)]  # fmt: skip
    per_kind, texts, cities = pooling.kind_shares(seeds, 0)
    assert per_kind == {"O": [1.2, 1.1, 1.0], "city": [0.5, 0.6, 0.4],
                        "slot": [0.9, 1.0, 0.8]}  # fmt: skip
    assert texts["O"] == "1.10 (1.00–1.20)"
    assert cities == report.compare_seeds([0.9, 1.0, 0.8], [0.5, 0.6, 0.4], pairs=True)
    assert pooling.kind_shares(seeds, 2)[0]["slot"] == [3, 3, 3]
    with pytest.raises(ValueError, match="table must be 0 or 2"):
        pooling.kind_shares(seeds, 1)


def test_verdicts_follow_the_seeds():
    cls, mean = [0.90, 0.91, 0.92], [0.85, 0.86, 0.87]  # 5 points apart on every seed
    assert pooling.pooling_verdict(cls, mean).startswith("[CLS] pooling is ahead")
    assert pooling.pooling_verdict(mean, cls).startswith("mean pooling is ahead")
    mixed = [0.86, 0.91, 0.84]
    assert pooling.pooling_verdict(mixed, mean) == report.compare_seeds(
        mean, mixed, pairs=True
    )
    found = pooling.pooling_conclusion(cls, mean, 1000)
    assert abs(found.gap - 0.05) < 1e-9
    assert found.ranges == pytest.approx([0.02, 0.02])
    assert found.gap_vs_seeds == "larger than the spread of either pooling's seeds"
    assert (
        found.conclusion
        == "the ranking holds for these 3 seeds, by 50 of the 1000 test queries"
    )
    assert found.selective.startswith("put [CLS] pooling ahead")
    tied = pooling.pooling_conclusion(mixed, mean, 1000)
    assert tied.conclusion.startswith("3 seeds cannot tell the two poolings apart")
    assert tied.selective == "did not make [CLS] pooling measurably more accurate here"
