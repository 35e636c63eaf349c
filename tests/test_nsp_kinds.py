"""nsp_kinds: chapter 11's corpus of three kinds of text, the committed NSP runs read
back, their tables and words."""

import pytest

from transformer_book import data, nsp_kinds


def test_kinds_corpus_draws_each_kind_from_its_own_split():
    corpus = nsp_kinds.kinds_corpus(50, 20, seed=1)
    assert list(corpus) == ["train", "dev", "test"]
    for split, n in (("train", 50), ("dev", 20), ("test", 20)):
        assert list(corpus[split]) == list(nsp_kinds.TEXT_KINDS)
        for texts in corpus[split].values():
            assert len(texts) == n == len(set(texts))
    reviews = data.review_split(seed=0)
    assert set(corpus["test"]["reviews"]) <= set(reviews["test"][0])
    assert any("flight" in t for t in corpus["train"]["flights"])
    assert corpus == nsp_kinds.kinds_corpus(50, 20, seed=1)
    with pytest.raises(ValueError, match="flights dev holds 500 texts"):
        nsp_kinds.kinds_corpus(50, 600)


def test_nsp_kinds_summary_chooses_on_dev_and_reads_test_at_the_choice():
    def run(steps, seed, dev, test, kind, negatives="any"):
        natural = {"nsp_accuracy": test, "is_next_share": 0.5, "mlm_loss": 5.0,
                   "unigram_mlm_loss": 6.0}  # fmt: skip
        return {
            "negatives": negatives, "steps": steps, "seed": seed,
            "dev": {"natural": {**natural, "nsp_accuracy": dev}},
            "test": {"natural": natural, "kind": kind, "coherence": 0.5,
                     "auc": {"same kind": 0.6, "other kind": 0.9}},
        }  # fmt: skip

    result = {"runs": [run(100, 0, 0.55, 0.9, 0.6), run(100, 1, 0.57, 0.9, 0.6),
                       run(200, 0, 0.60, 0.7, 0.8), run(200, 1, 0.62, 0.72, 0.9),
                       run(200, 0, 0.9, 0.9, 0.4, "same kind")]}  # fmt: skip
    summary = nsp_kinds.nsp_kinds_summary(result)
    assert summary["chosen"] == 200  # dev decides, though test is higher at 100
    assert summary["test_nsp"][200] == [0.7, 0.72]
    assert summary["kind"][200] == [0.8, 0.9] and summary["seeds"] == [0, 1]
    assert summary["coherence_auc"][100] == [0.6, 0.6]
    assert summary["control_kind"] == {200: [0.4]}  # the control never chooses
    assert summary["control_test_nsp"] == {200: [0.9]}
    assert summary["gap_at_chosen"] == pytest.approx([0.3, 0.4])
    assert summary["mlm_margin_at_chosen"] == [1.0, 1.0]
    assert summary["dev_nsp"] == {100: [0.55, 0.57], 200: [0.60, 0.62]}
    with pytest.raises(ValueError, match="no runs with negatives from any text"):
        nsp_kinds.nsp_kinds_summary({"runs": []})


def test_kinds_lines_count_words_and_full_stops():
    lines = nsp_kinds.kinds_lines({"a": ["one two .", "three"], "b": ["x y z w"]})
    assert lines == [
        "        a:  2.0 words a text;  50% end in a full stop",  # "." is a word
        "        b:  4.0 words a text;   0% end in a full stop",
    ]


def test_nsp_kinds_table_and_words_read_the_summary():
    def run(negatives, steps, seed, value):
        scores = {"natural": {"nsp_accuracy": value, "is_next_share": 0.5,
                              "mlm_loss": 5.0, "unigram_mlm_loss": 6.0},
                  "kind": value, "coherence": 0.5,
                  "auc": {"same kind": value / 2, "other kind": value}}  # fmt: skip
        return {"negatives": negatives, "steps": steps, "seed": seed,
                "cpu_seconds": 30.0, "dev": scores, "test": scores}  # fmt: skip

    result = {"runs": [run(n, 100, s, v) for n, v in (("any", 0.8), ("same kind", 0.5))
                       for s in (0, 1)]}  # fmt: skip
    summary = nsp_kinds.nsp_kinds_summary(result)
    table = nsp_kinds.nsp_kinds_table(summary).splitlines()
    assert len(table) == 7  # two headings, two column lines, two rows, the choice
    assert table[2].startswith("  100 | 0.800 ± 0.000")
    assert table[-1].startswith("  100 | 0.500 ± 0.000")
    words = nsp_kinds.nsp_kinds_words(summary, result)
    assert words["nsp_cpu"] == "2" and words["nsp_steps"] == "100"  # 4 runs of 30 s
    assert words["nsp_auc_diff"] == "+0.150"  # 0.40 against the control's 0.25
    assert words["nsp_control_nsp"] == "0.500 ± 0.000"
