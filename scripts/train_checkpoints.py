"""Train the book's shipped checkpoints, each from the recipe kept in this file.

    python scripts/train_checkpoints.py                       # every checkpoint
    python scripts/train_checkpoints.py shakespeare-char-gpt  # one of them
    make checkpoints                                          # the same, every one

A shipped checkpoint is a family of :mod:`transformer_book.train` (``gpt``, ``bert``,
``t5``), a recipe of that family, and what its card says about it. :func:`train_one`
trains the recipe with the family's runner, scores the model and its baselines (fitted
on the training split) on the *same* held-out data, and writes the weights (fp16), the
vocabulary and the card with :func:`transformer_book.checkpoints.save` to
``src/transformer_book/trained/NAME/``:

- ``gpt`` (:func:`transformer_book.gpt_training.run`): Tiny Shakespeare, nanoGPT's
  split (the first 90 % of the characters to train on, the last 10 % held out); the
  unigram and bigram baselines on the same held-out characters;
- ``bert`` (:func:`transformer_book.train.run_bert`): MLM + NSP on SST-2's training
  phrases, scored on its dev sentences with one fixed draw of masks and pairs; the
  unigram baseline on the same masked pieces, "always is-next" on the same pairs;
- ``t5`` (:func:`transformer_book.train.run_t5`): span corruption on ATIS's training
  queries, scored on fixed windows of its test queries; the most frequent word, the
  unigram and the left bigram (add-one, and add-k with k chosen on its dev queries)
  on the same hidden words.

:data:`FINE_TUNED` holds the other kind: a pre-trained model's top layers trained for a
task, of which only the trained part is stored (``checkpoints.save(stored=...)``).
``sst-minilm-teacher`` is chapter 13's teacher (:func:`train_fine_tuned`):
all-MiniLM-L6-v2 fine-tuned on SST-2 phrases kept apart from the chapter's dev, test
and transfer texts, scored on its dev and test splits beside the majority class.

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

from transformer_book import (
    baselines,
    checkpoints,
    data,
    data_files,
    gpt_training,
    lm_data,
    minilm_weights,
    pretraining_data,
    sst2_teacher,
    train,
)

#: the training losses a card keeps (the reproduction test re-runs this many steps)
LOGGED_STEPS = 50
#: the held-out characters are read in batches of this many windows (as
#: gpt_training.run does)
EVAL_BATCH = 64
TRAIN_FRACTION = 0.9

#: name -> (recipe, what the card says the checkpoint is for); the family is the
#: recipe's config class (train.FAMILIES)
SHIPPED: dict[str, tuple[object, str]] = {
    # chapter 14's book-quick model (4 layers, width 64, 4 heads: GQA groups of 2 or 4,
    # RoPE) trained 2.5 times as long, to a held-out loss well below a bigram's; read
    # by chapter 9 for its KV cache and its MHA -> GQA/MQA conversion. About 3-6
    # CPU-minutes on one thread.
    "shakespeare-char-gpt": (
        dataclasses.replace(
            gpt_training.RECIPES["book-quick"],
            steps=2000,
            warmup=100,
            threads=1,
            log_every=500,
            device="cpu",
        ),  # fmt: skip
        "a character-level GPT of Tiny Shakespeare (chapter 9)",
    ),
    # chapters 11-13's pre-trained BERT: MLM + NSP on SST-2's training phrases
    "sst-bert": (
        train.BERT_RECIPES["sst-small"],
        "a small BERT pre-trained (MLM + NSP) on SST-2's training phrases "
        "(chapters 11-13)",
    ),
    # chapter 10's pre-trained T5: span corruption on ATIS's training queries
    "atis-t5": (
        train.T5_RECIPES["atis-scaled"],
        "a small T5 pre-trained with span corruption on ATIS's queries (chapter 10)",
    ),
}


def family(config: object) -> str:
    """The :data:`transformer_book.train.FAMILIES` entry a recipe belongs to."""
    for name, (config_class, _) in train.FAMILIES.items():
        if isinstance(config, config_class):
            return name
    raise ValueError(f"no family trains a {type(config).__name__}")


def heldout_batches(
    config: gpt_training.TrainConfig,
) -> tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]], int]:
    """The training stream, the held-out windows a model is scored on (as
    :func:`transformer_book.gpt_training.run` scores it) and the vocabulary size."""
    text = data.load_tinyshakespeare()
    chars = lm_data.char_vocab(text)
    ids = torch.tensor(chars.encode(list(text)))  # (N,)
    train_ids, val_ids = lm_data.split_stream(ids, TRAIN_FRACTION)
    val = lm_data.sequential_windows(val_ids, config.context, EVAL_BATCH)
    return train_ids, val, len(chars)


def data_card(config: gpt_training.TrainConfig, val: list) -> dict:
    """What the card says about the data and its split."""
    spec = data_files.DATASETS["tinyshakespeare"].file("input.txt")
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


def _files_card(dataset: str, files: list[str]) -> dict:
    return {f: list(data_files.DATASETS[dataset].file(f).sha256) for f in files}


def train_encoder(name: str, root: Path = checkpoints.SHIPPED) -> dict:
    """Train and save a ``bert`` or ``t5`` checkpoint; its card."""
    config, purpose = SHIPPED[name]
    kind = family(config)
    start = time.perf_counter()
    runner = train.run_bert if kind == "bert" else train.run_t5
    result = runner(config, device="cpu")
    model = result["model"]
    if kind == "bert":
        texts, heldout = pretraining_data.bert_corpus()
        tok = result["tokenizer"]
        files = {"vocab.txt": "\n".join(tok.itos) + "\n"}
        data_card = {
            "dataset": "sst2",
            "sha256": _files_card("sst2", ["train.tsv", "dev.tsv"]),
            "split": f"pre-trained on the text of train.tsv's {len(texts):,} phrases "
            f"(labels unused); held out: dev.tsv's {len(heldout)} sentences, one "
            f"draw of NSP pairs and masks (seed {pretraining_data.HELDOUT_SEED}, "
            "batches of 128, "
            f"max_len {config.max_len}; pretraining.pretraining_metrics)",
        }
        seen = {"sequences_seen": config.steps * config.batch_size}
        extra = {
            "mlm_losses": [round(x, 4) for x in result["mlm_history"]],
            "nsp_losses": [round(x, 4) for x in result["nsp_history"]],
        }
    else:
        atis = result["atis"]
        files = {"vocab.txt": "\n".join(atis.words.itos) + "\n"}
        data_card = {
            "dataset": "atis",
            "sha256": _files_card("atis", ["train/seq.in", "test/seq.in"]),
            "split": f"pre-trained on train/seq.in's {len(atis.train):,} words (each "
            f"query ending in '.'); held out: 20 x 64 span-corrupted windows of "
            f"test/seq.in's {len(atis.test):,} words "
            f"(seed {pretraining_data.HELDOUT_SEED}; "
            f"pretraining_data.t5_heldout)",
        }
        seen = {"tokens_seen": config.steps * config.batch_size * config.window}
        extra = {}
    card = {
        "name": name,
        "purpose": purpose,
        "family": kind,
        "recipe": dataclasses.asdict(config),
        "data": data_card,
        "steps": config.steps,
        **seen,
        "train_cpu_seconds": round(result["train_cpu_seconds"], 1),
        "train_wall_seconds": round(result["train_wall_seconds"], 1),
        "total_wall_seconds": round(time.perf_counter() - start, 1),
        "host": _machine(),
        "first_losses": result["history"][:LOGGED_STEPS],
        "losses": [round(x, 4) for x in result["history"]],
        **extra,
        "heldout_fp32": result["heldout"],
    }
    model_config = model.config
    checkpoints.save(model, model_config, root / name, card, files=files)
    # the card's held-out metrics are the ones of the weights as stored (fp16), reloaded
    stored, _ = checkpoints.load(root / name)
    card["heldout"] = heldout_metrics(name, stored)
    return checkpoints.save(model, model_config, root / name, card, files=files)


def heldout_metrics(name: str, model) -> dict:
    """The held-out metrics and baselines of a ``bert`` or ``t5`` checkpoint's model,
    computed as its card's were (the vocabulary read from the checkpoint)."""
    config, _ = SHIPPED[name]
    vocab_file = checkpoints.path(name) / "vocab.txt"
    itos = vocab_file.read_text(encoding="utf-8").split("\n")[:-1]
    if family(config) == "bert":
        from transformer_book import baselines, masked_lm, pretraining
        from transformer_book.tokenizer import WordPiece

        tok = WordPiece(itos)
        texts, heldout = pretraining_data.bert_corpus()
        pieces = [
            i
            for t in texts
            for word in masked_lm.word_pieces_by_word(tok, t)
            for i in word
            if i not in tok.special_ids
        ]
        unigram = baselines.unigram_log_probs(pieces, len(tok))
        return pretraining.pretraining_metrics(
            model, tok, heldout, config.max_len, seed=pretraining_data.HELDOUT_SEED,
            nsp=config.nsp, unigram=unigram,
        )  # fmt: skip
    atis = pretraining_data.atis_words(itos)
    return pretraining_data.t5_scores(
        model, atis, pretraining_data.t5_heldout(atis, config.window),
        pretraining_data.t5_bigram_k(atis, config.window)[0],
    )  # fmt: skip


def train_one(name: str, root: Path = checkpoints.SHIPPED) -> dict:
    """Train the shipped checkpoint ``name`` from its recipe and save it; the card."""
    if name not in SHIPPED:
        raise ValueError(f"name must be one of {sorted(SHIPPED)}, got {name!r}")
    config, purpose = SHIPPED[name]
    if family(config) != "gpt":
        # one thread, as the cards' CPU-seconds were measured (the gpt recipe sets its own)
        torch.set_num_threads(1)
        return train_encoder(name, root)
    train_ids, val, vocab = heldout_batches(config)
    start = time.perf_counter()
    result = gpt_training.run(config)
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
        "baselines": baselines.window_losses(train_ids, val, vocab),
    }
    model_config = gpt_training.model_config(config, vocab)
    checkpoints.save(model, model_config, root / name, card)
    # the card's held-out loss is the one of the weights as stored (fp16), reloaded
    stored, _ = checkpoints.load(root / name)
    card["heldout_loss"] = lm_data.mean_loss(stored, val)
    return checkpoints.save(model, model_config, root / name, card)  # the same bytes


# -- fine-tuned: a pre-trained model's top layers trained for a task, only they stored --


@dataclasses.dataclass(frozen=True)
class TeacherRecipe:
    """Chapter 13's teacher: :func:`transformer_book.sst2_teacher.train_teacher` on
    :func:`transformer_book.sst2_teacher.sst2_splits`' ``teacher`` phrases (one thread)."""

    steps: int = 2000
    lr: float = 3e-4
    batch_size: int = 32
    max_len: int = 32
    tuned_layers: int = 2
    seed: int = 0


#: name -> (recipe, what the card says the checkpoint is for)
FINE_TUNED: dict[str, tuple[TeacherRecipe, str]] = {
    # a teacher that knows much more than the student's 640 labels can teach it:
    # 2,000 updates of 32 phrases (about 1.4 passes over its 44 k phrases): 13
    # CPU-minutes on one thread (the card: 771 CPU-s), test accuracy 0.859 against
    # 0.777 for a probe fitted on the student's 640 labels. Only the top two layers
    # and the head are stored (7 MB in fp16); the rest is all-MiniLM-L6-v2 from its
    # pip package.
    "sst-minilm-teacher": (
        TeacherRecipe(),
        "all-MiniLM-L6-v2 with its top two layers and a mean-pooled head fine-tuned "
        "on SST-2 phrases kept apart from chapter 13's dev, test and transfer texts "
        "(chapter 13's teacher)",
    ),
}


def distill_splits():
    """Chapter 13's splits (:func:`transformer_book.sst2_teacher.sst2_splits`, defaults)."""

    return sst2_teacher.sst2_splits()


def teacher_scores(model, recipe: TeacherRecipe) -> dict:
    """A teacher's dev and test accuracy on chapter 13's splits, beside the majority
    class of its own training labels on the same sentences."""
    from transformer_book import finetune, metrics

    tok = minilm_weights.pretrained_tokenizer()
    sp = distill_splits()
    out = {}
    for split in ("dev", "test"):
        x, y = getattr(sp, split)
        pred = finetune.predict_classes(model, tok, x, recipe.max_len)
        out[f"{split}_accuracy"] = metrics.accuracy(y, pred)
        out[f"{split}_majority"] = baselines.majority_accuracy(sp.teacher[1], y)
    return out


def train_fine_tuned(
    name: str, root: Path = checkpoints.SHIPPED, stop_at: int | None = None
) -> dict:
    """Train and save a :data:`FINE_TUNED` checkpoint; its card. ``stop_at``: stop
    after that many updates (the learning-rate schedule stays the whole run's) and
    return the losses so far, saving nothing (the reproduction test)."""
    recipe, purpose = FINE_TUNED[name]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the card's CPU-seconds were measured
    try:
        return _train_fine_tuned(name, recipe, purpose, root, stop_at)
    finally:
        torch.set_num_threads(threads)


def _train_fine_tuned(
    name: str, recipe: TeacherRecipe, purpose: str, root: Path, stop_at: int | None
) -> dict:

    texts, labels = distill_splits().teacher
    losses: list[float] = []

    class Stop(Exception):
        pass

    def on_step(step: int, loss: float) -> None:
        losses.append(loss)
        if stop_at is not None and len(losses) >= stop_at:
            raise Stop

    start, cpu = time.perf_counter(), time.process_time()
    try:
        model = sst2_teacher.train_teacher(
            texts, labels, minilm_weights.pretrained_tokenizer(), recipe.steps, recipe.lr,
            sst2_teacher.TeacherConfig(tuned_layers=recipe.tuned_layers),
            recipe.batch_size, recipe.max_len, recipe.seed, on_step=on_step,
        )  # fmt: skip
    except Stop:
        return {"first_losses": losses}
    card = {
        "name": name,
        "purpose": purpose,
        "family": "fine-tuned",
        "recipe": dataclasses.asdict(recipe),
        "data": {
            "dataset": "sst2",
            "sha256": _files_card("sst2", ["train.tsv", "dev.tsv"]),
            "split": f"fine-tuned on {len(texts):,} of train.tsv's phrases "
            "(sst2_teacher.sst2_splits().teacher: none shares a 4-word run with a dev, "
            "test or transfer text); scored on chapter 13's dev (200 train.tsv "
            "phrases) and test (dev.tsv's first 256 sentences)",
            "n_teacher": len(texts),
        },
        "steps": recipe.steps,
        "sequences_seen": recipe.steps * recipe.batch_size,
        "train_cpu_seconds": round(time.process_time() - cpu, 1),
        "train_wall_seconds": round(time.perf_counter() - start, 1),
        "host": _machine(),
        "first_losses": losses[:LOGGED_STEPS],
        "losses": [round(x, 4) for x in losses],
        "heldout_fp32": teacher_scores(model, recipe),
    }
    stored = model.tuned()
    checkpoints.save(model, model.config, root / name, card, stored=stored)
    # the card's held-out metrics are the ones of the weights as stored (fp16), reloaded
    reloaded, _ = checkpoints.load(root / name)
    card["heldout"] = teacher_scores(reloaded, recipe)
    return checkpoints.save(model, model.config, root / name, card, stored=stored)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    every = sorted(SHIPPED) + sorted(FINE_TUNED)
    parser.add_argument("names", nargs="*", help=f"default: all of {every}")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    for name in args.names or every:
        if name in FINE_TUNED:
            card = train_fine_tuned(name)
            print(f"{name}: held-out {card['heldout']}, {card['train_cpu_seconds']} "
                  f"CPU-s, {card['sha256'][:12]}")  # fmt: skip
            continue
        card = train_one(name)
        if "heldout" in card:
            print(f"{name}: held-out {card['heldout']}, {card['train_cpu_seconds']} "
                  f"CPU-s, {card['sha256'][:12]}")  # fmt: skip
            continue
        print(
            f"{name}: held-out {card['heldout_loss']:.4f} nats/char (unigram "
            f"{card['baselines']['unigram']:.4f}, bigram "
            f"{card['baselines']['bigram']:.4f}), {card['train_cpu_seconds']} "
            f"CPU-s, {card['sha256'][:12]}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
