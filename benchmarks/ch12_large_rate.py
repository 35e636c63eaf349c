"""Chapter 12's too-large learning rate, run once and recorded for the quick profile.

The pre-trained all-MiniLM-L6-v2 arm of ``benchmarks/ch12_few_labels.py``, with the head
and peak rate its committed sweep chose (read from ``ch12_few_labels.json``), is
fine-tuned at that rate and at ``--factor`` times it, seed ``--seed``, by the sweep's
recipe (``finetune.fine_tune_classifier``, the same phrases, batches and updates); the
scratch arm's chosen head and rate run once beside them. Every run records
(``large_rate.record_run``, as chapter 12's full profile does) its loss and
gradient norm at each update and its predictions' accuracy on SST-2's dev sentences,
with the share of them given the most common answer; each pre-trained run also records
how far its encoder's weights moved (``training_diagnostics.weight_drift``) and what
its sentence embeddings still tell about ATIS intents: the intent of the nearest of the
first ``--n-ref`` training queries (1-NN), and a linear probe fitted on their
embeddings, scored on the first ``--n-probes`` test queries (``before``: the
pre-trained encoder). Chapter 12 runs all of it live in its full profile and reads this
result in the quick one. Writes ``benchmarks/results/ch12_large_rate.json`` (one
thread, a few CPU-minutes).

    OMP_NUM_THREADS=1 python benchmarks/ch12_large_rate.py          # the committed run
    python benchmarks/ch12_large_rate.py --n-dev 50 --out /tmp/x.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from ch12_few_labels import ARMS, SETTINGS, phrases, steps_for  # noqa: E402

from transformer_book import (  # noqa: E402
    benchmark,
    data,
    few_labels,
    finetune,
    large_rate,
    metrics,
    minilm_weights,
    probe,
)

FACTOR, SEED, N_REF, N_PROBES = 10, 0, 300, 200


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--factor", type=float, default=FACTOR)
    p.add_argument("--seed", type=int, default=SEED)
    p.add_argument("--n-ref", type=int, default=N_REF)
    p.add_argument("--n-probes", type=int, default=N_PROBES)
    p.add_argument("--n-dev", type=int, default=None, help="first N dev sentences")
    out = ROOT / "benchmarks/results/ch12_large_rate.json"
    p.add_argument("--out", default=str(out))
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    few = benchmark.committed_result("ch12_few_labels.json", ROOT)
    assert all(few["settings"][k] == v for k, v in SETTINGS.items())
    steps = steps_for(few["settings"]["epochs"])
    tok, minilm = (
        minilm_weights.pretrained_tokenizer(),
        minilm_weights.from_pretrained(),
    )
    train, _ = phrases()
    dev = tuple(x[: args.n_dev] for x in data.load_sst2("dev"))
    intents = large_rate.intent_sets(args.n_ref, args.n_probes)
    (queries, ref_intents), (probes, probe_intents) = intents
    top_intent = Counter(ref_intents).most_common(1)[0][0]
    pre_head, pre_lr = few_labels.chosen_head(few, "pre-trained")
    scratch_head, scratch_lr = few_labels.chosen_head(few, "scratch")
    runs = {}
    for name, arm, head, lr in (
        ("chosen rate", "pre-trained", pre_head, pre_lr),
        ("large rate", "pre-trained", pre_head, args.factor * pre_lr),
        ("scratch", "scratch", scratch_head, scratch_lr),
    ):
        start = time.process_time()
        from_scratch, freeze = ARMS[arm]
        ft = finetune.fine_tune_classifier(
            minilm, tok, *train, steps, lr, head, SETTINGS["batch_size"],
            SETTINGS["max_len"], args.seed, from_scratch=from_scratch,
            freeze_token_embeddings=freeze,
        )  # fmt: skip
        pred = finetune.predict_classes(ft.model, tok, dev[0], SETTINGS["eval_len"])
        read = (minilm, tok, intents) if arm == "pre-trained" else ()  # drift, intents
        record = large_rate.record_run(ft, pred, dev[1], lr, *read)
        runs[name] = {"arm": arm, "head": head, **record}
        runs[name]["cpu_seconds"] = time.process_time() - start
        print(name, {k: v for k, v in runs[name].items()
                     if k not in ("losses", "grad_norms")}, flush=True)  # fmt: skip
    knn, lin = probe.embedding_accuracy(minilm, tok, *intents)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, text=True,
                            capture_output=True).stdout.strip()  # fmt: skip
    result = {
        "what": "chapter 12's too-large rate: the pre-trained MiniLM arm at its "
        "chosen rate and at factor times it, and the scratch arm, one seed each, with "
        "loss and gradient-norm curves, dev accuracy, weight drift and ATIS intent "
        "readings",
        "settings": {**SETTINGS, "epochs": few["settings"]["epochs"], "steps": steps,
                     "factor": args.factor, "seed": args.seed, "n_ref": len(queries),
                     "n_probes": len(probes), "n_dev": len(dev[0])},
        "before": {"intent_1nn": knn, "intent_probe": lin},
        "top_intent": top_intent,
        "intent_majority": metrics.accuracy(probe_intents, [top_intent] * len(probes)),
        "runs": runs,
        "command": " ".join(["python benchmarks/ch12_large_rate.py",
                             *(argv if argv is not None else sys.argv[1:])]),
        "commit": commit, "date": dt.date.today().isoformat(),
        "torch": torch.__version__, "machine": benchmark.machine(), "threads": 1,
    }  # fmt: skip
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    main()
