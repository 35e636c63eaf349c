"""Train the book's shipped checkpoints, each from the recipe kept in this file.

    python scripts/train_checkpoints.py                       # every checkpoint
    python scripts/train_checkpoints.py shakespeare-char-gpt  # one of them
    make checkpoints                                          # the same, every one

A shipped checkpoint is a :class:`transformer_book.train.TrainConfig` (the recipe) and
what its card says about it. :func:`train_one` trains the recipe with
:func:`transformer_book.train.run` on Tiny Shakespeare (nanoGPT's split: the first 90 %
of the characters to train on, the last 10 % held out), scores the model and the
unigram and bigram baselines (fitted on the training split) on the *same* held-out
characters, and writes the weights (fp16) and the card with
:func:`transformer_book.checkpoints.save` to ``src/transformer_book/trained/NAME/``.
``tests/test_shipped_checkpoints.py`` checks a shipped checkpoint against its card.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import platform
import sys
import time
from pathlib import Path

import torch

from transformer_book import baselines, checkpoints, data, lm_data, train

#: the training losses a card keeps (the reproduction test re-runs this many steps)
LOGGED_STEPS = 50
#: the held-out characters are read in batches of this many windows (as train.run does)
EVAL_BATCH = 64
TRAIN_FRACTION = 0.9

#: name -> (recipe, what the card says the checkpoint is for)
SHIPPED: dict[str, tuple[train.TrainConfig, str]] = {
    # chapter 14's book-quick model (4 layers, width 64, 4 heads: GQA groups of 2 or 4,
    # RoPE) trained 2.5 times as long, to a held-out loss well below a bigram's; read
    # by chapter 9 for its KV cache and its MHA -> GQA/MQA conversion. About 3-6
    # CPU-minutes on one thread.
    "shakespeare-char-gpt": (
        dataclasses.replace(
            train.RECIPES["book-quick"],
            steps=2000,
            warmup=100,
            threads=1,
            log_every=500,
            device="cpu",
        ),  # fmt: skip
        "a character-level GPT of Tiny Shakespeare (chapter 9)",
    ),
}


def heldout_batches(
    config: train.TrainConfig,
) -> tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]], int]:
    """The training stream, the held-out windows a model is scored on (as
    :func:`transformer_book.train.run` scores it) and the vocabulary size."""
    text = data.load_tinyshakespeare()
    chars = lm_data.char_vocab(text)
    ids = torch.tensor(chars.encode(list(text)))  # (N,)
    train_ids, val_ids = lm_data.split_stream(ids, TRAIN_FRACTION)
    val = lm_data.sequential_windows(val_ids, config.context, EVAL_BATCH)
    return train_ids, val, len(chars)


def baseline_losses(
    train_ids: torch.Tensor, val: list[tuple[torch.Tensor, torch.Tensor]], vocab: int
) -> dict[str, float]:
    """The unigram's and the bigram's held-out loss (nats per character) on exactly the
    characters the model is scored on: every target of ``val``, the bigram reading the
    character before it."""
    left = torch.cat([x.flatten() for x, _ in val])
    targets = torch.cat([y.flatten() for _, y in val])
    uni = baselines.unigram_log_probs(train_ids, vocab)
    bi = baselines.bigram_log_probs(train_ids, vocab)
    return {
        "unigram": baselines.unigram_loss(uni, targets),
        "bigram": baselines.bigram_loss(bi, left, targets),
    }


def data_card(config: train.TrainConfig, val: list) -> dict:
    """What the card says about the data and its split."""
    spec = data.DATASETS["tinyshakespeare"].file("input.txt")
    return {
        "dataset": "tinyshakespeare",
        "file": spec.name,
        "sha256": list(spec.sha256),
        "split": f"characters: first {TRAIN_FRACTION:.0%} train, last "
        f"{1 - TRAIN_FRACTION:.0%} held out (lm_data.split_stream)",
        "heldout_scored": sum(y.numel() for _, y in val),
        "heldout_windows": f"lm_data.sequential_windows(context={config.context}, "
        f"batch_size={EVAL_BATCH})",
    }


def _machine() -> dict:
    try:
        from transformer_book import benchmark

        return benchmark.machine()
    except (ImportError, AttributeError):
        return {"platform": platform.platform(), "cpu": platform.processor()}


def train_one(name: str, root: Path = checkpoints.SHIPPED) -> dict:
    """Train the shipped checkpoint ``name`` from its recipe and save it; the card."""
    if name not in SHIPPED:
        raise ValueError(f"name must be one of {sorted(SHIPPED)}, got {name!r}")
    config, purpose = SHIPPED[name]
    train_ids, val, vocab = heldout_batches(config)
    start = time.perf_counter()
    result = train.run(config)
    model = result["model"]
    card = {
        "name": name,
        "purpose": purpose,
        "recipe": dataclasses.asdict(config),
        "data": data_card(config, val),
        "steps": config.steps,
        "tokens_seen": config.steps * config.batch_size * config.context,
        "train_cpu_seconds": round(result["train_cpu_seconds"], 1),
        "train_wall_seconds": round(result["train_wall_seconds"], 1),
        "total_wall_seconds": round(time.perf_counter() - start, 1),
        "host": _machine(),
        "first_losses": result["history"][:LOGGED_STEPS],
        # every step's training loss, 4 decimals (for the chapters' loss curves)
        "losses": [round(x, 4) for x in result["history"]],
        "final_train_loss": result["history"][-1],
        "heldout_loss_fp32": result["val_loss"],
        "baselines": baseline_losses(train_ids, val, vocab),
    }
    model_config = train.model_config(config, vocab)
    checkpoints.save(model, model_config, root / name, card)
    # the card's held-out loss is the one of the weights as stored (fp16), reloaded
    stored, _ = checkpoints.load(root / name)
    card["heldout_loss"] = lm_data.mean_loss(stored, val)
    return checkpoints.save(model, model_config, root / name, card)  # the same bytes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"default: all of {sorted(SHIPPED)}")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    for name in args.names or sorted(SHIPPED):
        card = train_one(name)
        print(
            f"{name}: held-out {card['heldout_loss']:.4f} nats/char (unigram "
            f"{card['baselines']['unigram']:.4f}, bigram "
            f"{card['baselines']['bigram']:.4f}), {card['train_cpu_seconds']} "
            f"CPU-s, {card['sha256'][:12]}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
