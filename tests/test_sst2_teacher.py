"""Chapter 13's data and teacher: the transfer set keeps the evaluation texts out, the
SST-2 splits keep the teacher's phrases apart, and the teacher trains only its top
layers and head."""

from __future__ import annotations

import os

import pytest
import torch

from transformer_book import data, data_files, minilm_weights, sst2_teacher

needs_real_data = pytest.mark.skipif(
    not os.environ.get(data_files.DATA_ENV), reason=f"${data_files.DATA_ENV} is not set"
)


def test_transfer_set_excludes_the_evaluation_texts():
    texts = [
        "a very good film about a very bad man",  # shares "a very bad man"
        "the plot is thin but the acting is fine",
        "the plot is thin but the acting is fine",  # a duplicate
        "too short to use",  # under 6 words
        "one of the best films of the year so far",  # shares "the best films of"
        "The Best Films Of The Year",  # an excluded text, other case
        "an honest and moving portrait of a family",
    ]
    exclude = ["he plays a very bad man", "the best films of the year"]
    pool = sst2_teacher.transfer_set(texts, exclude, 2, seed=0)
    assert sorted(pool) == [
        "an honest and moving portrait of a family",
        "the plot is thin but the acting is fine",
    ]
    assert pool == sst2_teacher.transfer_set(texts, exclude, 2, seed=0)  # seeded
    assert len(sst2_teacher.transfer_set(texts, [], 5, seed=1)) == 5
    with pytest.raises(ValueError, match="only 2 texts"):
        sst2_teacher.transfer_set(texts, exclude, 3, seed=0)


@needs_real_data
def test_sst2_splits_keep_the_teacher_apart():
    sp = sst2_teacher.sst2_splits(n_train=64, n_dev=32, n_test=48, n_transfer=200)
    assert [len(sp.train[0]), len(sp.dev[0]), len(sp.test[0])] == [64, 32, 48]
    assert len(sp.transfer) == 200 and len(sp.teacher[0]) > 40_000
    held = sp.dev[0] + sp.test[0] + sp.transfer
    runs = set().union(*(data.word_ngrams(t, 4) for t in held))
    assert not any(data.word_ngrams(t, 4) & runs for t in sp.teacher[0])
    assert not {t.lower() for t in sp.teacher[0]} & {t.lower() for t in held}
    assert set(sp.train[0]).isdisjoint(sp.transfer)
    assert set(sp.teacher[1]) == {0, 1} and len(sp.teacher[0]) == len(sp.teacher[1])
    with pytest.raises(ValueError, match="n_train=0"):
        sst2_teacher.sst2_splits(n_train=0)


def test_teacher_trains_only_its_top_layers_and_head():
    config = sst2_teacher.TeacherConfig(tuned_layers=1)
    tok = minilm_weights.pretrained_tokenizer()
    texts = ["a fine film", "dull and long", "a joy", "not worth it"] * 4
    labels = [1, 0, 1, 0] * 4
    teacher = sst2_teacher.train_teacher(texts, labels, tok, 2, 1e-3, config,
                                    batch_size=8, max_len=8, seed=3)  # fmt: skip
    assert teacher.tuned() == ["encoder.encoder.layers.5.", "classifier."]
    with torch.random.fork_rng():
        torch.manual_seed(3)  # train_teacher draws the head from its seed
        fresh = sst2_teacher.Teacher(config)
    base = fresh.state_dict()
    for name, value in teacher.state_dict().items():
        changed = not torch.equal(value, base[name])
        assert changed == name.startswith(tuple(teacher.tuned())), name
    assert all(p.requires_grad for p in teacher.parameters())  # thawed again
    assert not teacher.training
    with pytest.raises(ValueError, match="tuned_layers must be between 0 and 6"):
        sst2_teacher.Teacher(sst2_teacher.TeacherConfig(tuned_layers=7))
    with pytest.raises(ValueError, match="one label per text"):
        sst2_teacher.train_teacher(texts, labels[:3], tok, 1, 1e-3)
