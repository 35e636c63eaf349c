"""Chapter 14's GPT trained on Tiny Shakespeare's characters: its config, its named
recipes and the run, on one process or on many under ``torchrun``.

:class:`TrainConfig` holds everything one run needs (the model's shape, the data, the
optimiser, the GPU path); :data:`RECIPES` names the book's: nanoGPT's CPU recipe, the
chapter's quick and full profiles. :func:`run` trains :class:`transformer_book.gpt.GPT`
(:func:`model_config`) on the first 90 % of the characters (nanoGPT's split) with
:func:`transformer_book.training.train`, and scores every held-out character. With
``out`` it writes ``config.json``, a checkpoint (``model.safetensors``, ``trainer.pt``)
and ``history.json`` (the loss of every step, the evaluations); ``resume`` continues
from it. Under ``torchrun`` every process runs the same program: :func:`run` joins the
process group (gloo on CPUs, NCCL on GPUs), gives each process its own share of every
batch (``batch_size`` is per process), and lets rank 0 log and write. ``precision``,
``compile`` and ``tf32`` switch on the GPU path (:func:`tf32_matmuls`).

``python -m transformer_book.train gpt`` (:mod:`transformer_book.train`) is its
command line; :mod:`transformer_book.gpt_measurements` reads the committed measurements
of the chapter's recipes back.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from . import data, distributed, gpt, lm_data, runtime, training

__all__ = [
    "TrainConfig",
    "RECIPES",
    "model_config",
    "run",
    "tf32_matmuls",
    "recipe_changes",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainConfig:
    """Everything one training run needs: the model's shape, the data, the optimiser."""

    # the model (gpt.GPTConfig; the vocabulary comes from the text)
    d_model: int = 128
    n_layers: int = 4
    n_heads: int = 4
    context: int = 64  # the model's max_len
    positions: str = "learned"
    tie_embeddings: bool = True
    bias: bool = False
    dropout: float = 0.0
    activation: str = "gelu"
    # the data and the optimiser
    batch_size: int = 12  # per process
    steps: int = 2000
    lr: float = 1e-3
    warmup: int = 100
    decay: str = "cosine"
    min_lr_factor: float = 0.1
    beta2: float = 0.99
    weight_decay: float = 0.1  # on matrices and embeddings only
    clip: float = 1.0
    seed: int = 0
    # logging, evaluation and checkpoints
    log_every: int = 100
    eval_every: int = 0  # 0: evaluate once, at the end
    checkpoint_every: int = 0  # 0: only at the end (with out)
    device: str = "auto"
    threads: int = 0  # CPU threads; 0: torch's default
    # the GPU path (training.train): "fp32", "bf16" or "fp16" autocast (fp16 with a
    # gradient scaler); torch.compile; TF32 matrix products on CUDA (the optimiser is
    # fused AdamW on CUDA, for-each elsewhere)
    precision: str = "fp32"
    compile: bool = False
    tf32: bool = True

    def __post_init__(self) -> None:
        for name in ("batch_size", "steps", "context"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.precision not in training.PRECISIONS:
            raise ValueError(
                f"precision must be one of {training.PRECISIONS}, got {self.precision!r}"
            )


RECIPES: dict[str, TrainConfig] = {
    # nanoGPT's CPU recipe for Shakespeare (its README; config/train_shakespeare_char.py
    # with --device=cpu --block_size=64 --batch_size=12 --n_layer=4 --n_head=4
    # --n_embd=128 --max_iters=2000 --lr_decay_iters=2000 --dropout=0.0)
    "nanogpt-cpu": TrainConfig(),
    # chapter 14's quick profile (see the chapter's ablation): 40 % of the steps at a ten
    # times higher peak rate with half the warm-up; half the width with batches of 32
    # instead of 12 (a step costs about the same and reads 2.7 times the text); ReLU
    # instead of GELU; RoPE instead of learned positions
    "book-quick": TrainConfig(
        d_model=64,
        batch_size=32,
        steps=800,
        lr=1e-2,
        warmup=50,
        activation="relu",
        positions="rope",
    ),
    # chapter 14's full profile (a GPU): nanoGPT's Shakespeare model
    "book-full": TrainConfig(
        d_model=384,
        n_layers=6,
        n_heads=6,
        context=256,
        dropout=0.2,
        batch_size=64,
        steps=5000,
        lr=1e-3,
        min_lr_factor=0.1,
        log_every=250,
    ),  # fmt: skip
}


def model_config(config: TrainConfig, vocab_size: int) -> gpt.GPTConfig:
    """The :class:`transformer_book.gpt.GPTConfig` a run trains."""
    return gpt.GPTConfig(
        vocab_size=vocab_size,
        max_len=config.context,
        d_model=config.d_model,
        n_layers=config.n_layers,
        n_heads=config.n_heads,
        dropout=config.dropout,
        positions=config.positions,
        activation=config.activation,
        bias=config.bias,
        tie_embeddings=config.tie_embeddings,
    )


def _device(config: TrainConfig, world: distributed.Distributed) -> torch.device:
    device = runtime.resolve_device(config.device)
    if device.type == "cuda" and world.world_size > 1:
        device = torch.device("cuda", world.local_rank)  # one GPU per process
    return device


def run(config: TrainConfig, out: str | Path | None = None, resume: bool = False,
        stop_at: int | None = None) -> dict:  # fmt: skip
    """Train as ``config`` says; return the losses, timings and the trained model (rank
    0 also writes all but the model to ``out``/history.json). After the last step the
    held-out loss over every held-out character (``val_loss``) and over each half of
    them alone (``val_loss_halves``: one to choose a recipe on, one to report on).
    ``stop_at``: leave after that step, as if interrupted."""
    world = distributed.init_distributed()
    threads = runtime.thread_count(config.threads)
    if threads:
        torch.set_num_threads(threads)
    device = _device(config, world)
    # the TF32 setting is global to the process: restored after the run
    with tf32_matmuls(device, config.tf32):
        return _run_gpt(config, out, resume, stop_at, world, device)


@contextlib.contextmanager
def tf32_matmuls(device: torch.device, enabled: bool) -> Iterator[None]:
    """On CUDA, let float32 matrix products use TF32 (or forbid it) inside the block,
    and restore the process's previous setting after it; elsewhere nothing changes."""
    if device.type != "cuda":
        yield
        return
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = enabled
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def _run_gpt(config: TrainConfig, out, resume: bool, stop_at: int | None,
             world: distributed.Distributed, device: torch.device) -> dict:  # fmt: skip
    text = data.load_tinyshakespeare()
    chars = lm_data.char_vocab(text)
    ids = torch.tensor(chars.encode(list(text)))  # (N,) one id per character
    train_ids, val_ids = lm_data.split_stream(ids, 0.9)
    batches = lm_data.WindowBatches(
        train_ids, config.batch_size, config.context, seed=config.seed,
        rank=world.rank, world_size=world.world_size, device=device,
    )  # fmt: skip
    val = lm_data.sequential_windows(val_ids, config.context, 64, device=device)
    torch.manual_seed(config.seed)  # the same initial weights on every process
    model = gpt.GPT(model_config(config, len(chars))).to(device)
    if world.is_main and out is not None:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "config.json").write_text(json.dumps(dataclasses.asdict(config)))
    evals: list[tuple[int, float]] = []
    start_cpu, start_wall = time.process_time(), time.perf_counter()
    eval_seconds = [0.0]

    def on_step(step: int, loss: float) -> None:
        done = step + 1
        if world.is_main and config.log_every and done % config.log_every == 0:
            log.info("step %d/%d | train loss %.4f", done, config.steps, loss)
        if world.is_main and config.eval_every and done % config.eval_every == 0:
            t0 = time.process_time()
            evals.append((done, lm_data.mean_loss(model, val)))
            model.train()
            eval_seconds[0] += time.process_time() - t0
            log.info("step %d | held-out loss %.4f", done, evals[-1][1])

    history = training.train(
        model, batches, lm_data.next_token_loss, config.steps, lr=config.lr,
        weight_decay=config.weight_decay, clip=config.clip, warmup=config.warmup,
        decay=config.decay, min_lr_factor=config.min_lr_factor,
        betas=(0.9, config.beta2), decay_vectors=False, on_step=on_step,
        checkpoint=out, checkpoint_every=config.checkpoint_every, resume=resume,
        stop_at=stop_at, progress=False, precision=config.precision,
        compile=config.compile,
    )  # fmt: skip
    train_cpu = time.process_time() - start_cpu - eval_seconds[0]
    train_wall = time.perf_counter() - start_wall
    result = {
        "history": history,
        "evals": evals,
        "train_cpu_seconds": train_cpu,
        "train_wall_seconds": train_wall,
        "threads": torch.get_num_threads(),  # CPU threads the steps ran on
        "world_size": world.world_size,
    }
    if len(history) == config.steps and world.is_main:
        result["val_loss"] = lm_data.mean_loss(model, val)
        log.info("held-out loss after %d steps: %.4f", config.steps, result["val_loss"])
        # each half of the held-out text alone: choose a recipe on one, report the other
        half = len(val_ids) // 2
        result["val_loss_halves"] = [
            lm_data.mean_loss(model, lm_data.sequential_windows(h, config.context, 64))
            for h in (val_ids[:half], val_ids[half:])
        ]
    if world.is_main and out is not None:
        (Path(out) / "history.json").write_text(json.dumps(result))
    return {**result, "model": model}


def recipe_changes(old: TrainConfig, new: TrainConfig) -> dict[str, tuple]:
    """The settings in which recipe ``new`` differs from ``old``: name -> (old, new)."""
    return {
        f.name: (getattr(old, f.name), getattr(new, f.name))
        for f in dataclasses.fields(old)
        if getattr(old, f.name) != getattr(new, f.name)
    }
