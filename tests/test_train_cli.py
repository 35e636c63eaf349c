"""python -m transformer_book.train: a recipe, then a JSON file, then options; a gpt
run stopped and resumed through its flags (the run itself: test_gpt_training.py); bert
and t5 runs writing book checkpoints, stopped and resumed as if never stopped."""

import dataclasses
import json
import logging
from pathlib import Path

import pytest
import torch

from transformer_book import gpt_training, train

TINY = ["--d_model", "32", "--n_layers", "1", "--n_heads", "2", "--context", "16",
        "--warmup", "2", "--lr", "3e-3", "--threads", "1"]  # fmt: skip


def history(folder: Path) -> dict:
    return json.loads((folder / "history.json").read_text())


def test_a_gpt_run_stopped_then_resumed_from_the_command_line(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="transformer_book")
    out = tmp_path / "run"
    argv = ["gpt", *TINY, "--steps", "6", "--batch_size", "4", "--log_every", "2",
            "--eval_every", "3", "--out", str(out)]  # fmt: skip
    assert train.main([*argv, "--stop_at", "3"]) == 0
    assert len(history(out)["history"]) == 3
    assert train.main([*argv, "--resume"]) == 0
    for name in ("config.json", "model.safetensors", "trainer.pt", "history.json"):
        assert (out / name).is_file(), name
    h = history(out)
    assert len(h["history"]) == 6 and [s for s, _ in h["evals"]] == [6]
    config = json.loads((out / "config.json").read_text())
    assert config["d_model"] == 32 and config["steps"] == 6
    logged = caplog.text
    assert "config: TrainConfig(" in logged and "step 6/6 | train loss" in logged


def test_recipe_then_config_file_then_options(tmp_path):
    (tmp_path / "c.json").write_text(json.dumps({"lr": 5e-4, "steps": 7}))
    config, _ = train._parse(["gpt", "--recipe", "nanogpt-cpu",
                              "--config", str(tmp_path / "c.json"), "--steps", "9"])  # fmt: skip
    assert (config.lr, config.steps, config.batch_size) == (5e-4, 9, 12)
    assert train._parse(["gpt"])[0] == gpt_training.RECIPES["book-quick"]
    assert train._parse(["gpt", "--tie_embeddings", "false"])[0].tie_embeddings is False
    config, _ = train._parse(["gpt", "--precision", "bf16", "--compile", "true"])
    assert (config.precision, config.compile) == ("bf16", True)
    with pytest.raises(SystemExit):
        train._parse(["gpt", "--recipe", "nope"])
    with pytest.raises(SystemExit, match="--resume needs --out"):
        train.main(["gpt", "--resume"])


@pytest.mark.parametrize("family", ["bert", "t5"])
def test_encoder_families_write_a_book_checkpoint_and_resume(family, tmp_path):
    from transformer_book import checkpoints

    config, _ = train._parse([family, "--recipe", "tiny", "--steps", "4"])
    assert isinstance(config, train.FAMILIES[family][0]) and config.steps == 4
    argv = [family, "--recipe", "tiny", "--steps", "4", "--dropout", "0.1"]
    straight, stopped = tmp_path / "straight", tmp_path / "stopped"
    assert train.main([*argv, "--out", str(straight)]) == 0
    model, card = checkpoints.load(straight)
    assert card["recipe"]["steps"] == 4 and set(card["files"]) == {"vocab.txt"}
    vocab = (straight / "vocab.txt").read_text().split("\n")[:-1]
    assert model.config.vocab_size == len(vocab)
    h = history(straight)
    assert len(h["history"]) == 4 and h["heldout"]
    # stopped after 2 steps (dropout on: the random state must come back too), resumed
    assert train.main([*argv, "--out", str(stopped), "--stop_at", "2"]) == 0
    assert not (stopped / "history.json").exists()
    assert (stopped / "training" / "trainer.pt").is_file()
    assert train.main([*argv, "--out", str(stopped), "--resume"]) == 0
    again = history(stopped)
    for key in ("history", "mlm_history", "nsp_history"):  # t5 has the first only
        assert again.get(key) == h.get(key), key
    assert again["heldout"] == h["heldout"]
    resumed, _ = checkpoints.load(stopped)
    for (name, a), b in zip(model.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(a, b), name


def test_t5_defaults_to_the_shipped_recipe_and_parses_scale_steps():
    config, _ = train._parse(["t5"])
    assert config == train.T5_RECIPES["atis-scaled"] and config.scale_steps
    old, _ = train._parse(["t5", "--recipe", "atis-small"])
    assert not old.scale_steps  # the first checkpoint's recipe: equal steps
    assert dataclasses.replace(config, scale_steps=False) == old  # only that differs
    config, _ = train._parse(["t5", "--recipe", "tiny", "--scale_steps", "true"])
    assert config.scale_steps and config.d_model == 64
