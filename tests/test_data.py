"""The named datasets, read: ATIS, SNIPS, Tiny Shakespeare, SST-2 and rt-polarity from
``$TRANSFORMER_BOOK_DATA`` (CI sets it; skipped only where it is unset), the fixed
review split and the overlap rule. Fetching and checking the files is
``tests/test_data_files.py``.
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
