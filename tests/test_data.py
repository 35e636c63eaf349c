"""The named datasets, read: ATIS, SNIPS, Tiny Shakespeare, SST-2 and rt-polarity from
``$TRANSFORMER_BOOK_DATA`` (CI sets it; skipped only where it is unset), the fixed
review split, the overlap rule, and few labels drawn apart from their selection split
by word runs. Fetching and checking the files is ``tests/test_data_files.py``.
"""

import os

import pytest

from transformer_book import data, data_files

REAL_DATA = os.environ.get(data_files.DATA_ENV)
needs_real_data = pytest.mark.skipif(
    not REAL_DATA, reason=f"${data_files.DATA_ENV} is not set"
)


def no_download(url, dest):
    raise AssertionError(f"unexpected download of {url}")


@pytest.fixture
def real(tmp_path, monkeypatch):
    monkeypatch.setenv(
        data_files.CACHE_ENV, str(tmp_path / "cache")
    )  # anything not found locally would land here
    monkeypatch.setattr(data_files, "_download", no_download)


def test_unknown_split():
    with pytest.raises(ValueError, match="split must be"):
        data.load_atis("validation")
    with pytest.raises(ValueError, match="split must be"):
        data.load_sst2("test")


@needs_real_data
def test_load_atis_from_the_data_folder(real):
    train, test = data.load_atis("train"), data.load_atis("test")
    assert (len(train), len(data.load_atis("dev")), len(test)) == (4478, 500, 893)
    assert all(len(w) == len(t) for w, t in zip(train.sentences, train.tags))
    assert (
        train.sentences[0][:4] == ["i", "want", "to", "fly"]
        and train.intents[0] == "atis_flight"
    )
    assert {t[:2] for tags in train.tags for t in tags} == {"O", "B-", "I-"}
    assert sum("#" in x for x in train.intents) == 23  # multi-intent labels kept whole
    assert (
        sum(x not in set(train.intents) for x in test.intents) == 5
    )  # intents unseen in training


@needs_real_data
def test_other_loaders_from_the_data_folder(real):
    snips = data.load_snips("test")
    assert len(snips) == 700 and all(
        len(w) == len(t) for w, t in zip(snips.sentences, snips.tags)
    )
    assert len(data.load_tinyshakespeare()) == 1115394
    texts, labels = data.load_sst2("dev")
    assert (
        len(texts) == 872
        and set(labels) == {0, 1}
        and texts[0].startswith("it 's a charming")
    )
    assert len(data.load_sst2("train")[0]) == 67349
    texts, labels = data.load_rt_polarity()
    assert len(texts) == 10662 and labels.count(0) == labels.count(1) == 5331


def test_review_split_is_disjoint_and_fixed():
    split = data.review_split()
    sizes = {k: len(v[0]) for k, v in split.items()}
    assert sizes == {"train": 8662, "test": 1000, "dev": 1000}
    assert all(len(texts) == len(labels) for texts, labels in split.values())
    train, dev, test = (set(split[k][0]) for k in ("train", "dev", "test"))
    assert not train & test and not train & dev and not dev & test  # no review twice
    assert data.review_split()["test"] == split["test"]
    assert 400 < sum(split["test"][1]) < 600  # both labels in the test part


def test_without_overlap_compares_letters_and_digits():
    kept = data.without_overlap(
        ["It's a gem. Really.", "dull", "a -LRB- small -RRB- film"], ["it 's a gem ."]
    )
    assert kept == ["dull", "a -LRB- small -RRB- film"]


def test_few_labels_are_disjoint_long_enough_and_seeded():
    texts = [" ".join(["w"] * (i % 9 + 1)) + f" {i}" for i in range(200)]
    labels = [i % 2 for i in range(200)]
    (tr, y_tr), (sel, y_sel) = data.few_labels(
        texts, labels, 20, 30, min_words=6, ngram=0
    )
    assert len(tr) == len(y_tr) == 20 and len(sel) == len(y_sel) == 30
    assert not set(tr) & set(sel) and all(len(t.split()) >= 6 for t in tr + sel)
    assert all(labels[texts.index(t)] == y for t, y in zip(tr + sel, y_tr + y_sel))
    again = data.few_labels(texts, labels, 20, 30, min_words=6, ngram=0)
    assert again[0][0] == tr
    other = data.few_labels(texts, labels, 20, 30, min_words=6, seed=1, ngram=0)
    assert other[0][0] != tr
    with pytest.raises(ValueError, match="n=90 and n_select=30 need"):
        data.few_labels(texts, labels, 90, 30, min_words=6)
    # every text here shares the run "w w w w" with the others: none may be selected
    with pytest.raises(ValueError, match="only 0 texts of at least 6 words share no 4"):
        data.few_labels(texts, labels, 20, 30, min_words=6)


def test_few_labels_keep_selection_texts_apart_from_training_texts():
    words = [f"v{i}" for i in range(400)]
    texts = [" ".join(words[i : i + 6]) for i in range(0, 394, 2)]  # overlapping runs
    labels = [i % 2 for i in range(len(texts))]
    (tr, _), (sel, _) = data.few_labels(texts, labels, 10, 20, ngram=4)
    runs = {tuple(t.split()[i : i + 4]) for t in tr for i in range(3)}
    assert all(not {tuple(t.split()[i : i + 4]) for i in range(3)} & runs for t in sel)
    longer = [" ".join(words[i : i + 9]) for i in range(0, 300, 30)]  # 10 of 9 words
    (_, _), (sel, _) = data.few_labels(
        texts + longer, labels + [0] * 10, 5, 3, ngram=0, select_min_words=9
    )
    assert all(len(t.split()) == 9 for t in sel)


def test_word_ngrams_are_the_runs_of_n_words():
    assert data.word_ngrams("A b c d", 3) == {("a", "b", "c"), ("b", "c", "d")}
    assert data.word_ngrams("a b", 3) == set()  # shorter than n: no run
