"""Several processes under torchrun: each draws its own batches, rank 0 what a single
process draws."""

from transformer_book import distributed


def test_each_process_draws_its_own_batches_rank_0_as_one_process(monkeypatch):
    assert distributed.process_seed(7) == 7  # one process
    monkeypatch.setattr(distributed, "world", lambda: (0, 2))
    assert distributed.process_seed(7) == 7  # rank 0 of two: what one process draws
    monkeypatch.setattr(distributed, "world", lambda: (1, 2))
    assert distributed.process_seed(7) == 8
