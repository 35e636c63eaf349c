"""Train the book's three model families from the command line.

    python -m transformer_book.train gpt --out runs/shakespeare
    python -m transformer_book.train gpt --recipe nanogpt-cpu --steps 500 --lr 2e-3
    python -m transformer_book.train gpt --config my_run.json --out runs/a --resume
    torchrun --nproc_per_node=4 -m transformer_book.train gpt --out runs/ddp
    python -m transformer_book.train bert --recipe sst-small --out runs/bert
    python -m transformer_book.train t5 --recipe atis-scaled --steps 300 --out runs/t5

Each family has its data, its config class and its named recipes (:data:`FAMILIES`);
a run is a recipe, then a JSON file (``--config``), then single options
(``--lr 3e-3``), each overriding the one before.

- ``gpt`` (:class:`transformer_book.gpt_training.TrainConfig`,
  :data:`transformer_book.gpt_training.RECIPES`): chapter 14's character-level GPT on
  Tiny Shakespeare, trained by :func:`transformer_book.gpt_training.run`. With
  ``--out`` it writes ``config.json``, a checkpoint and ``history.json``; ``--resume``
  continues from it, ``--stop_at`` leaves early as if interrupted. Under ``torchrun``
  every process runs this same program (``--batch_size`` is per process).
- ``bert`` (:class:`transformer_book.pretraining.PretrainConfig`,
  :data:`BERT_RECIPES`, :func:`run_bert`): a small BERT pre-trained with MLM + NSP on
  the text of SST-2's training phrases (their labels unused), held out: SST-2's dev
  sentences (:func:`transformer_book.pretraining_data.bert_corpus`). Chapters 11-13
  read the result.
- ``t5`` (:class:`transformer_book.span_pretraining.SpanPretrainConfig`,
  :data:`T5_RECIPES`, :func:`run_t5`): a small T5 pre-trained with span corruption on
  ATIS's training queries, held out: ATIS's test queries
  (:func:`transformer_book.pretraining_data.atis_words`). Chapter 10 reads it.

``bert`` and ``t5`` with ``--out`` write ``config.json``, ``history.json`` and the model
as a book checkpoint (:func:`transformer_book.checkpoints.save`, its vocabulary beside
it); while they train, the state to resume from sits in ``--out``/``training``
(every :data:`CHECKPOINT_EVERY` steps), and ``--resume`` continues from it. Under
``torchrun`` each process draws its own batches
(:func:`transformer_book.distributed.process_seed`) and rank 0 scores and writes.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
import time
from pathlib import Path

import torch

from . import (
    baselines,
    checkpoints,
    distributed,
    gpt_training,
    masked_lm,
    pretraining,
    pretraining_data,
    runtime,
    span_pretraining,
)
from .tokenizer import WordPiece

__all__ = ["BERT_RECIPES", "T5_RECIPES", "FAMILIES", "run_bert", "run_t5", "main"]

log = logging.getLogger("transformer_book.train")
# bert and t5: steps between the saved states a run can resume from (and the end)
CHECKPOINT_EVERY = 500


# -- bert: MLM + NSP on the text of SST-2's training phrases ------------------------

BERT_RECIPES: dict[str, pretraining.PretrainConfig] = {
    # the book's shipped BERT (chapters 11-13): 4 layers of width 128, a 4,000-piece
    # vocabulary, 4,000 updates of 64 pairs (about eight passes over the phrases),
    # BERT's dropout. The rate: 2e-3 sat on the unigram plateau (training loss 6.6 after
    # half the run, with a bump after warm-up); 1e-3 is the one shipped, not tuned further
    "sst-small": pretraining.PretrainConfig(
        vocab_size=4000,
        d_model=128,
        n_layers=4,
        n_heads=4,
        d_ff=512,
        max_len=64,
        batch_size=64,
        steps=4000,
        lr=1e-3,
        dropout=0.1,
    ),  # fmt: skip
    # chapter 11's quick profile, for a run of seconds
    "tiny": pretraining.PretrainConfig(),
}


def run_bert(config: pretraining.PretrainConfig, out: str | Path | None = None,
             device: str = "cpu", log_every: int = 500,
             stop_at: int | None = None, resume: bool = False) -> dict:  # fmt: skip
    """Pre-train :func:`pretraining_data.bert_corpus`'s BERT as ``config`` says: learn
    the WordPiece vocabulary from the training phrases, train, and score the model and
    the unigram baseline on the held-out sentences
    (:func:`pretraining.pretraining_metrics`).
    Returns the losses, the metrics, the CPU-seconds, the model and its tokenizer;
    with ``out``, also writes them (the model as a book checkpoint). ``stop_at``: leave
    after that many steps (the schedule still the whole run's), without scoring;
    ``resume``: continue from ``out``'s saved state (:func:`_resumable`).
    Under ``torchrun``, the processes other than rank 0 return after training."""
    device, world = _process_device(device)
    texts, heldout = pretraining_data.bert_corpus()
    start_cpu, start_wall = time.process_time(), time.perf_counter()
    tok = WordPiece.train(texts, config.vocab_size)
    docs = [masked_lm.word_pieces_by_word(tok, t) for t in texts]

    def on_step(step: int, loss: float) -> None:
        if log_every and (step + 1) % log_every == 0:
            log.info("step %d/%d | train loss %.4f", step + 1, config.steps, loss)

    result = pretraining.pretrain(
        texts, config, tok, docs, device, on_step, stop_at,
        resume=resume, **_resumable(out),
    )  # fmt: skip
    train_cpu = time.process_time() - start_cpu
    if stop_at is not None or not world.is_main:
        return {"history": result.loss, "model": result.model, "tokenizer": tok}
    pieces = [
        i for doc in docs for word in doc for i in word if i not in tok.special_ids
    ]
    unigram = baselines.unigram_log_probs(pieces, len(tok))  # add-one, (V,)
    metrics = pretraining.pretraining_metrics(
        result.model, tok, heldout, config.max_len, seed=pretraining_data.HELDOUT_SEED,
        nsp=config.nsp, unigram=unigram,
    )  # fmt: skip
    log.info("held-out: %s", metrics)
    summary = {
        "history": result.loss, "mlm_history": result.mlm_loss,
        "nsp_history": result.nsp_loss, "heldout": metrics,
        "train_cpu_seconds": train_cpu,
        "train_wall_seconds": time.perf_counter() - start_wall,
    }  # fmt: skip
    if out is not None:
        _write(out, config, summary, result.model, result.model.config,
               {"vocab.txt": "\n".join(tok.itos) + "\n"})  # fmt: skip
    return {**summary, "model": result.model, "tokenizer": tok}


# -- t5: span corruption on ATIS's queries -------------------------------------------

T5_RECIPES: dict[str, span_pretraining.SpanPretrainConfig] = {
    # the book's first T5 (chapter 10): 3 + 3 layers of width 128, 2,400 updates of 64
    # windows of 32 words (about 90 passes over ATIS's 55,000 training words, each
    # with fresh spans), dropout 0.1 against memorising them. It underfit: AdamW's
    # equal steps crawl for T5's std-1 embedding and race for its small W_Q, and it
    # ended behind a left bigram on the held-out words
    "atis-small": span_pretraining.SpanPretrainConfig(),
    # the book's shipped T5: the same, every weight tensor stepping in proportion to
    # its initial scale (span_pretraining.init_lr_scales), as Adafactor steps
    "atis-scaled": span_pretraining.SpanPretrainConfig(scale_steps=True),
    # chapter 10's quick profile, for a run of seconds
    "tiny": span_pretraining.SpanPretrainConfig(
        d_model=64, n_layers=2, d_ff=128, batch_size=32, steps=200, lr=5e-3, dropout=0.0
    ),
}


def run_t5(config: span_pretraining.SpanPretrainConfig, out: str | Path | None = None,
           device: str = "cpu", log_every: int = 500,
           stop_at: int | None = None, resume: bool = False) -> dict:  # fmt: skip
    """Pre-train :func:`pretraining_data.atis_words`'s T5 as ``config`` says and score
    it and the baselines on :func:`pretraining_data.t5_heldout` (the left bigram also
    with its smoothing chosen on dev, :func:`pretraining_data.t5_bigram_k`); like
    :func:`run_bert`."""
    device, world = _process_device(device)
    atis = pretraining_data.atis_words()
    start_cpu, start_wall = time.process_time(), time.perf_counter()

    def on_step(step: int, loss: float) -> None:
        if log_every and (step + 1) % log_every == 0:
            log.info("step %d/%d | train loss %.4f", step + 1, config.steps, loss)

    model_config = config.t5_config(len(atis.words), atis.words.pad_id, atis.eos)
    model, history = span_pretraining.pretrain_t5(
        atis.train, model_config, atis.sentinels, config, device, on_step, stop_at,
        resume=resume, **_resumable(out),
    )  # fmt: skip
    train_cpu = time.process_time() - start_cpu
    if stop_at is not None or not world.is_main:
        return {"history": history, "model": model, "atis": atis}
    held_out = pretraining_data.t5_heldout(atis, config.window)
    bigram_k = pretraining_data.t5_bigram_k(atis, config.window)[0]  # on dev
    scores = pretraining_data.t5_scores(model, atis, held_out, bigram_k)
    log.info("held-out: %s", scores)
    summary = {
        "history": history, "heldout": scores, "train_cpu_seconds": train_cpu,
        "train_wall_seconds": time.perf_counter() - start_wall,
    }  # fmt: skip
    if out is not None:
        _write(out, config, summary, model, model_config,
               {"vocab.txt": "\n".join(atis.words.itos) + "\n"})  # fmt: skip
    return {**summary, "model": model, "atis": atis}


def _process_device(device: str) -> tuple[str, distributed.Distributed]:
    """Join ``torchrun``'s process group if there is one; on CUDA, one GPU each."""
    world = distributed.init_distributed()
    if torch.device(device).type == "cuda" and world.world_size > 1:
        device = f"cuda:{world.local_rank}"
    return device, world


def _resumable(out: str | Path | None) -> dict:
    """Where and how often a bert or t5 run saves the state it can resume from:
    ``out``/training every :data:`CHECKPOINT_EVERY` steps (the book checkpoint, fp16
    weights and card, goes to ``out`` itself); nowhere without ``out``."""
    if out is None:
        return {"checkpoint": None, "checkpoint_every": 0}
    return {"checkpoint": Path(out) / "training", "checkpoint_every": CHECKPOINT_EVERY}


def _write(out, config, summary, model, model_config, files) -> None:
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(dataclasses.asdict(config)))
    (folder / "history.json").write_text(json.dumps(summary))
    checkpoints.save(model, model_config, folder, {"recipe": dataclasses.asdict(config)},
                     files=files)  # fmt: skip


FAMILIES: dict[str, tuple[type, dict]] = {
    "gpt": (gpt_training.TrainConfig, gpt_training.RECIPES),
    "bert": (pretraining.PretrainConfig, BERT_RECIPES),
    "t5": (span_pretraining.SpanPretrainConfig, T5_RECIPES),
}
DEFAULT_RECIPE = {"gpt": "book-quick", "bert": "sst-small", "t5": "atis-scaled"}


def _parse(argv: list[str] | None) -> tuple[object, argparse.Namespace]:
    first = argparse.ArgumentParser(add_help=False)
    first.add_argument("model", nargs="?", choices=sorted(FAMILIES))
    family = first.parse_known_args(argv)[0].model or "gpt"
    config_class, recipes = FAMILIES[family]
    parser = argparse.ArgumentParser(
        prog="python -m transformer_book.train",
        description="Train one of the book's models: a character-level GPT on Tiny "
        "Shakespeare, a small BERT (MLM + NSP) on SST-2's phrases, a small T5 (span "
        "corruption) on ATIS's queries.",
    )
    parser.add_argument("model", choices=sorted(FAMILIES), help="the model family")
    parser.add_argument("--recipe", choices=sorted(recipes),
                        default=DEFAULT_RECIPE[family])  # fmt: skip
    parser.add_argument("--config", help="a JSON file of the family's config fields")
    parser.add_argument("--out", help="folder for the config, checkpoint and history")
    parser.add_argument("--resume", action="store_true", help="continue from --out")
    parser.add_argument("--stop_at", type=int, help="leave after this step")
    for field in dataclasses.fields(config_class):
        kind = {"int": int, "float": float, "str": str, "bool": _bool}[field.type]
        parser.add_argument(f"--{field.name}", type=kind, default=None)
    args = parser.parse_args(argv)
    config = recipes[args.recipe]
    if args.config:
        config = dataclasses.replace(
            config, **json.loads(Path(args.config).read_text())
        )
    given = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(config_class)
        if getattr(args, f.name) is not None
    }
    return dataclasses.replace(config, **given), args


def _bool(text: str) -> bool:
    if text.lower() not in ("true", "false", "1", "0"):
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return text.lower() in ("true", "1")


def main(argv: list[str] | None = None) -> int:
    config, args = _parse(argv)
    if args.resume and not args.out:
        raise SystemExit("--resume needs --out, the folder of the checkpoint")
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stdout
    )
    log.info("config: %s", config)
    if args.model in ("bert", "t5"):
        runner = run_bert if args.model == "bert" else run_t5
        device = str(runtime.resolve_device("auto"))
        runner(config, args.out, device, stop_at=args.stop_at, resume=args.resume)
    else:
        gpt_training.run(config, out=args.out, resume=args.resume, stop_at=args.stop_at)
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
