"""Chapter 12's too-large learning rate: the pre-trained arm fine-tuned at ten times its
chosen rate, beside its chosen rate and the scratch arm (run live in the chapter's full
profile, once by ``benchmarks/ch12_large_rate.py`` for the quick one).

What a run is recorded as (:func:`record_run`: its curves, its dev answers, how far
its encoder's weights moved, what its sentence embeddings still tell about ATIS
intents, read on :func:`intent_sets`), the whole result (:func:`measure`, the dict the
benchmark commits) and its settings checked against a page's (:func:`check_result`);
how the run failed (:func:`failure_kind`, from :func:`tail_loss`) and what the intent
readings can show (:func:`forgetting_words`); the few-label sweep's own runs at that
rate (:func:`sweep_runs_at`, :func:`sweep_words`); the readings as a table, as glue
values and as a figure.

A result is a dict: ``settings`` (``seed``, ``factor``, ``n_dev``, ``n_ref``,
``n_probes``, ...), ``before`` (the pre-trained encoder's ``intent_1nn`` and
``intent_probe``), ``top_intent``, ``intent_majority`` and ``runs`` (``"chosen
rate"``, ``"large rate"``, ``"scratch"``: each a :func:`record_run` dict).
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Sequence

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from torch import nn

from . import data, metrics, plotting, probe, training_diagnostics
from .finetune import ClassifierRun
from .tokenizer import WordPiece

__all__ = [
    "N_REF",
    "N_PROBES",
    "intent_sets",
    "record_run",
    "measure",
    "check_result",
    "tail_loss",
    "failure_kind",
    "forgetting_words",
    "readings",
    "readings_table",
    "settings_words",
    "where_words",
    "cpu_words",
    "sweep_runs_at",
    "sweep_words",
    "plot_runs",
]

N_REF, N_PROBES = 300, 200  # ATIS training queries read as reference, test queries
Intents = tuple[tuple[list[str], list[str]], tuple[list[str], list[str]]]
# the settings a committed result must share with the page that reads it
SHARED = ("n_labels", "batch_size", "max_len", "eval_len")


def intent_sets(n_ref: int = N_REF, n_probes: int = N_PROBES) -> Intents:
    """ATIS's first ``n_ref`` training queries and first ``n_probes`` test queries, each
    as (texts, intents): the ``reference`` and ``held_out`` of
    :func:`probe.embedding_accuracy`."""
    if n_ref < 1 or n_probes < 1:
        raise ValueError(f"n_ref and n_probes must be >= 1, got {n_ref}, {n_probes}")
    out = []
    for split, n in (("train", n_ref), ("test", n_probes)):
        d = data.load_atis(split)
        out.append(([" ".join(q) for q in d.sentences[:n]], list(d.intents[:n])))
    return out[0], out[1]


def _majority(intents: Intents) -> tuple[str, float]:
    """The reference queries' commonest intent, and its accuracy on the held-out ones."""
    (_, ref), (_, held) = intents
    top = Counter(ref).most_common(1)[0][0]
    return top, metrics.accuracy(held, [top] * len(held))


def record_run(
    run: ClassifierRun,
    pred: Sequence[int],
    dev_labels: Sequence[int],
    lr: float,
    reference: nn.Module | None = None,
    tok: WordPiece | None = None,
    intents: Intents | None = None,
) -> dict:
    """One fine-tuning run as the result records it: ``lr``, ``steps``, ``losses``,
    ``grad_norms``, the ``dev_accuracy`` of its (N,) dev predictions ``pred`` and
    ``dev_top_share`` (the share given the most common answer); given the encoder it
    started from (``reference``, with ``tok`` and ``intents``), also ``drift``
    (:func:`training_diagnostics.weight_drift`) and its encoder's ATIS intent
    readings ``intent_1nn`` and ``intent_probe`` (:func:`probe.embedding_accuracy`)."""
    if len(pred) != len(dev_labels) or not pred:
        raise ValueError(
            f"pred must give one answer per dev label, got {len(pred)} for "
            f"{len(dev_labels)}"
        )
    record = {
        "lr": lr,
        "steps": len(run.losses),
        "losses": run.losses,
        "grad_norms": run.grad_norms,
        "dev_accuracy": metrics.accuracy(dev_labels, pred),
        "dev_top_share": Counter(pred).most_common(1)[0][1] / len(pred),
    }
    if reference is not None:
        if tok is None or intents is None:
            raise ValueError("reference needs tok and intents to read the encoder")
        encoder = run.model.encoder
        knn, lin = probe.embedding_accuracy(encoder, tok, *intents)
        drift = training_diagnostics.weight_drift(encoder, reference)
        record.update(drift=drift, intent_1nn=knn, intent_probe=lin)
    return record


def measure(
    runs: dict[str, tuple[ClassifierRun, Sequence[int], float]],
    dev_labels: Sequence[int],
    reference: nn.Module,
    tok: WordPiece,
    intents: Intents,
    seed: int,
    factor: float,
    plain: Sequence[str] = ("scratch",),
) -> dict:
    """The result of ``runs`` ({name: (run, dev predictions, peak rate)}), in the
    committed result's shape: every run by :func:`record_run`, read against the
    pre-trained ``reference`` encoder except those named in ``plain`` (the scratch
    arm's encoder did not start from it), and the reference's own readings as
    ``before``."""
    if not runs:
        raise ValueError("runs must name at least one run, got none")
    (queries, _), (probes, _) = intents
    knn, lin = probe.embedding_accuracy(reference, tok, *intents)
    top, majority = _majority(intents)
    return {
        "settings": {"seed": seed, "factor": factor, "n_dev": len(dev_labels),
                     "n_ref": len(queries), "n_probes": len(probes)},
        "before": {"intent_1nn": knn, "intent_probe": lin},
        "top_intent": top,
        "intent_majority": majority,
        "runs": {
            name: record_run(run, pred, dev_labels, lr,
                             *(() if name in plain else (reference, tok, intents)))
            for name, (run, pred, lr) in runs.items()
        },
    }  # fmt: skip


def check_result(
    result: dict, settings: dict, seed: int, factor: float, intents: Intents
) -> None:
    """Raise a ValueError unless a committed ``result`` ran the page's recipe
    (``settings``' n_labels, batch_size, max_len, eval_len), ``seed`` and ``factor``,
    and read the same ATIS ``intents``."""
    got = result["settings"]
    (queries, _), (probes, _) = intents
    want = {**{k: settings[k] for k in SHARED}, "seed": seed, "factor": factor,
            "n_ref": len(queries), "n_probes": len(probes)}  # fmt: skip
    differ = {k: (got.get(k), v) for k, v in want.items() if got.get(k) != v}
    if result["top_intent"] != _majority(intents)[0]:
        differ["top_intent"] = (result["top_intent"], _majority(intents)[0])
    if differ:
        raise ValueError(f"result differs from the page's settings: {differ}")


def tail_loss(losses: Sequence[float]) -> float:
    """The mean loss of the last quarter of the updates (rounded up: at least one)."""
    if not losses:
        raise ValueError("losses must hold at least one update, got none")
    return statistics.mean(losses[-math.ceil(len(losses) / 4) :])


def failure_kind(tail: float, top_share: float) -> str:
    """How a two-class fine-tuning run failed, from ``tail``, the mean loss of its last
    quarter of updates (against ln 2, the loss of a 50/50 guess), and ``top_share``,
    the share of the dev sentences given the most common answer: divergence, a
    collapse to a constant, or neither."""
    if not math.isfinite(tail) or tail > 2 * math.log(2):
        return "divergence: the loss blew up and stayed above twice ln 2"
    if top_share > 0.95 and tail > math.log(2) - 0.1:
        return (
            "a collapse to a constant: the loss went back to about ln 2 and the model "
            "gives the same answer to almost every sentence"
        )
    if tail < math.log(2) - 0.1:
        return "neither divergence nor a collapse: the loss came down, to a worse model"
    return (
        "neither divergence nor a collapse: the loss stays near ln 2, but the answers "
        "still vary with the sentence"
    )


def forgetting_words(
    knn_before: float,
    probe_before: float,
    probe_after: dict[str, float],
    majority: float,
    n_probes: int,
) -> dict[str, str]:
    """What the ATIS intent readings can show about forgetting, as glue text: ``noise``
    (two standard errors of the probe's accuracy before fine-tuning over ``n_probes``
    test queries), ``knn_floor`` (the 1-NN reading against the majority intent's
    accuracy ``majority``), ``probe_room`` (the probe's), and for each name of
    ``probe_after`` (the probe's accuracy after a run) ``knn_<name>``: within the noise
    of the score before, or beyond it (the noise of a difference of two scores,
    √2 times one score's)."""
    noise = 2 * (probe_before * (1 - probe_before) / n_probes) ** 0.5
    gap = noise * 2**0.5  # two standard errors of a difference of two such scores
    words = {
        "noise": f"{noise:.3f}",
        "knn_floor": "no better than always answering it"
        if knn_before <= majority + noise
        else "above it by more than the noise",
        "probe_room": "it stands above the majority by more than the noise, so a loss "
        f"of more than about {gap:.2f} would show; a smaller one would not"
        if probe_before > majority + noise
        else "it does not stand above the majority by more than the noise either, so "
        "neither reading can show forgetting",
    }
    for name, k in probe_after.items():
        if k < probe_before - gap:
            words[f"knn_{name}"] = "below the score before by more than the noise"
        elif k > probe_before + gap:
            words[f"knn_{name}"] = "above the score before by more than the noise"
        else:
            words[f"knn_{name}"] = "within the noise of the score before"
    return words


def readings(result: dict) -> dict[str, float]:
    """The result's numbers as the chapter glues them: the intent probe before
    (``k0``), after the chosen rate (``k_ok``) and the large one (``k_big``), the
    1-NN reading before (``k0_knn``), the majority intent's accuracy, the weight drift
    of each rate (``d_ok``, ``d_big``), the large rate's dev accuracy (``wild_acc``) and
    the tail loss of each rate (``tail_ok``, ``tail_big``)."""
    ok, big = result["runs"]["chosen rate"], result["runs"]["large rate"]
    before = result["before"]
    return {
        "k0": before["intent_probe"], "k_ok": ok["intent_probe"],
        "k_big": big["intent_probe"], "k0_knn": before["intent_1nn"],
        "intent_majority": result["intent_majority"], "d_ok": ok["drift"],
        "d_big": big["drift"], "wild_acc": big["dev_accuracy"],
        "tail_big": tail_loss(big["losses"]), "tail_ok": tail_loss(ok["losses"]),
    }  # fmt: skip


def readings_table(result: dict) -> str:
    """The majority intent, then the drift and intent readings before fine-tuning and
    after each rate, then the large rate's dev accuracy: lines to print."""
    ok, big = result["runs"]["chosen rate"], result["runs"]["large rate"]
    st = result["settings"]
    lines = [
        f"majority intent ({result['top_intent']}) of the {st['n_ref']} reference "
        f"queries: {result['intent_majority']:.3f} of {st['n_probes']} test queries"
    ]
    for rate, r in (("pre-trained", {"drift": 0.0, **result["before"]}),
                    (f"lr {ok['lr']:g}", ok), (f"lr {big['lr']:g}", big)):  # fmt: skip
        lines.append(
            f"{rate:>12}: weight drift {r['drift']:.3f}, ATIS intent 1-NN "
            f"{r['intent_1nn']:.3f}, linear probe {r['intent_probe']:.3f}"
        )
    lines.append(
        f"dev accuracy at lr {big['lr']:g}: {big['dev_accuracy']:.3f} "
        f"({st['n_dev']} sentences)"
    )
    return "\n".join(lines)


def settings_words(result: dict) -> dict[str, str]:
    """The result's settings as the chapter glues them: ``big_factor``, ``big_steps``,
    ``big_seed``, ``n_big_dev``, ``n_ref``, ``n_probes`` and ``top_intent`` (without
    ATIS's ``atis_`` prefix)."""
    st = result["settings"]
    return {
        "big_factor": f"{st['factor']:g}",
        "big_steps": str(result["runs"]["large rate"]["steps"]),
        "big_seed": str(st["seed"]),
        "n_big_dev": str(st["n_dev"]),
        "n_ref": str(st["n_ref"]),
        "n_probes": str(st["n_probes"]),
        "top_intent": result["top_intent"].removeprefix("atis_"),
    }


def where_words(live: bool, result: dict) -> str:
    """Where the runs of ``result`` were made: on the page (``live``) or read from the
    committed result, and on how many dev sentences they were scored."""
    n_dev = result["settings"]["n_dev"]
    if live:
        return "The runs are made here, on every dev sentence."
    return (
        "The quick profile does not make these runs: it reads them from the committed "
        "result of `benchmarks/ch12_large_rate.py`, which ran the code of this section "
        f"once (the full profile runs it here), and scores them on all {n_dev} dev "
        "sentences."
    )


def cpu_words(result: dict) -> str:
    """Where a committed result's runs came from and the CPU-minutes they took (the
    ``cpu_seconds`` of its runs), to follow a list of what a page read."""
    minutes = sum(r.get("cpu_seconds", 0) for r in result["runs"].values()) / 60
    return (
        "; the too-large rate's runs, with the chosen rate's and the scratch arm's "
        "beside them, come from `benchmarks/ch12_large_rate.py` (about "
        f"{minutes:.0f} CPU-minutes, committed)"
    )


def sweep_runs_at(
    few: dict, lr: float, arm: str = "pre-trained"
) -> dict[str, dict | None]:
    """The few-label sweep's selection runs (``few``, see :mod:`few_labels`) of ``arm``
    at the peak rate ``lr``, by head (``None`` where the sweep did not run it)."""
    if arm not in ("pre-trained", "scratch"):
        raise ValueError(f"arm must be 'pre-trained' or 'scratch', got {arm!r}")
    return {
        head: next((r for r in few["selection_runs"][f"{arm}/{head}"]
                    if math.isclose(r["lr"], lr)), None)
        for head in ("cls", "mean")
    }  # fmt: skip


def sweep_words(run: dict | None, n_dev: int, majority: float) -> str:
    """One of :func:`sweep_runs_at`'s runs in words: its updates and seed, its dev
    accuracy over ``n_dev`` sentences and its selection accuracy, against the majority
    class's dev accuracy ``majority``."""
    if run is None:
        return "the sweep did not run this rate"
    return (
        f"the sweep's own run of this rate and head, with the same {run['steps']} "
        f"updates (seed {run['seed']}), scored {run['dev_accuracy']:.3f} on all "
        f"{n_dev} dev sentences ({run['selection_accuracy']:.3f} on the selection "
        f"split), against {majority:.3f} for the majority"
    )


def plot_runs(result: dict) -> Figure:
    """Two panels over the updates of the chosen rate, the scratch arm and the large
    rate: the training loss (with ln 2, a 50/50 guess) and the gradient norm before
    clipping on a log axis (with the clipping threshold 1)."""
    fig, axes = plt.subplots(1, 2, figsize=plotting.WIDE)
    for name in ("chosen rate", "scratch", "large rate"):
        r = result["runs"][name]
        label = f"{'scratch' if name == 'scratch' else 'pre-trained'}, lr {r['lr']:g}"
        axes[0].plot(r["losses"], label=label)
        axes[1].semilogy(r["grad_norms"], label=label)
    axes[0].axhline(math.log(2), color="grey", ls=":", lw=1, label="ln 2 (50/50)")
    axes[1].axhline(1.0, color="grey", ls="--", lw=1, label="clip at 1")
    axes[0].set(xlabel="update", ylabel="training loss", title="training loss")
    axes[1].set(xlabel="update", ylabel="gradient norm before clipping",
                title="gradient norm")  # fmt: skip
    for ax in axes:
        ax.legend(fontsize=8)
    return fig
