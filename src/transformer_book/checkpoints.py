"""The book's own trained weights: saved with a card, loaded only if they are intact.

Some lessons need a model trained longer than a chapter can wait (Part III's pre-trained
BERT and T5, for instance). The book trains those once, with a recipe kept in the
repository, and ships the result as a *checkpoint*: a folder ``NAME/`` with

- ``model.safetensors``: the weights (fp16 by default, to keep the repository small);
  for a model fine-tuned on top of a pre-trained base that its constructor loads
  itself (chapter 13's teacher on all-MiniLM-L6-v2), only the parameters it trained
  (``stored``: their name prefixes, listed on the card);
- any text files the model needs besides its weights (a tokenizer's ``vocab.txt``),
  each with its sha256 digest on the card;
- ``card.json``: what the weights are and how they came to be — the model's module,
  class and config; the recipe, data and held-out split; steps, tokens, seconds and
  machine; the torch version; the held-out metrics *and the baselines' metrics on the
  same held-out data*; and the sha256 digest of ``model.safetensors``.

:func:`load` rebuilds the model from its card and refuses a weights file whose digest is
not the card's, naming the file and both digests. Nothing here needs a network.
Checkpoints are looked up in ``$TRANSFORMER_BOOK_CHECKPOINTS`` if set, else in the
package's own ``trained/`` folder (package data: a wheel or a Colab install carries them).
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import platform
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import nn

from .data_files import sha256_of

__all__ = [
    "CHECKPOINTS_ENV",
    "SHIPPED",
    "WEIGHTS",
    "CARD",
    "CheckpointError",
    "root",
    "path",
    "save",
    "load",
]

CHECKPOINTS_ENV = "TRANSFORMER_BOOK_CHECKPOINTS"
WEIGHTS, CARD = "model.safetensors", "card.json"
SHIPPED = Path(__file__).resolve().parent / "trained"


class CheckpointError(RuntimeError):
    """A checkpoint is missing, incomplete or not the one its card describes."""


def root() -> Path:
    """Where checkpoints are looked up: ``$TRANSFORMER_BOOK_CHECKPOINTS``, else the
    package's ``trained/`` folder."""
    env = os.environ.get(CHECKPOINTS_ENV)
    return Path(env) if env else SHIPPED


def path(name: str | Path) -> Path:
    """The folder of checkpoint ``name`` (a folder under :func:`root`, or a path), to
    read the files saved beside the weights (``path(name) / "vocab.txt"``). Call
    :func:`load` first: it is the one that verifies them."""
    return Path(name) if Path(name).is_dir() else root() / str(name)


def _spec(model: nn.Module, config: object) -> dict:
    if not dataclasses.is_dataclass(config) or isinstance(config, type):
        raise ValueError(
            f"config must be a dataclass instance, got {type(config).__name__}"
        )
    return {
        "module": type(model).__module__,
        "class": type(model).__qualname__,
        "config_class": type(config).__qualname__,
        "config": dataclasses.asdict(config),
    }


def save(
    model: nn.Module,
    config: object,
    folder: str | Path,
    card: dict | None = None,
    dtype: torch.dtype = torch.float16,
    files: dict[str, str] | None = None,
    stored: Sequence[str] | None = None,
) -> dict:
    """Write ``model``'s weights (as ``dtype``) and its card to ``folder``; return the card.

    ``config`` is the frozen dataclass the model was built from (``type(model)(config)``
    must rebuild it). ``card``: the recipe, data, metrics and baselines to record; the
    model's spec, parameter count, torch version, machine and digest are added here.
    ``files``: text files to write beside the weights (name -> content, e.g. a
    tokenizer's ``vocab.txt``); their digests go on the card and :func:`load` checks them.
    ``stored``: write only the parameters and buffers whose names start with one of
    these prefixes; every other one must be what ``type(model)(config)`` builds (a
    pre-trained base the constructor loads), and this is checked here.
    """
    from safetensors.torch import save_file, save_model

    if not dtype.is_floating_point:
        raise ValueError(f"dtype must be a floating-point dtype, got {dtype}")
    spec = _spec(model, config)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    copy = type(model)(config)  # a CPU copy in the storage dtype; `model` is untouched
    if stored is None:
        copy.load_state_dict(
            {k: v.detach().cpu() for k, v in model.state_dict().items()}
        )
        save_model(copy.to(dtype), str(folder / WEIGHTS))
    else:  # the copy, untouched, is the base the constructor builds
        save_file(_stored_part(model, copy, stored, dtype), str(folder / WEIGHTS))
    digests = {}
    for file, text in sorted((files or {}).items()):
        if file in (WEIGHTS, CARD) or Path(file).name != file:
            raise ValueError(f"files must be plain file names other than {WEIGHTS} "
                             f"and {CARD}, got {file!r}")  # fmt: skip
        (folder / file).write_text(text, encoding="utf-8")
        digests[file] = sha256_of(folder / file)
    full = {
        **(card or {}),
        "model": spec,
        "parameters": sum(p.numel() for p in model.parameters()),
        "dtype": str(dtype).removeprefix("torch."),
        "torch": torch.__version__,
        "machine": platform.machine(),
        "sha256": sha256_of(folder / WEIGHTS),
        **({"files": digests} if digests else {}),
        **({"stored": list(stored)} if stored is not None else {}),
    }
    (folder / CARD).write_text(json.dumps(full, indent=2, sort_keys=True) + "\n")
    return full


def _stored_part(
    model: nn.Module, fresh: nn.Module, stored: Sequence[str], dtype: torch.dtype
) -> dict[str, torch.Tensor]:
    """The state entries of ``model`` under the ``stored`` prefixes, as ``dtype``;
    raises if an entry outside them differs from the freshly built ``fresh``."""
    prefixes = tuple(stored)
    if not prefixes or not all(isinstance(p, str) and p for p in prefixes):
        raise ValueError(f"stored must be non-empty name prefixes, got {stored!r}")
    state, base = model.state_dict(), fresh.state_dict()
    kept = {k: v for k, v in state.items() if k.startswith(prefixes)}
    if not kept:
        raise ValueError(f"stored={list(prefixes)} matches none of the model's names")
    changed = [
        k for k, v in state.items()
        if k not in kept and not torch.equal(v.detach().cpu(), base[k])
    ]  # fmt: skip
    if changed:
        raise ValueError(
            f"{len(changed)} entries outside stored={list(prefixes)} differ from what "
            f"the constructor builds (e.g. {changed[0]!r}): they would be lost"
        )
    out = {}
    for k, v in kept.items():
        v = v.detach().cpu()
        out[k] = (v.to(dtype) if v.is_floating_point() else v).contiguous()
    return out


def _build(spec: dict) -> tuple[nn.Module, object]:
    module = importlib.import_module(spec["module"])
    if not module.__name__.startswith("transformer_book."):
        raise CheckpointError(f"card names a model outside the book: {spec['module']}")
    config = getattr(module, spec["config_class"])(**spec["config"])
    return getattr(module, spec["class"])(config), config


def load(
    name: str | Path, device: torch.device | str = "cpu"
) -> tuple[nn.Module, dict]:
    """The checkpoint ``name`` (a folder under :func:`root`, or a path) as
    ``(model, card)``: an fp32 model in eval mode on ``device``, weights verified."""
    from safetensors.torch import load_file, load_model

    folder = path(name)
    if not (folder / CARD).is_file() or not (folder / WEIGHTS).is_file():
        known = sorted(p.name for p in root().glob("*/") if (p / CARD).is_file())
        raise CheckpointError(
            f"no checkpoint {str(name)!r}: {folder} needs {WEIGHTS} and {CARD} "
            f"(checkpoints in {root()}: {known or 'none'})"
        )
    card = json.loads((folder / CARD).read_text())
    expected = {WEIGHTS: card.get("sha256"), **card.get("files", {})}
    for file, digest in expected.items():
        actual = sha256_of(folder / file) if (folder / file).is_file() else "missing"
        if actual != digest:
            raise CheckpointError(
                f"{folder / file} has sha256 {actual}, but its card says {digest}: "
                f"the file changed after it was trained; retrain it with its recipe "
                f"or restore it"
            )
    model, _ = _build(card["model"])
    if "stored" not in card:
        load_model(model, str(folder / WEIGHTS), strict=True)  # casts to fp32
    else:  # the trained part; the rest is the base the constructor loaded
        weights = load_file(str(folder / WEIGHTS))
        expected = {
            k for k in model.state_dict() if k.startswith(tuple(card["stored"]))
        }
        if set(weights) != expected:
            raise CheckpointError(
                f"{folder / WEIGHTS} should hold the entries under {card['stored']}: "
                f"missing {sorted(expected - set(weights))[:3]}, "
                f"unexpected {sorted(set(weights) - expected)[:3]}"
            )
        model.load_state_dict(weights, strict=False)  # copies (and casts) in place
    return model.to(device).eval(), card
