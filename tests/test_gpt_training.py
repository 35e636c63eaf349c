"""gpt_training: a run's files and logs, a resumed run equal to an uninterrupted one,
the same loss curve under torchrun with two gloo processes as on one process with twice
the batch, the recipes and the config's checks, TF32 set for a run and restored."""

import json
import logging
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from transformer_book import gpt_training

TINY = gpt_training.TrainConfig(d_model=32, n_layers=1, n_heads=2, context=16,
                                warmup=2, lr=3e-3, threads=1)  # fmt: skip


def history(folder: Path) -> dict:
    return json.loads((folder / "history.json").read_text())


def test_a_run_writes_config_checkpoint_and_history(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="transformer_book.gpt_training")
    out = tmp_path / "run"
    config = replace(TINY, steps=6, batch_size=4, log_every=2, eval_every=3)
    result = gpt_training.run(config, out=out)
    for name in ("config.json", "model.safetensors", "trainer.pt", "history.json"):
        assert (out / name).is_file(), name
    h = history(out)
    assert h["history"] == result["history"] and h["world_size"] == 1
    assert h["threads"] == 1  # the config's one thread, recorded with the clock
    assert len(h["history"]) == 6 and [s for s, _ in h["evals"]] == [3, 6]
    assert h["val_loss"] == pytest.approx(h["evals"][-1][1])
    assert h["val_loss"] < 4.17  # ln 65: better than a uniform guess
    # each half of the held-out text alone: the two halves average to about the whole
    first, second = h["val_loss_halves"]
    assert first != second and (first + second) / 2 == pytest.approx(
        h["val_loss"], abs=0.05
    )
    saved = json.loads((out / "config.json").read_text())
    assert saved["d_model"] == 32 and saved["steps"] == 6
    assert isinstance(result["model"], torch.nn.Module)
    logged = caplog.text
    assert "step 2/6 | train loss" in logged and "held-out loss" in logged


def test_resumed_run_equals_an_uninterrupted_one(tmp_path):
    config = replace(TINY, steps=8, batch_size=4, log_every=0)
    full = gpt_training.run(config, out=tmp_path / "full")
    cut = gpt_training.run(config, out=tmp_path / "cut", stop_at=3)
    assert len(cut["history"]) == 3 and "val_loss" not in cut
    cut = gpt_training.run(config, out=tmp_path / "cut", resume=True)
    torch.testing.assert_close(
        torch.tensor(cut["history"]), torch.tensor(full["history"]), atol=1e-6, rtol=0
    )
    assert cut["val_loss"] == pytest.approx(full["val_loss"], abs=1e-6)


@pytest.mark.distributed
def test_torchrun_two_processes_equal_one_with_twice_the_batch(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(Path(gpt_training.__file__).parents[1])}
    tiny = ["--d_model", "32", "--n_layers", "1", "--n_heads", "2", "--context", "16",
            "--warmup", "2", "--lr", "3e-3", "--threads", "1"]  # fmt: skip
    base = ["gpt", *tiny, "--steps", "10", "--log_every", "0"]
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    for n, batch in ((1, 8), (2, 4)):
        cmd = [*torchrun, f"--nproc_per_node={n}", "-m", "transformer_book.train",
               *base, "--batch_size", str(batch), "--out", str(tmp_path / str(n))]  # fmt: skip
        subprocess.run(cmd, check=True, env=env, timeout=600, capture_output=True)
    one, two = history(tmp_path / "1"), history(tmp_path / "2")
    assert two["world_size"] == 2 and len(two["history"]) == 10
    torch.testing.assert_close(
        torch.tensor(two["history"]), torch.tensor(one["history"]), atol=1e-5, rtol=0
    )
    assert two["val_loss"] == pytest.approx(one["val_loss"], abs=1e-5)


def test_recipes_and_the_model_they_train():
    assert gpt_training.RECIPES["nanogpt-cpu"] == gpt_training.TrainConfig()
    quick = gpt_training.RECIPES["book-quick"]
    model = gpt_training.model_config(quick, vocab_size=65)
    assert (model.vocab_size, model.max_len, model.d_model) == (65, 64, 64)
    assert (model.positions, model.activation) == ("rope", "relu")


def test_config_is_checked():
    with pytest.raises(ValueError, match="precision must be one of"):
        gpt_training.TrainConfig(precision="fp8")
    with pytest.raises(ValueError, match="steps must be >= 1, got 0"):
        gpt_training.TrainConfig(steps=0)


def test_tf32_is_set_for_the_run_and_restored_after():
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    with gpt_training.tf32_matmuls(torch.device("cuda"), not before[0]):
        assert torch.backends.cuda.matmul.allow_tf32 == (not before[0])
        assert torch.backends.cudnn.allow_tf32 == (not before[0])
    assert (
        torch.backends.cuda.matmul.allow_tf32,
        torch.backends.cudnn.allow_tf32,
    ) == before
    with gpt_training.tf32_matmuls(torch.device("cpu"), not before[0]):  # untouched
        assert torch.backends.cuda.matmul.allow_tf32 == before[0]


def test_recipe_changes_lists_only_the_differing_settings():
    nano, quick = (
        gpt_training.RECIPES["nanogpt-cpu"],
        gpt_training.RECIPES["book-quick"],
    )
    changes = gpt_training.recipe_changes(nano, quick)
    assert changes["d_model"] == (128, 64) and changes["positions"] == (
        "learned",
        "rope",
    )
    assert "n_layers" not in changes and gpt_training.recipe_changes(nano, nano) == {}
