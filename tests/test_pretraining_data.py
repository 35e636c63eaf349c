"""pretraining_data: the corpora the bert and t5 families pre-train on, and T5's
held-out windows (dev for choices, test for reports)."""

import pytest
import torch

from transformer_book import baselines, pretraining_data, report, t5


def test_t5_dev_windows_are_not_the_test_windows():
    atis = pretraining_data.atis_words()
    dev = pretraining_data.t5_heldout(atis, 16, n_batches=2, batch_size=4, split="dev")
    test = pretraining_data.t5_heldout(atis, 16, n_batches=2, batch_size=4)
    assert len(dev) == 2 and all(len(s) == 4 for s, _ in dev)
    assert len(atis.dev) > 5000  # ATIS's 500 dev queries, about 11 words each
    assert not torch.equal(dev[0][0], test[0][0])
    with pytest.raises(ValueError, match="'train'"):
        pretraining_data.t5_heldout(atis, 16, split="train")


def test_t5_bigram_k_is_chosen_on_dev_and_scored_beside_add_one():
    atis = pretraining_data.atis_words()
    k, by_k = pretraining_data.t5_bigram_k(atis, 16)
    dev = pretraining_data.t5_heldout(atis, 16, split="dev")
    left, hidden = pretraining_data.left_pairs(atis, dev)
    assert (
        by_k == baselines.choose_bigram_k(atis.train, len(atis.words), left, hidden)[1]
    )
    assert (
        k == min(by_k, key=by_k.get) and by_k[k] < by_k[1.0] - 0.3
    )  # add-one: too smooth
    config = t5.T5Config(len(atis.words), 16, 1, 2, 32, pad_id=0, eos_id=atis.eos)
    model = t5.T5(config)  # untrained: the baselines do not depend on the model
    test = pretraining_data.t5_heldout(atis, 16, n_batches=2, batch_size=8)
    plain = pretraining_data.t5_scores(model, atis, test)
    tuned = pretraining_data.t5_scores(model, atis, test, k)
    assert "tuned_bigram_nats" not in plain and tuned["tuned_bigram_k"] == k
    assert {key: tuned[key] for key in plain} == plain  # add-one numbers kept
    bigram = baselines.bigram_log_probs(atis.train, len(atis.words), k)
    t_left, t_hidden = pretraining_data.left_pairs(atis, test)
    assert len(t_hidden) == plain["hidden_words"]
    assert tuned["tuned_bigram_nats"] == baselines.bigram_loss(bigram, t_left, t_hidden)
    assert tuned["tuned_bigram_nats"] < plain["bigram_nats"]


def test_bias_sweep_summary_groups_the_seeds_and_counts_the_jumps():
    runs = [{"scale": s, "seed": i, "dev_nats": n}
            for s, nats in ((1.0, [3.90, 3.95, 3.92]), (30.0, [3.70, 3.88, 3.60]))
            for i, n in enumerate(nats)]  # fmt: skip
    summary = pretraining_data.bias_sweep_summary({"scales": [1.0, 30.0], "runs": runs},
                                                  jump=0.1)  # fmt: skip
    assert summary["by_scale"] == {1.0: [3.90, 3.95, 3.92], 30.0: [3.70, 3.88, 3.60]}
    assert summary["best_at_one"] == 3.90
    assert summary["below"] == {1.0: 0, 30.0: 2}  # 3.70 and 3.60 are below 3.80
    assert summary["per_seed"][30.0] == "3.60, 3.70, 3.88"
    with pytest.raises(ValueError, match="common rate"):
        pretraining_data.bias_sweep_summary({"scales": [30.0], "runs": runs}, 0.1)


def test_city_gaps_are_cities_after_from_or_to_and_named_in_their_window():
    atis = pretraining_data.atis_words()
    held_out = pretraining_data.t5_heldout(atis, 64, n_batches=2, batch_size=8)
    gap, named, row = pretraining_data.city_gaps(atis, held_out)
    left, hidden = pretraining_data.left_pairs(atis, held_out)
    assert len(gap) == len(named) == len(row) == len(hidden)
    words, cities = atis.words, pretraining_data.city_words(atis.words)
    assert {"boston", "denver"} <= set(cities)
    for i in range(len(hidden)):  # the chapter's old inline code, word by word
        after = words.itos[left[i]] in ("from", "to")
        assert bool(gap[i]) == (after and words.itos[hidden[i]] in cities)
    src = torch.cat([s for s, _ in held_out])
    tgt = torch.cat([t for _, t in held_out])
    is_word = (tgt != atis.eos) & (tgt < atis.sentinels[0])
    assert torch.equal(row, is_word.nonzero()[:, 0])  # the window of each hidden word
    assert torch.equal(named, torch.tensor([int(h) in src[r].tolist()
                                            for h, r in zip(hidden, row)]))  # fmt: skip
    assert gap.any() and named[gap].any()


def test_gap_scores_score_the_selected_words():
    truth = torch.tensor([1, 2, 3, 4])
    pred = torch.tensor([1, 0, 3, 0])
    logp = torch.tensor([-0.5, -2.0, -1.0, -3.0])
    where = torch.tensor([True, True, True, False])
    acc, nats = pretraining_data.gap_scores(truth, pred, logp, where)
    assert acc == pytest.approx(2 / 3) and nats == pytest.approx(3.5 / 3)
    with pytest.raises(ValueError, match="no hidden word"):
        pretraining_data.gap_scores(truth, pred, logp, torch.zeros(4, dtype=torch.bool))


def test_score_table_lines_up_the_rows_and_the_cards_columns():
    rows = {"the book's T5": (0.479, 2.364), "unigram": (0.1, 4.94)}
    table = pretraining_data.score_table(rows, [(0.48, 2.36), None]).splitlines()
    assert len(table) == 3 and "card" in table[0]
    assert table[1].split()[-4:] == ["0.479", "2.36", "0.480", "2.36"]
    assert table[2].split() == ["unigram", "0.100", "4.94"]  # nothing on the card
    assert table[1].index("0.479") + 5 == table[0].index("accuracy") + 8  # aligned
    assert "card" not in pretraining_data.score_table(rows)
    with pytest.raises(ValueError, match="one entry per row"):
        pretraining_data.score_table(rows, [None])


def test_bias_sweep_words_quote_the_sweep_as_the_chapter_did():
    runs = [{"scale": s, "seed": i, "dev_nats": n}
            for s, nats in ((1, [3.90, 3.95, 3.92]), (30, [3.70, 3.88, 3.60]))
            for i, n in enumerate(nats)]  # fmt: skip
    result = {"scales": [1, 30], "runs": runs, "chosen": 30,
              "baselines": {"bigram_nats": 3.456}}  # fmt: skip
    words = pretraining_data.bias_sweep_words(result, jump=0.1)
    assert words == {  # the chapter's old inline glue, formatted the same way
        "scale_one": report.mean_spread([3.90, 3.95, 3.92], "{:.2f}"),
        "scale_best": report.mean_spread([3.70, 3.88, 3.60], "{:.2f}"),
        "scale_chosen": "30",
        "scale_seeds": "3",
        "scale_below": "2 of 3",
        "best_at_one": "3.90",
        "dev_bigram": "3.46",
    }


def test_baseline_words_are_percent_and_nats():
    scores = {"unigram_nats": 4.9412, "most_frequent_accuracy": 0.0843,
              "bigram_accuracy": 0.3001, "bigram_nats": 3.7649,
              "tuned_bigram_accuracy": 0.3456, "tuned_bigram_nats": 3.0711}  # fmt: skip
    assert pretraining_data.baseline_words(scores) == {
        "unigram_nats": "4.94", "top_acc": "8.4", "bigram_acc": "30.0",
        "bigram_nats": "3.76", "tuned_acc": "34.6", "tuned_nats": "3.07",
    }  # fmt: skip


def test_baseline_rows_name_the_three_baselines():
    scores = {"most_frequent_accuracy": 0.08, "unigram_nats": 4.9,
              "bigram_accuracy": 0.3, "bigram_nats": 3.8, "tuned_bigram_k": 0.03,
              "tuned_bigram_accuracy": 0.35, "tuned_bigram_nats": 3.1}  # fmt: skip
    assert pretraining_data.baseline_rows(scores, "flights") == {
        "unigram (always 'flights')": (0.08, 4.9),
        "left bigram, add-one": (0.3, 3.8),
        "left bigram, k = 0.03 (dev)": (0.35, 3.1),
    }
