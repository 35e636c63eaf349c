"""A task written as text (chapter 10, section 9): T5 reads an ATIS query and writes its
intent as words ("ground service", "flight airfare"), fine-tuned with the loss it was
pre-trained with and no new head. The data, the exact-match score (one teacher-forced
pass instead of a decoding loop) and the fine-tuning run that chapter 10 and
``benchmarks/ch10_intents.py`` share."""

from __future__ import annotations

import copy
import statistics
from collections.abc import Sequence

import torch

from . import batching, data, finetune, masks, seq2seq, t5, vocab

__all__ = [
    "SPELLED",
    "intent_text",
    "intent_pairs",
    "exact",
    "accuracy",
    "fine_tune",
    "encoder_features",
]

SPELLED = {"no": "number", "quantity": "how many"}  # label words ATIS's text lacks


def intent_text(label: str) -> str:
    """``'atis_ground_service'`` -> ``'ground service'``; two intents joined by ``#``:
    both, in order."""
    if not label.startswith("atis_"):
        raise ValueError(f"an ATIS intent starts with 'atis_', got {label!r}")
    parts = [part.removeprefix("atis_").split("_") for part in label.split("#")]
    return " ".join(SPELLED.get(w, w) for part in parts for w in part)


def intent_pairs(
    words: vocab.Vocab, eos: int, split: str
) -> tuple[list[list[int]], list[list[int]]]:
    """ATIS's ``split`` as T5's (source, target) id lists: each query with a full stop
    and ``eos``, its intent in words with ``eos``."""
    queries = data.load_atis(split)
    sources = [words.encode([*q, "."]) + [eos] for q in queries.sentences]
    targets = [words.encode(intent_text(i).split()) + [eos] for i in queries.intents]
    return sources, targets


def exact(
    model: t5.T5,
    sources: Sequence[Sequence[int]],
    targets: Sequence[Sequence[int]],
    batch_size: int = 256,
) -> list[bool]:
    """For every pair: would greedy decoding write exactly ``target`` (its end token
    included)? It does when, fed the target's own prefix (teacher forcing), the model's
    argmax is right at every position: its first wrong argmax would be greedy's first
    mistake. Shapes: N pairs -> N booleans."""
    if len(sources) != len(targets):
        raise ValueError(
            f"sources and targets must pair up, got {len(sources)} and {len(targets)}"
        )
    pad = model.config.pad_id
    if any(pad in t for t in targets):
        raise ValueError(f"targets must not hold the pad id {pad}: it marks padding")
    batches = [
        (batching.pad_sequences(sources[i : i + batch_size], pad)[0],  # (b, S)
         batching.pad_sequences(targets[i : i + batch_size], pad)[0])  # (b, T)
        for i in range(0, len(sources), batch_size)
    ]  # fmt: skip
    truth, argmax, _ = t5.target_predictions(model, batches, lambda t: t != pad)
    lengths = [len(t) for t in targets]
    return [bool(ok.all()) for ok in (argmax == truth).split(lengths)]


def accuracy(model: t5.T5, pairs: tuple[Sequence, Sequence]) -> float:
    """The share of (sources, targets) whose target ``model`` writes exactly."""
    return float(statistics.mean(exact(model, *pairs)))


def fine_tune(
    model: t5.T5,
    pairs: tuple[Sequence, Sequence],
    steps: int,
    lr: float,
    batch_size: int,
    seed: int = 0,
    keep_at: Sequence[int] = (),
) -> tuple[t5.T5, dict[int, dict[str, torch.Tensor]]]:
    """A copy of ``model`` fine-tuned on ``pairs`` with ``T5.loss`` by chapter 12's
    recipe (``finetune.fine_tune``: AdamW, warm-up, linear decay, clipping; the token
    embeddings trained too); ``model`` itself is left as it was. Returns the tuned
    copy (eval mode) and a copy of its weights after each update number in
    ``keep_at`` (1-based), to choose the length on a dev split afterwards."""
    bad = [s for s in keep_at if not 1 <= s <= steps]
    if bad:
        raise ValueError(f"keep_at must lie in 1..steps={steps}, got {bad}")
    tuned, snapshots = copy.deepcopy(model), {}
    batches = seq2seq.PairBatches(*pairs, batch_size, model.config.pad_id, seed=seed)

    def keep(step: int, loss: float) -> None:
        if step + 1 in keep_at:
            snapshots[step + 1] = copy.deepcopy(tuned.state_dict())

    finetune.fine_tune(
        tuned, batches, steps, lr, on_step=keep, seed=seed,
        loss_fn=lambda m, b: m.loss(*b), freeze_token_embeddings=False,
    )  # fmt: skip
    return tuned.eval(), snapshots


@torch.no_grad()
@torch.no_grad()
def encoder_features(
    model: t5.T5, sources: Sequence[Sequence[int]], batch_size: int = 256
) -> torch.Tensor:
    """The mean of the encoder's output vectors over each source's tokens, in eval mode
    (restored after) and without gradients: frozen features for a linear head, the
    baseline that gives the encoder a new head instead of letting the decoder write.
    Sources are encoded in batches of similar length (less padding), the rows returned
    in the sources' order. Shapes: N sources -> (N, d_model), on the CPU."""
    was_training, device = model.training, model.tok_emb.weight.device
    model.eval()
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    out = []
    for i in range(0, len(order), batch_size):
        src, _ = batching.pad_sequences(
            [sources[j] for j in order[i : i + batch_size]], model.config.pad_id
        )
        memory, mask = model.encode(src.to(device))  # (b, S, d), (b, 1, 1, S)
        out.append(masks.masked_mean(memory, mask[:, 0, 0]).cpu())  # (b, d)
    model.train(was_training)
    return torch.cat(out)[torch.tensor(order).argsort()]  # (N, d), the sources' order
