"""pretraining_data: the corpora the bert and t5 families pre-train on, and T5's
held-out windows (dev for choices, test for reports)."""

import pytest
import torch

from transformer_book import pretraining_data


def test_t5_dev_windows_are_not_the_test_windows():
    atis = pretraining_data.atis_words()
    dev = pretraining_data.t5_heldout(atis, 16, n_batches=2, batch_size=4, split="dev")
    test = pretraining_data.t5_heldout(atis, 16, n_batches=2, batch_size=4)
    assert len(dev) == 2 and all(len(s) == 4 for s, _ in dev)
    assert len(atis.dev) > 5000  # ATIS's 500 dev queries, about 11 words each
    assert not torch.equal(dev[0][0], test[0][0])
    with pytest.raises(ValueError, match="'train'"):
        pretraining_data.t5_heldout(atis, 16, split="train")
