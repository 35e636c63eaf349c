"""Chapter 13's distillation experiment (section 3) on several seeds, for one of two
teachers (``--teacher``):

- ``probe``: all-MiniLM-L6-v2 with a linear probe fitted on the chapter's 640 labelled
  SST-2 sentences (the probe's settings chosen on the dev split): a teacher that knows
  little more than those labels;
- ``tuned``: the book's checkpoint ``sst-minilm-teacher``, all-MiniLM-L6-v2 with its
  top two layers and head fine-tuned on 44 k other SST-2 phrases
  (``scripts/train_checkpoints.py``): a teacher that knows much more.

A 3-layer student copied from the teacher (which layers: copy-only accuracy of a few
choices) is trained in three arms, all with ``distill.train_student``
(``finetune.fine_tune``, token embeddings frozen):

- ``hard``: cross-entropy on the labelled sentences only;
- ``teacher_hard``: cross-entropy on the teacher's argmax labels of a transfer set of
  unlabelled SST-2 training phrases (``sst2_teacher.sst2_splits``: at least 6 words, no
  4-word run shared with the dev or test sentences; their labels are never read);
- ``soft``: the teacher's soft targets at temperature T on the same transfer set
  (α = 1: the soft term alone).

Each setting (arm, learning rate, T for the soft arm, and the number of updates:
``@STEPS``, 60 unless named) is run on every seed and scored on the dev split (the
choice: per arm, the setting with the best mean dev accuracy) and the test split (the
report), beside the teacher, the copy and the majority class.

    python benchmarks/ch13_distillation.py [--teacher probe|tuned] [--seeds 0 1 2]
                                           [--steps 60] [--out FILE]
                                           [--configs hard:3e-4 soft:3e-4:2@300 ...]
                                           [--n-transfer 3000] [--add]

(``--add``: more settings or seeds, added to the committed result; its ``commands``
lists every command that contributed runs, ``machines`` the machine of each.)

writes benchmarks/results/ch13_distillation.json (probe) or
ch13_distillation_tuned.json (tuned); 1 thread, CPU; about 40 s a run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from transformer_book import (  # noqa: E402
    baselines,
    benchmark,
    bert_heads,
    checkpoints,
    distill,
    finetune,
    metrics,
    minilm_weights,
    probe,
    sst2_teacher,
)

RESULT = ROOT / "benchmarks" / "results" / "ch13_distillation.json"
#: --teacher -> its committed result: the probe fitted on the 640 labelled sentences,
#: or the shipped teacher fine-tuned on 44 k other phrases (scripts/train_checkpoints.py)
TEACHERS = {"probe": RESULT, "tuned": RESULT.with_name("ch13_distillation_tuned.json")}
TUNED_TEACHER = "sst-minilm-teacher"
N_TRAIN, N_DEV, N_TEST, MAX_LEN, BATCH = 640, 200, 256, 32, 32  # the chapter's quick
N_TRANSFER, MIN_WORDS = 3000, 6
STEPS = 60  # updates of a setting unless it names others (soft:3e-4:2@300)
LAYER_CHOICES = ([0, 2, 4], [1, 3, 5], [0, 1, 2], [3, 4, 5])
PROBES = [(False, 1e-2), (False, 1e-3), (True, 1e-2), (True, 1e-3)]  # standardize, wd
DEFAULT_CONFIGS = [
    "hard:3e-4",
    "hard:1e-3",
    "teacher_hard:3e-4",
    "soft:3e-4:1",
    "soft:3e-4:2",
]


def splits(n_transfer: int = N_TRANSFER) -> dict[str, tuple[list[str], list[int]]]:
    """The chapter's splits (``sst2_teacher.sst2_splits``): labelled ``train`` and ``dev``
    from SST-2's training phrases, ``test`` the first GLUE dev sentences, and the
    transfer set (texts only)."""
    sp = sst2_teacher.sst2_splits(N_TRAIN, N_DEV, N_TEST, n_transfer, MIN_WORDS)
    return {"train": sp.train, "dev": sp.dev, "test": sp.test, "transfer": sp.transfer}


def teacher_probe(wp, train_x, train_y, standardize=False, weight_decay=1e-2):
    """all-MiniLM-L6-v2 with a mean-pooling head fitted alone on ``train``."""
    torch.manual_seed(0)
    teacher = bert_heads.SequenceClassifier(
        minilm_weights.from_pretrained(), 2, pooling="mean"
    )
    x = probe.frozen_features(teacher.encoder, wp, train_x, MAX_LEN)["mean"]
    probe.fit_head(
        teacher.classifier, x, train_y, weight_decay, standardize=standardize
    )
    return teacher, x


def parse(config: str, steps: int = STEPS) -> dict:
    """``ARM:LR``, ``soft:LR:T``, either with ``@STEPS`` (default ``steps``)."""
    config, _, n = config.partition("@")
    arm, lr, *t = config.split(":")
    if arm not in ("hard", "teacher_hard", "soft") or (arm == "soft") != bool(t):
        raise ValueError(f"config {config!r}: ARM:LR, or soft:LR:T, then @STEPS")
    steps = int(n) if n else steps
    return dict(arm=arm, lr=float(lr), T=float(t[0]) if t else None, steps=steps)


def key(c: dict) -> str:
    """The setting's name; its number of updates is named when it is not STEPS."""
    name = f"{c['arm']}:{c['lr']:g}" + (f":{c['T']:g}" if c["T"] is not None else "")
    return name + (f"@{c['steps']}" if c["steps"] != STEPS else "")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=STEPS,
                        help="updates of every config without its own @STEPS")  # fmt: skip
    parser.add_argument("--configs", nargs="+", default=DEFAULT_CONFIGS)
    parser.add_argument("--n-transfer", type=int, default=N_TRANSFER)
    parser.add_argument("--teacher", choices=TEACHERS, default="probe")
    parser.add_argument("--out", type=Path, default=None,
                        help="default: the committed result of --teacher")  # fmt: skip
    parser.add_argument("--add", action="store_true",
                        help="add these runs to the result already in --out")  # fmt: skip
    arguments = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(arguments)
    configs = [parse(c, args.steps) for c in args.configs]
    args.out = args.out or TEACHERS[args.teacher]
    torch.set_num_threads(1)
    wp = minilm_weights.pretrained_tokenizer()
    sp = splits(args.n_transfer)
    (train_x, train_y), test_y = sp["train"], sp["test"][1]

    def accuracy(model, split):
        x, y = sp[split]
        return metrics.accuracy(y, finetune.predict_classes(model, wp, x, MAX_LEN))

    if args.teacher == "probe":  # the probe's settings chosen on dev
        teacher, feats = teacher_probe(wp, train_x, train_y)
        probe_dev = {}
        for standardize, wd in PROBES:
            probe.fit_head(
                teacher.classifier, feats, train_y, wd, standardize=standardize
            )
            probe_dev[f"standardize={standardize},wd={wd:g}"] = accuracy(teacher, "dev")
        best = max(PROBES, key=lambda p: probe_dev[f"standardize={p[0]},wd={p[1]:g}"])
        probe.fit_head(teacher.classifier, feats, train_y, best[1], standardize=best[0])
        about = dict(teacher_probe=dict(standardize=best[0], weight_decay=best[1]),
                     probe_dev=probe_dev)  # fmt: skip
    else:  # the shipped checkpoint, fine-tuned on far more labelled phrases
        teacher, card = checkpoints.load(TUNED_TEACHER)
        about = dict(teacher_checkpoint=TUNED_TEACHER, teacher_sha256=card["sha256"],
                     teacher_phrases=card["data"]["n_teacher"])  # fmt: skip
    teacher_scores = {s: accuracy(teacher, s) for s in ("dev", "test")}
    print(f"teacher ({args.teacher}): {teacher_scores}; {about}", flush=True)
    copies = {}
    for layers in LAYER_CHOICES:
        student = distill.student_from_teacher(teacher, layers)
        copies[str(layers)] = {s: accuracy(student, s) for s in ("dev", "test")}
        print(f"copy {layers}: {copies[str(layers)]}", flush=True)
    keep = list(LAYER_CHOICES[0])  # DistilBERT's choice; the chapter's student
    transfer = sp["transfer"]
    start = time.process_time()
    t_logits = finetune.predict_logits(teacher, wp, transfer, MAX_LEN)  # (N, 2)
    labelling_cpu = time.process_time() - start
    t_labels = t_logits.argmax(-1).tolist()
    runs = []
    for c in configs:
        for seed in args.seeds:
            start = time.process_time()
            if c["arm"] == "hard":
                data_kw = dict(texts=train_x, labels=train_y)
            elif c["arm"] == "teacher_hard":
                data_kw = dict(texts=transfer, labels=t_labels)
            else:
                data_kw = dict(texts=transfer, labels=t_labels,
                               teacher_logits=t_logits, temperature=c["T"])  # fmt: skip
            student = distill.train_student(
                teacher, keep, wp, steps=c["steps"], lr=c["lr"], batch_size=BATCH,
                max_len=MAX_LEN, seed=seed, **data_kw,
            )  # fmt: skip
            scores = {s: accuracy(student, s) for s in ("dev", "test")}
            runs.append(dict(config=key(c), **c, seed=seed, **scores,
                             cpu_seconds=time.process_time() - start))  # fmt: skip
            print(f"{key(c)} seed {seed}: {scores}", flush=True)
    commands, machines = [], []
    if args.add:
        old = json.loads(args.out.read_text())
        if (old["steps"], old["n_transfer"]) != (STEPS, args.n_transfer):
            parser.error(f"--add needs the recipe of {args.out}")
        if {(r["config"], r["seed"]) for r in old["runs"]} & {
            (r["config"], r["seed"]) for r in runs
        }:
            parser.error(f"--add: some (config, seed) runs are already in {args.out}")
        runs = old["runs"] + runs
        commands = old.get("commands", [old["command"]])
        machines = old.get("machines", [old["machine"]] * len(commands))
    by_config: dict[str, list[dict]] = {}
    for r in runs:
        by_config.setdefault(r["config"], []).append(r)
    mean_dev = {k: statistics.mean(r["dev"] for r in v) for k, v in by_config.items()}
    chosen = {
        arm: max((k for k in by_config if k.split(":")[0] == arm), key=mean_dev.get)
        for arm in ("hard", "teacher_hard", "soft")
        if any(k.split(":")[0] == arm for k in by_config)
    }
    test_at_chosen = {
        arm: [r["test"] for r in by_config[k]] for arm, k in chosen.items()
    }
    margins = {}
    for arm in ("soft", "teacher_hard"):
        if arm in test_at_chosen and "hard" in test_at_chosen:
            a, h = test_at_chosen[arm], test_at_chosen["hard"]
            diff = statistics.mean(a) - statistics.mean(h)
            sd = max(statistics.stdev(a), statistics.stdev(h)) if len(a) > 1 else 0.0
            margins[f"{arm}_minus_hard"] = dict(diff=diff, sd=sd,
                                                outside_2sd=abs(diff) > 2 * sd)  # fmt: skip
    record = benchmark.provenance(
        f"python benchmarks/ch13_distillation.py {' '.join(arguments)}"
    )
    result = dict(
        what=f"3-layer students of a MiniLM {args.teacher} teacher on SST-2: hard "
        "labels, the teacher's hard labels and its soft targets on a transfer set "
        "(chapter 13, §3)",
        n_train=N_TRAIN, n_dev=N_DEV, n_test=N_TEST, max_len=MAX_LEN, batch_size=BATCH,
        steps=args.steps, n_transfer=args.n_transfer, min_words=MIN_WORDS,
        transfer_mean_words=statistics.mean(len(t.split()) for t in transfer),
        teacher_kind=args.teacher, **about, teacher=teacher_scores,
        teacher_positive_share=statistics.mean(t_labels),
        labelling_cpu_seconds=labelling_cpu,
        majority_test=baselines.majority_accuracy(train_y, test_y),
        copies=copies, student_layers=keep,
        seeds=sorted({r["seed"] for r in runs}), runs=runs, mean_dev=mean_dev,
        chosen=chosen, test_at_chosen=test_at_chosen, margins=margins,
        threads=1, **record, commands=[*commands, record["command"]],
        machines=[*machines, record["machine"]],
    )  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(
        f"chosen {chosen}; test {test_at_chosen}; margins {margins}; wrote {args.out}"
    )


if __name__ == "__main__":
    main()
