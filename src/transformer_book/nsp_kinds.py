"""Chapter 11's next-sentence-prediction experiment on three kinds of text: the corpus
(:data:`TEXT_KINDS`, :func:`kinds_corpus`: film reviews, flight queries, requests to a
voice assistant), two surface differences between the kinds (:func:`kinds_lines`), and
the committed runs of ``benchmarks/ch11_nsp_kinds.py`` read back
(:func:`nsp_kinds_summary`), as tables (:func:`nsp_kinds_table`) and as the chapter
quotes them (:func:`nsp_kinds_words`). The pairs and the scores live with the
objective and the recipe (:func:`masked_lm.nsp_pairs_by_kind`,
:func:`pretraining.nsp_by_kind`).
"""

from __future__ import annotations

import random
import statistics

from . import data, report

__all__ = [
    "TEXT_KINDS",
    "kinds_corpus",
    "kinds_lines",
    "nsp_kinds_summary",
    "nsp_kinds_table",
    "nsp_kinds_words",
]


#: chapter 11's three kinds of short English text: rt-polarity's film reviews, ATIS's
#: flight queries and SNIPS's voice-assistant requests
TEXT_KINDS = ("reviews", "flights", "assistant")


def kinds_corpus(
    n_train: int, n_heldout: int, seed: int = 0
) -> dict[str, dict[str, list[str]]]:
    """Texts of the three :data:`TEXT_KINDS`, for next-sentence prediction whose
    negatives can change the kind of text: split -> kind -> texts, ``n_train``
    training texts and ``n_heldout`` dev and test texts of each kind, drawn without
    replacement (``seed``) from each dataset's own split (the reviews:
    :func:`data.review_split`)."""
    rng = random.Random(seed)
    reviews = data.review_split(seed=0)
    splits = ("train", "dev", "test")
    sources = {
        "reviews": {k: reviews[k][0] for k in splits},
        "flights": {k: _queries(data.load_atis(k)) for k in splits},
        "assistant": {k: _queries(data.load_snips(k)) for k in splits},
    }
    corpus: dict[str, dict[str, list[str]]] = {k: {} for k in splits}
    for kind in TEXT_KINDS:
        for split, n in (("train", n_train), ("dev", n_heldout), ("test", n_heldout)):
            texts = sources[kind][split]
            if not 0 < n <= len(texts):
                raise ValueError(
                    f"{kind} {split} holds {len(texts)} texts; asked for {n}"
                )
            corpus[split][kind] = rng.sample(texts, n)
    return corpus


def _queries(split: data.SlotIntentSplit) -> list[str]:
    return [" ".join(words) for words in split.sentences]


def nsp_kinds_summary(result: dict) -> dict:
    """The committed runs of ``benchmarks/ch11_nsp_kinds.py`` read back. Per run
    length (``steps``), the seeds' values of BERT's arm (negatives from any text):
    ``dev_nsp`` and ``test_nsp``, NSP accuracy on dev and test pairs drawn like its
    training's; on test, the balanced ``kind`` and ``coherence`` tests
    (:func:`pretraining.kind_and_coherence`) and ``coherence_auc``
    (:func:`pretraining.nsp_by_kind`); the same three of the control arm (negatives
    from the same kind of text) as ``control_kind``, ``control_coherence`` and
    ``control_coherence_auc``, and its ``control_test_nsp``. ``chosen``, the run
    length of BERT's arm with the best mean dev NSP accuracy; at it, its per-seed test
    values ``is_next_share``, ``mlm_loss`` and ``unigram_mlm_loss`` (each with
    ``_at_chosen``), the kind test minus the coherence test (``gap_at_chosen``) and
    the unigram's MLM loss minus the model's (``mlm_margin_at_chosen``)."""
    arms: dict[str, dict[int, list[dict]]] = {"any": {}, "same kind": {}}
    for run in result["runs"]:
        arm = arms[run.get("negatives", "any")]
        arm.setdefault(run["steps"], []).append(run)
    if not arms["any"]:
        raise ValueError("result holds no runs with negatives from any text")

    def per_seed(arm: str, read) -> dict[int, list[float]]:
        return {steps: [read(r) for r in at] for steps, at in arms[arm].items()}

    summary = {
        "dev_nsp": per_seed("any", lambda r: r["dev"]["natural"]["nsp_accuracy"]),
        "test_nsp": per_seed("any", lambda r: r["test"]["natural"]["nsp_accuracy"]),
    }
    summary["control_test_nsp"] = per_seed(
        "same kind", lambda r: r["test"]["natural"]["nsp_accuracy"]
    )
    for arm, prefix in (("any", ""), ("same kind", "control_")):
        summary[prefix + "kind"] = per_seed(arm, lambda r: r["test"]["kind"])
        summary[prefix + "coherence"] = per_seed(arm, lambda r: r["test"]["coherence"])
        summary[prefix + "coherence_auc"] = per_seed(
            arm, lambda r: r["test"]["auc"]["same kind"]
        )
    dev = summary["dev_nsp"]
    chosen = max(dev, key=lambda s: sum(dev[s]) / len(dev[s]))
    at_chosen = arms["any"][chosen]
    for key in ("is_next_share", "mlm_loss", "unigram_mlm_loss"):
        summary[key + "_at_chosen"] = [r["test"]["natural"][key] for r in at_chosen]
    kind, coherence = summary["kind"][chosen], summary["coherence"][chosen]
    unigram, mlm = summary["unigram_mlm_loss_at_chosen"], summary["mlm_loss_at_chosen"]
    return {
        **summary,
        "chosen": chosen,
        "seeds": [r["seed"] for r in at_chosen],
        "gap_at_chosen": [k - c for k, c in zip(kind, coherence)],
        "mlm_margin_at_chosen": [u - m for u, m in zip(unigram, mlm)],
    }


def kinds_lines(texts_by_kind: dict[str, list[str]]) -> list[str]:
    """Two surface differences between kinds of text, one line per kind: the mean
    words a text and the share that end in a full stop."""
    lines = []
    for kind, texts in texts_by_kind.items():
        words = statistics.mean(len(t.split()) for t in texts)
        stops = statistics.mean(t.rstrip().endswith(".") for t in texts)
        lines.append(
            f"{kind:>9}: {words:4.1f} words a text; {stops:4.0%} end in a full stop"
        )
    return lines


_NSP_COLUMNS = ("dev_nsp", "test_nsp", "kind", "coherence", "coherence_auc")


def nsp_kinds_table(summary: dict) -> str:
    """:func:`nsp_kinds_summary` as two tables, mean ± sd over the seeds by run length:
    BERT's arm (dev and test NSP, the kind and coherence tests, the coherence AUC) with
    the length dev chose, then the control (test NSP and the three tests)."""
    cells = "{:5} | " + " | ".join(["{}"] * 5)
    lines = ["negatives from any text (BERT's recipe)",
             "steps | dev NSP       | test NSP      | kind test     | coherence     "
             "| its AUC"]  # fmt: skip
    for steps in summary["dev_nsp"]:
        values = [report.mean_sd(summary[k][steps]) for k in _NSP_COLUMNS]
        lines.append(cells.format(steps, *values))
    lines += [f"chosen on dev: {summary['chosen']} steps; seeds {summary['seeds']}",
              "negatives from the same kind of text (the control)",
              "steps | test NSP      | kind test     | coherence     | its AUC"]  # fmt: skip
    for steps in summary["control_kind"]:
        keys = ["control_" + k for k in _NSP_COLUMNS[1:]]
        values = [report.mean_sd(summary[k][steps]) for k in keys]
        lines.append(cells.rsplit(" | ", 1)[0].format(steps, *values))
    return "\n".join(lines)


def nsp_kinds_words(summary: dict, result: dict) -> dict[str, str]:
    """What chapter 11's prose quotes from :func:`nsp_kinds_summary` (and the committed
    ``result``'s CPU time), by glue name: the run length chosen and the longest, the
    seeds, BERT's arm at the chosen length (test NSP, kind and coherence tests,
    coherence AUC, the gap between the tests, the MLM margin over the unigram, the
    share of "is next" pairs), the control's test NSP and coherence AUC, and BERT's arm
    minus the control in coherence AUC (:func:`report.compared`, unpaired)."""
    chosen = summary["chosen"]
    control_auc = summary["control_coherence_auc"][chosen]
    diff, sd, verdict = report.compared(control_auc, summary["coherence_auc"][chosen])
    cpu = sum(r["cpu_seconds"] for r in result["runs"]) / 60
    words = {
        "nsp_cpu": f"{cpu:.0f}",
        "nsp_steps": f"{chosen:,}",
        "nsp_longest": f"{max(summary['dev_nsp']):,}",
        "nsp_seeds": str(len(summary["seeds"])),
        "nsp_always": f"{statistics.mean(summary['is_next_share_at_chosen']):.1%}",
        "nsp_gap": report.mean_sd(summary["gap_at_chosen"]),
        "nsp_mlm_margin": report.mean_sd(summary["mlm_margin_at_chosen"]),
        "nsp_control_auc": report.mean_sd(control_auc),
        "nsp_control_nsp": report.mean_sd(summary["control_test_nsp"][chosen]),
        "nsp_auc_diff": f"{diff:+.3f}",
        "nsp_auc_sd": f"{sd:.3f}",
        "nsp_auc_verdict": verdict,
    }
    for name in ("test_nsp", "kind", "coherence", "coherence_auc"):
        words[f"nsp_{name}"] = report.mean_sd(summary[name][chosen])
    return words
