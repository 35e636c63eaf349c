"""python -m transformer_book.train: a run from a recipe and options, its files, a
resumed run equal to an uninterrupted one, the same loss curve under torchrun with
two gloo processes as on one process with twice the batch, and T5's dev windows."""

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from transformer_book import pretraining_data, train

TINY = ["--d_model", "32", "--n_layers", "1", "--n_heads", "2", "--context", "16",
        "--warmup", "2", "--lr", "3e-3", "--threads", "1"]  # fmt: skip


def history(folder: Path) -> dict:
    return json.loads((folder / "history.json").read_text())


def test_a_run_writes_config_checkpoint_and_history(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="transformer_book.train")
    out = tmp_path / "run"
    argv = ["gpt", *TINY, "--steps", "6", "--batch_size", "4", "--log_every", "2",
            "--eval_every", "3", "--out", str(out)]  # fmt: skip
    assert train.main(argv) == 0
    for name in ("config.json", "model.safetensors", "trainer.pt", "history.json"):
        assert (out / name).is_file(), name
    h = history(out)
    assert len(h["history"]) == 6 and [s for s, _ in h["evals"]] == [3, 6]
    assert h["val_loss"] == pytest.approx(h["evals"][-1][1])
    assert h["val_loss"] < 4.17  # ln 65: better than a uniform guess
    config = json.loads((out / "config.json").read_text())
    assert config["d_model"] == 32 and config["steps"] == 6
    logged = caplog.text
    assert "step 2/6 | train loss" in logged and "held-out loss" in logged


def test_recipe_then_config_file_then_options(tmp_path):
    (tmp_path / "c.json").write_text(json.dumps({"lr": 5e-4, "steps": 7}))
    config, _ = train._parse(["gpt", "--recipe", "nanogpt-cpu",
                              "--config", str(tmp_path / "c.json"), "--steps", "9"])  # fmt: skip
    assert (config.lr, config.steps, config.batch_size) == (5e-4, 9, 12)
    assert train.RECIPES["nanogpt-cpu"] == train.TrainConfig()
    assert train._parse(["gpt", "--tie_embeddings", "false"])[0].tie_embeddings is False
    with pytest.raises(SystemExit):
        train._parse(["gpt", "--recipe", "nope"])
    with pytest.raises(SystemExit, match="--resume needs --out"):
        train.main(["gpt", "--resume"])


def test_resumed_run_equals_an_uninterrupted_one(tmp_path):
    base = ["gpt", *TINY, "--steps", "8", "--batch_size", "4", "--log_every", "0"]
    train.main([*base, "--out", str(tmp_path / "full")])
    train.main([*base, "--out", str(tmp_path / "cut"), "--stop_at", "3"])
    assert len(history(tmp_path / "cut")["history"]) == 3
    train.main([*base, "--out", str(tmp_path / "cut"), "--resume"])
    full, cut = history(tmp_path / "full"), history(tmp_path / "cut")
    torch.testing.assert_close(
        torch.tensor(cut["history"]), torch.tensor(full["history"]), atol=1e-6, rtol=0
    )
    assert cut["val_loss"] == pytest.approx(full["val_loss"], abs=1e-6)


@pytest.mark.distributed
def test_torchrun_two_processes_equal_one_with_twice_the_batch(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(Path(train.__file__).parents[1])}
    base = ["gpt", *TINY, "--steps", "10", "--log_every", "0"]
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


def test_precision_is_checked_and_reaches_the_loop():
    with pytest.raises(ValueError, match="precision must be one of"):
        train.TrainConfig(precision="fp8")
    config, _ = train._parse(["gpt", "--precision", "bf16", "--compile", "true"])
    assert (config.precision, config.compile) == ("bf16", True)


@pytest.mark.parametrize("family", ["bert", "t5"])
def test_encoder_families_write_a_book_checkpoint(family, tmp_path):
    from transformer_book import checkpoints

    config, _ = train._parse([family, "--recipe", "tiny", "--steps", "3"])
    assert isinstance(config, train.FAMILIES[family][0]) and config.steps == 3
    assert train.main([family, "--recipe", "tiny", "--steps", "3",
                       "--out", str(tmp_path)]) == 0  # fmt: skip
    model, card = checkpoints.load(tmp_path)
    assert card["recipe"]["steps"] == 3 and set(card["files"]) == {"vocab.txt"}
    vocab = (tmp_path / "vocab.txt").read_text().split("\n")[:-1]
    assert model.config.vocab_size == len(vocab)
    h = history(tmp_path)
    assert len(h["history"]) == 3 and h["heldout"]
    with pytest.raises(SystemExit, match="gpt only"):
        train.main([family, "--recipe", "tiny", "--resume", "--out", str(tmp_path)])


def test_t5_dev_windows_are_not_the_test_windows():
    atis = pretraining_data.atis_words()
    dev = pretraining_data.t5_heldout(atis, 16, n_batches=2, batch_size=4, split="dev")
    test = pretraining_data.t5_heldout(atis, 16, n_batches=2, batch_size=4)
    assert len(dev) == 2 and all(len(s) == 4 for s, _ in dev)
    assert len(atis.dev) > 5000  # ATIS's 500 dev queries, about 11 words each
    assert not torch.equal(dev[0][0], test[0][0])
    with pytest.raises(ValueError, match="'train'"):
        pretraining_data.t5_heldout(atis, 16, split="train")


def test_tf32_is_set_for_the_run_and_restored_after():
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    with train.tf32_matmuls(torch.device("cuda"), not before[0]):
        assert torch.backends.cuda.matmul.allow_tf32 == (not before[0])
        assert torch.backends.cudnn.allow_tf32 == (not before[0])
    assert (
        torch.backends.cuda.matmul.allow_tf32,
        torch.backends.cudnn.allow_tf32,
    ) == before
    with train.tf32_matmuls(torch.device("cpu"), not before[0]):  # the CPU: untouched
        assert torch.backends.cuda.matmul.allow_tf32 == before[0]
