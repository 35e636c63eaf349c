"""Stopping a training run and resuming it (chapter 14): everything a run needs to
continue as if it had never stopped, written to a folder and read back.

:func:`save_checkpoint` writes the model's weights (safetensors), the optimiser's
state, the number of steps done, the loss history and the random state;
:func:`load_checkpoint` restores them. :func:`transformer_book.training.train` calls
both with ``checkpoint=`` and ``resume=True``. Under ``torchrun`` rank 0 writes the
shared files and every rank its own random state. (The book's shipped, trained
weights are :mod:`transformer_book.checkpoints`.)
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

from .distributed import world

__all__ = ["save_checkpoint", "load_checkpoint", "WEIGHTS_FILE", "STATE_FILE"]

WEIGHTS_FILE, STATE_FILE = "model.safetensors", "trainer.pt"


def save_checkpoint(
    folder: str | Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    step: int,
    history: list[float],
) -> None:
    """Write ``model.safetensors`` (the weights; tied weights once) and ``trainer.pt``
    (optimiser state, the number of ``step`` s done, the loss history, the random
    state) into ``folder``, replacing older files only once the new ones are complete.

    Under ``torchrun`` rank 0 writes the shared files and every rank its random state.
    """
    from safetensors.torch import save_model

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rank, world_size = world()
    rng = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        rng["cuda"] = torch.cuda.get_rng_state_all()
    torch.save(rng, folder / f"rng-{rank}.pt.part")
    os.replace(folder / f"rng-{rank}.pt.part", folder / f"rng-{rank}.pt")
    if rank == 0:
        save_model(model, str(folder / (WEIGHTS_FILE + ".part")))
        state = {
            "step": step,
            "history": list(history),
            "optimizer": optimizer.state_dict(),
            "world_size": world_size,
        }
        torch.save(state, folder / (STATE_FILE + ".part"))
        os.replace(folder / (WEIGHTS_FILE + ".part"), folder / WEIGHTS_FILE)
        os.replace(folder / (STATE_FILE + ".part"), folder / STATE_FILE)
    if world_size > 1:
        dist.barrier()  # nobody goes on before the checkpoint is complete


def load_checkpoint(
    folder: str | Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
) -> tuple[int, list[float]]:
    """Load what :func:`save_checkpoint` wrote into ``model`` (and ``optimizer``);
    restore this rank's random state. Returns (steps done, loss history)."""
    from safetensors.torch import load_model

    folder = Path(folder)
    if not (folder / STATE_FILE).is_file() or not (folder / WEIGHTS_FILE).is_file():
        raise ValueError(
            f"checkpoint folder {str(folder)!r} holds no {WEIGHTS_FILE} and {STATE_FILE}"
        )
    device = next(model.parameters()).device
    load_model(model, str(folder / WEIGHTS_FILE), device=str(device))
    state = torch.load(folder / STATE_FILE, map_location=device, weights_only=True)
    if optimizer is not None:
        optimizer.load_state_dict(state["optimizer"])
    rank, _ = world()
    rng_file = folder / f"rng-{rank}.pt"
    if rng_file.is_file():
        rng = torch.load(rng_file, weights_only=True)
        torch.set_rng_state(rng["cpu"])
        if "cuda" in rng and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(rng["cuda"])
    return int(state["step"]), [float(v) for v in state["history"]]
