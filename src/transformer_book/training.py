"""A small, explicit training loop shared by the chapters that train models.

The task-specific part is a ``loss_fn(model, batch) -> loss`` the chapter writes; the
loop owns the optimiser, the learning-rate schedule, gradient clipping, the loss
history and a progress bar, nothing else.

The same loop runs on one process and on many (chapter 14). Under ``torchrun``, every
process calls :func:`transformer_book.distributed.init_distributed` and then
:func:`train` with its own share of the data; the loop wraps the model in PyTorch's
``DistributedDataParallel``, which averages the gradients of all processes after every
backward pass, so each process takes the same step, the one a single process would
take on the whole batch (Li et al., 2020). The loss it records is the mean over the
processes.

With ``checkpoint=`` a folder, the loop saves the run there every few steps
(:func:`transformer_book.resume.save_checkpoint`), and ``resume=True`` continues from
it: the resumed run takes the same steps, on the same batches, as one that was never
stopped (the batches must come in the same order on every iteration of ``batches``,
as a seeded :class:`transformer_book.lm_data.WindowBatches` does).

The progress bar (tqdm, with the running loss) shows when a person runs a notebook
or a script. The book's pipeline sets ``TRANSFORMER_BOOK_PROGRESS=0`` while it
executes and tests the notebooks, so the edition holds no bar.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

import torch
from torch import Tensor, nn

from .distributed import mean_over_processes, world
from .resume import STATE_FILE, load_checkpoint, save_checkpoint

__all__ = [
    "PROGRESS_ENV",
    "lr_factor",
    "progress_enabled",
    "to_device",
    "train",
]

PROGRESS_ENV = "TRANSFORMER_BOOK_PROGRESS"
SCHEDULES = ("constant", "linear", "cosine")
PRECISIONS = ("fp32", "bf16", "fp16")


def progress_enabled(progress: bool | None = None) -> bool:
    """Whether to show a progress bar: ``progress`` if given, else not when
    ``$TRANSFORMER_BOOK_PROGRESS`` is ``0`` (the pipeline's setting), else yes."""
    if progress is not None:
        return progress
    return os.environ.get(PROGRESS_ENV, "1") != "0"


def lr_factor(
    step: int,
    steps: int,
    warmup: int = 0,
    decay: str = "constant",
    min_factor: float = 0.0,
    cooldown: int = 0,
    cooldown_factor: float = 0.1,
) -> float:
    """The learning rate of update ``step`` (0-based) as a fraction of the peak rate.

    Linear warm-up from ``1/warmup`` to 1 over the first ``warmup`` updates, then
    ``decay``: ``"constant"`` (stay at 1), ``"linear"`` or ``"cosine"`` (fall to
    ``min_factor`` at the last update before the cool-down). ``cooldown``: the last
    that many of the ``steps`` updates run at ``cooldown_factor`` of the peak rate, so
    that the weights settle instead of hopping around a minimum.
    """
    if decay not in SCHEDULES:
        raise ValueError(f"decay must be one of {SCHEDULES}, got {decay!r}")
    if not 0 <= cooldown < steps:
        raise ValueError(f"cooldown must be in [0, steps={steps}), got {cooldown}")
    if step >= steps - cooldown:
        return cooldown_factor
    steps -= cooldown  # the schedule proper ends where the cool-down begins
    if step < warmup:
        return (step + 1) / warmup
    if decay == "constant" or steps <= warmup + 1:
        return 1.0
    done = (step - warmup) / (
        steps - warmup - 1
    )  # 0 at the end of warm-up, 1 at the end
    if decay == "linear":
        shape = 1.0 - done
    else:
        shape = 0.5 * (1.0 + math.cos(math.pi * done))
    return min_factor + (1.0 - min_factor) * shape


def to_device(batch, device: torch.device | str):
    """``batch`` with every tensor in it (also inside tuples, lists and dicts) moved to
    ``device``; anything else (token lists, example records) is returned as it is."""
    if isinstance(batch, Tensor):
        return batch.to(device)
    if isinstance(batch, dict):
        return {k: to_device(v, device) for k, v in batch.items()}
    if isinstance(batch, (tuple, list)):
        moved = [to_device(v, device) for v in batch]
        if hasattr(batch, "_fields"):  # a NamedTuple
            return type(batch)(*moved)
        return type(batch)(moved)
    return batch


def _progress_bar():
    """tqdm's notebook widget where ipywidgets is installed (Jupyter, Colab), else text."""
    try:
        import ipywidgets  # noqa: F401
        from tqdm.auto import tqdm
    except ImportError:
        from tqdm import tqdm
    return tqdm


def _param_groups(
    model: nn.Module,
    weight_decay: float,
    decay_vectors: bool,
    lr_scales: Mapping[str, float] | None = None,
) -> list:
    """The optimiser's parameter groups, each with an ``lr_scale``: weight decay on
    matrices and embeddings, none on biases and norm gains (vectors) unless
    ``decay_vectors``, as GPT-2 and nanoGPT train; a parameter whose name starts with
    a key of ``lr_scales`` learns at that multiple of the learning rate, without
    weight decay."""
    lr_scales = dict(lr_scales or {})
    for prefix, scale in lr_scales.items():
        if not scale > 0:
            raise ValueError(f"lr_scales[{prefix!r}] must be positive, got {scale}")
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    for prefix in lr_scales:
        if not any(n == prefix or n.startswith(prefix + ".") for n, _ in named):
            raise ValueError(
                f"lr_scales names {prefix!r}, which no parameter starts with"
            )
    # matrices first, then vectors, then each scaled prefix (a stable order, so that
    # an optimiser state saved before still loads)
    groups: dict[tuple[float, float], list] = {(1.0, weight_decay): []}
    if not decay_vectors:
        groups[(1.0, 0.0)] = []
    for scale in lr_scales.values():
        groups.setdefault((scale, 0.0), [])
    for name, p in named:
        scale = next(
            (s for k, s in lr_scales.items() if name == k or name.startswith(k + ".")),
            None,
        )
        if scale is not None:
            key = (scale, 0.0)
        elif decay_vectors or p.dim() >= 2:
            key = (1.0, weight_decay)
        else:
            key = (1.0, 0.0)
        groups.setdefault(key, []).append(p)
    return [
        {"params": ps, "lr_scale": scale, "weight_decay": decay}
        for (scale, decay), ps in groups.items()
        if ps or scale == 1.0
    ]


def _cycle(batches: Iterable) -> Iterator:
    """The items of ``batches``, then again from the start, and so on."""
    while True:
        empty = True
        for batch in batches:
            empty = False
            yield batch
        if empty:
            raise ValueError("batches is empty: there is nothing to train on")


def train(
    model: nn.Module,
    batches: Iterable,
    loss_fn: Callable[[nn.Module, object], Tensor],
    steps: int,
    lr: float = 1e-3,
    weight_decay: float = 0.0,
    clip: float = 1.0,
    warmup: int = 0,
    decay: str = "constant",
    min_lr_factor: float = 0.0,
    cooldown: int = 0,
    cooldown_factor: float = 0.1,
    progress: bool | None = None,
    on_step: Callable[[int, float], None] | None = None,
    betas: tuple[float, float] = (0.9, 0.999),
    decay_vectors: bool = True,
    checkpoint: str | Path | None = None,
    checkpoint_every: int = 0,
    resume: bool = False,
    stop_at: int | None = None,
    precision: str = "fp32",
    fused: bool | None = None,
    compile: bool = False,
    lr_scales: Mapping[str, float] | None = None,
) -> list[float]:
    """Run ``steps`` AdamW updates on batches drawn (cycling) from ``batches``.

    Returns the training loss of every step. ``warmup``, ``decay`` and
    ``min_lr_factor`` shape the learning rate, and the last ``cooldown`` steps run at
    ``cooldown_factor`` of it (:func:`lr_factor`); ``clip`` is the
    maximum gradient norm (0 or None: no clipping); ``on_step(step, loss)`` is called
    after every update (to evaluate now and then, say). A loss that becomes NaN or
    infinite does not stop the loop: the history records the divergence. The model
    is left in eval mode, ready to be evaluated. Every tensor in a batch is moved to
    the model's device first (:func:`to_device`), so batch producers may yield CPU
    tensors.

    ``betas``: AdamW's (β1, β2). ``decay_vectors=False`` applies ``weight_decay`` to
    matrices and embeddings only. ``checkpoint``: a folder to save to every
    ``checkpoint_every`` steps (0: only at the end) and at the end; ``resume=True``
    continues from the checkpoint there, if any (the history returned then includes
    the steps before). ``stop_at``: leave after that many steps (with a checkpoint,
    if there is a folder), as if interrupted: the schedule stays the whole run's.
    Under ``torchrun`` (after :func:`distributed.init_distributed`) the model is wrapped in
    ``DistributedDataParallel``; every process passes its own ``batches``.

    Speed on a GPU (all off by default, so a CPU run is plain fp32):
    ``precision="bf16"`` runs the forward pass and the loss under ``torch.autocast`` in
    bfloat16 (the weights, gradients and optimiser stay fp32); ``"fp16"`` does the same in
    float16 with a gradient scaler (float16's narrow range underflows small gradients
    otherwise; Micikevicius et al., 2018). ``fused``: AdamW's fused kernel (None: on CUDA
    only); unfused, AdamW runs its multi-tensor (``foreach``) implementation on every
    device. ``compile=True`` runs the model through ``torch.compile`` (the first steps
    then pay for compilation).

    ``lr_scales``: parameter-name prefix -> multiple of the learning rate (those
    parameters get no weight decay), for parameters that AdamW, moving every weight
    about one learning rate per step, would move too slowly: T5's relative-bias
    tables (:func:`span_pretraining.pretrain_t5`).
    """
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    if checkpoint is None and (resume or checkpoint_every):
        raise ValueError("resume and checkpoint_every need a checkpoint folder")
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    schedule = dict(
        warmup=warmup,
        decay=decay,
        min_factor=min_lr_factor,
        cooldown=cooldown,
        cooldown_factor=cooldown_factor,
    )
    lr_factor(0, steps, **schedule)  # validates decay and cooldown
    device = next(model.parameters()).device
    if fused is None:
        fused = device.type == "cuda"
    groups = _param_groups(model, weight_decay, decay_vectors, lr_scales)
    # not fused: the multi-tensor (foreach) AdamW, also on a CPU (torch's CPU default is
    # a Python loop over the tensors): the same numbers, fewer, larger operations
    opt = torch.optim.AdamW(
        groups, lr=lr, betas=betas, fused=fused or None, foreach=None if fused else True
    )
    autocast = torch.autocast(
        device.type,
        dtype=torch.bfloat16 if precision == "bf16" else torch.float16,
        enabled=precision != "fp32",
    )
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")
    history: list[float] = []
    start = 0
    if resume and (Path(checkpoint) / STATE_FILE).is_file():
        start, history = load_checkpoint(checkpoint, model, opt)
    end = steps if stop_at is None else min(steps, stop_at)
    rank, world_size = world()
    net = model
    if world_size > 1:
        ids = [device.index] if device.type == "cuda" else None
        net = nn.parallel.DistributedDataParallel(model, device_ids=ids)
    if compile:
        net = torch.compile(net)
    bar = None
    if progress_enabled(progress) and rank == 0 and start < end:
        bar = _progress_bar()(
            total=end - start, desc="training", file=sys.stderr, leave=False
        )
    model.train()
    draw = _cycle(batches)
    for _ in range(start):  # the batches the run before the checkpoint consumed
        next(draw)
    for step in range(start, end):
        batch = to_device(next(draw), device)
        for group in opt.param_groups:
            group["lr"] = lr * group["lr_scale"] * lr_factor(step, steps, **schedule)
        with autocast:
            loss = loss_fn(net, batch)
        opt.zero_grad(set_to_none=True)
        # under DDP: the gradients are averaged over the processes
        scaler.scale(loss).backward()
        if clip:
            scaler.unscale_(opt)  # clip the true gradients, not the scaled ones
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        scaler.step(opt)  # skips the step if fp16 gradients overflowed
        scaler.update()
        history.append(mean_over_processes(loss, world_size))
        if bar is not None:
            bar.update(1)
            if step % 10 == 0 or step == end - 1:
                bar.set_postfix(loss=f"{history[-1]:.4f}", refresh=False)
        if on_step is not None:
            on_step(step, history[-1])
        done = step + 1
        if checkpoint is not None and (
            done == end or (checkpoint_every and done % checkpoint_every == 0)
        ):
            save_checkpoint(checkpoint, model, opt, done, history)
    if bar is not None:
        bar.close()
    model.eval()
    return history
