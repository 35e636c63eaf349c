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

from . import batching, data, finetune, masks, probe, report, seq2seq, t5, vocab

__all__ = [
    "SPELLED",
    "intent_text",
    "intent_pairs",
    "exact",
    "accuracy",
    "fine_tune",
    "encoder_features",
    "head_accuracy",
    "write",
    "choose_length",
    "dev_rising",
    "intent_sweep_words",
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


def head_accuracy(
    model: t5.T5,
    train: tuple[Sequence[Sequence[int]], Sequence[str]],
    test: tuple[Sequence[Sequence[int]], Sequence[str]],
) -> tuple[float, int]:
    """A linear head on ``model``'s frozen encoder (:func:`encoder_features`, then
    :func:`probe.probe_accuracy`), one class per label of ``train``'s (sources,
    labels), scored on ``test``'s (a label unseen in training counts as wrong):
    (its test accuracy, its number of weights and biases)."""
    if len(train[0]) != len(train[1]) or len(test[0]) != len(test[1]):
        raise ValueError(
            f"train and test must pair sources with labels, got {len(train[0])} "
            f"sources for {len(train[1])} labels and {len(test[0])} for {len(test[1])}"
        )
    classes = sorted(set(train[1]))
    index = {c: i for i, c in enumerate(classes)}
    acc, head = probe.probe_accuracy(
        encoder_features(model, train[0]), [index[c] for c in train[1]],
        encoder_features(model, test[0]), [index.get(c, -1) for c in test[1]],
    )  # fmt: skip
    return acc, sum(p.numel() for p in head.parameters())


def write(
    model: t5.T5, sources: Sequence[Sequence[int]], max_new_tokens: int = 8
) -> list[list[int]]:
    """What ``model`` writes for each source by greedy decoding (:meth:`t5.T5.generate`,
    the sources padded into one batch), cut after its first end token (a row without
    one keeps all ``max_new_tokens``). The model must be in eval mode. Shapes: N
    sources -> N id lists."""
    pad, eos = model.config.pad_id, model.config.eos_id
    src, _ = batching.pad_sequences(sources, pad)  # (N, S_max)
    rows = model.generate(src.to(model.tok_emb.weight.device), max_new_tokens).tolist()
    return [w[: w.index(eos) + 1] if eos in w else w for w in rows]


def choose_length(
    runs: dict[int, tuple[t5.T5, dict[int, dict[str, torch.Tensor]]]],
    dev: tuple[Sequence, Sequence],
    checks: Sequence[int],
) -> tuple[int, dict[int, float]]:
    """Choose how long to fine-tune, on dev: ``runs`` maps a seed to what
    :func:`fine_tune` returned with ``keep_at=checks``; for every check, every tuned
    model is loaded with its weights after that many updates and scored on ``dev``
    (:func:`accuracy`), the mean over the seeds kept. Every tuned model is left with
    the weights of the chosen check (the best mean; the first among ties). Returns the
    chosen number of updates and {check: mean dev accuracy}."""
    if not runs or not checks:
        raise ValueError("choose_length needs at least one run and one check")
    dev_acc = {}
    for step in checks:
        for tuned, snapshots in runs.values():
            tuned.load_state_dict(snapshots[step])
        dev_acc[step] = statistics.mean(accuracy(t, dev) for t, _ in runs.values())
    chosen = max(dev_acc, key=dev_acc.get)
    for tuned, snapshots in runs.values():
        tuned.load_state_dict(snapshots[chosen])
    return chosen, dev_acc


def dev_rising(sweep: dict, checks: Sequence[int]) -> bool:
    """In a sweep of ``benchmarks/ch10_intents.py`` (its ``mean_dev`` {"lr@steps":
    mean dev accuracy} and ``chosen_lr``): is the mean dev accuracy at the chosen
    rate still rising between the last two lengths of ``checks``?"""
    at_rate = {s: sweep["mean_dev"][f"{sweep['chosen_lr']:g}@{s}"] for s in checks}
    return at_rate[checks[-1]] > at_rate[checks[-2]]


def intent_sweep_words(sweep: dict) -> dict[str, str]:
    """A sweep of ``benchmarks/ch10_intents.py`` as chapter 10's text quotes it, by
    glue name: the pre-trained T5's test accuracy at the rate and length chosen on dev
    (percent, mean ± std and range over the seeds), the number of seeds, its worst
    seed's margin over the majority class (points), and the same from scratch."""
    pre = sweep["test_at_chosen"]  # the pre-trained T5, one value per seed
    scratch = sweep["by_init"]["scratch"]["test_at_chosen"]
    return {
        "bench_intent_acc": report.mean_spread([100 * a for a in pre], "{:.1f}"),
        "bench_intent_seeds": str(len(pre)),
        "bench_intent_margin": f"{100 * (min(pre) - sweep['majority_test']):.1f}",
        "scratch_acc": report.mean_spread([100 * a for a in scratch], "{:.1f}"),
    }
