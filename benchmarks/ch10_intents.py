"""Chapter 10's text-to-text experiment (section 9) on several seeds: the book's T5
(``atis-t5``) fine-tuned to write each ATIS query's intent as words
(``text_to_text.fine_tune``, the quick profile's 300 updates of 16) at each learning
rate and seed, scored by exact match on ATIS's dev split after 100, 200 and 300 updates
and on the test split. The rate and the length with the best mean dev accuracy over the
seeds are the choice (the chapter's quick profile uses them), and the test accuracies
at that choice are the report; beside them, the majority class (always writing the
commonest training intent). ``--init scratch`` runs the same recipe from the same
shape with its weights drawn anew (the rate and length chosen for it on dev too): what
the pre-training is worth. The chapter runs seed 0 itself and prints these seeds'
spread beside it.

    python benchmarks/ch10_intents.py [--lrs 1e-3 3e-3 1e-2] [--seeds 0 1 2]
                                      [--init pretrained|scratch] [--out FILE] [--add]

(``--add``: more rates or seeds, added to the committed result; its ``commands`` lists
every command that contributed runs. After the checkpoint is retrained with the same
shape, ``--add`` keeps the committed scratch runs, which never read its weights, and
drops the pre-trained ones, which must be run again.)

writes benchmarks/results/ch10_intents.json (1 thread, CPU; about a minute a run).
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
    benchmark,
    checkpoints,
    pretraining_data,
    t5,
    text_to_text,
)

RESULT = ROOT / "benchmarks" / "results" / "ch10_intents.json"
STEPS, BATCH = 300, 16
CHECKS = (STEPS // 3, 2 * STEPS // 3, STEPS)
INITS = ("pretrained", "scratch")


def choose(runs: list[dict]) -> dict:
    """The (rate, length) with the best mean dev accuracy over the seeds, and the test
    accuracies of those runs at that choice."""
    lrs = sorted({r["lr"] for r in runs})
    mean_dev = {
        f"{lr:g}@{step}": statistics.mean(r["dev"][step] for r in runs if r["lr"] == lr)
        for lr in lrs
        for step in CHECKS
    }
    lr, step = max(((lr, step) for lr in lrs for step in CHECKS),
                   key=lambda c: mean_dev[f"{c[0]:g}@{c[1]}"])  # fmt: skip
    return dict(lrs=lrs, mean_dev=mean_dev, chosen_lr=lr, chosen=step,
                test_at_chosen=[r["test"][step] for r in runs if r["lr"] == lr])  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lrs", type=float, nargs="+", default=[1e-3, 3e-3, 1e-2])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--init", choices=INITS, default="pretrained",
                        help="start from the checkpoint, or the same shape re-drawn")  # fmt: skip
    parser.add_argument("--out", type=Path, default=RESULT)
    parser.add_argument("--add", action="store_true",
                        help="add these runs to the result already in --out")  # fmt: skip
    arguments = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(arguments)
    torch.set_num_threads(1)
    model, card = checkpoints.load("atis-t5")
    itos = (checkpoints.path("atis-t5") / "vocab.txt").read_text().splitlines()
    atis = pretraining_data.atis_words(itos=itos)
    pairs = {s: text_to_text.intent_pairs(atis.words, atis.eos, s)
             for s in ("train", "dev", "test")}  # fmt: skip
    runs = []
    for lr in args.lrs:
        for seed in args.seeds:
            start = time.process_time()
            if args.init == "scratch":  # the checkpoint's shape, weights drawn anew
                torch.manual_seed(seed)
                start_from = t5.T5(model.config)
            else:
                start_from = model
            tuned, snapshots = text_to_text.fine_tune(
                start_from, pairs["train"], STEPS, lr, BATCH, seed=seed, keep_at=CHECKS
            )
            scores = {"dev": {}, "test": {}}
            for step in CHECKS:
                tuned.load_state_dict(snapshots[step])
                for split in scores:
                    scores[split][step] = text_to_text.accuracy(tuned, pairs[split])
            runs.append(dict(init=args.init, lr=lr, seed=seed, dev=scores["dev"],
                             test=scores["test"],
                             cpu_seconds=time.process_time() - start))  # fmt: skip
            print(f"{args.init} lr {lr:g} seed {seed}: dev {scores['dev']}, "
                  f"test {scores['test']}", flush=True)  # fmt: skip
    commands = []
    if args.add:  # more runs beside the committed ones (same recipe and checkpoint)
        old = json.loads(args.out.read_text())
        if (old["steps"], old["batch_size"], old.get("model_config")) != (
            STEPS, BATCH, card["model"]["config"]
        ):  # fmt: skip
            parser.error(f"--add needs the recipe and model shape of {args.out}")
        if old["checkpoint_sha256"] != card["sha256"]:  # retrained: same shape
            old["runs"] = [r for r in old["runs"] if r.get("init") == "scratch"]
            old["commands"] = [c for c in old.get("commands", [old["command"]])
                               if "--init scratch" in c]  # fmt: skip
        for r in old["runs"]:  # JSON keys are strings: the update numbers again
            r.setdefault("init", "pretrained")  # runs from before the scratch arm
            r["dev"], r["test"] = (
                {int(k): v for k, v in r[x].items()} for x in ("dev", "test")
            )
        done = {(r["init"], r["lr"], r["seed"]) for r in old["runs"]}
        if done & {(r["init"], r["lr"], r["seed"]) for r in runs}:
            parser.error(f"--add: some (init, lr, seed) runs are already in {args.out}")
        runs = old["runs"] + runs
        commands = old.get("commands", [old["command"]])
    by_init = {i: choose([r for r in runs if r["init"] == i])
               for i in INITS if any(r["init"] == i for r in runs)}  # fmt: skip
    targets = [tuple(t) for t in pairs["train"][1]]
    commonest = statistics.mode(targets)
    majority = statistics.mean(tuple(t) == commonest for t in pairs["test"][1])
    record = benchmark.provenance(
        f"python benchmarks/ch10_intents.py {' '.join(arguments)}"
    )
    result = dict(
        what="T5 writes ATIS intents as words: exact match per seed (chapter 10, §9)",
        checkpoint_sha256=card["sha256"], model_config=card["model"]["config"],
        steps=STEPS, batch_size=BATCH,
        seeds=sorted({r["seed"] for r in runs}), checks=list(CHECKS), runs=runs,
        **by_init.get("pretrained", {}), by_init=by_init, majority_test=majority,
        commonest=" ".join(atis.words.decode(commonest[:-1])),
        threads=1, **record, commands=[*commands, record["command"]],
    )  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    for init, c in by_init.items():
        print(f"{init}: chosen lr {c['chosen_lr']:g}, {c['chosen']} updates; test "
              f"{c['test_at_chosen']}")  # fmt: skip
    print(f"majority {majority:.3f}; wrote {args.out}")


if __name__ == "__main__":
    main()
