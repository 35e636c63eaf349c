"""Chapter 10's text-to-text experiment (section 9) on several seeds: the book's T5
(``atis-t5``) fine-tuned to write each ATIS query's intent as words
(``text_to_text.fine_tune``, the quick profile's 300 updates of 16) at each learning
rate and seed, scored by exact match on ATIS's dev split after 100, 200 and 300 updates
and on the test split. The rate and the length with the best mean dev accuracy over the
seeds are the choice (the chapter's quick profile uses them), and the test accuracies
at that choice are the report; beside them, the majority class (always writing the
commonest training intent). The chapter runs seed 0 itself and prints these seeds'
spread beside it.

    python benchmarks/ch10_intents.py [--lrs 1e-3 3e-3 1e-2] [--seeds 0 1 2] [--out FILE]
                                      [--add]

(``--add``: more rates or seeds, added to the committed result; its ``commands`` lists
every command that contributed runs.)

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

from transformer_book import benchmark, checkpoints, text_to_text, train  # noqa: E402

RESULT = ROOT / "benchmarks" / "results" / "ch10_intents.json"
STEPS, BATCH = 300, 16
CHECKS = (STEPS // 3, 2 * STEPS // 3, STEPS)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lrs", type=float, nargs="+", default=[1e-3, 3e-3, 1e-2])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", type=Path, default=RESULT)
    parser.add_argument("--add", action="store_true",
                        help="add these runs to the result already in --out")  # fmt: skip
    arguments = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(arguments)
    torch.set_num_threads(1)
    model, card = checkpoints.load("atis-t5")
    itos = (checkpoints.path("atis-t5") / "vocab.txt").read_text().splitlines()
    atis = train.atis_words(itos=itos)
    pairs = {s: text_to_text.intent_pairs(atis.words, atis.eos, s)
             for s in ("train", "dev", "test")}  # fmt: skip
    runs = []
    for lr in args.lrs:
        for seed in args.seeds:
            start = time.process_time()
            tuned, snapshots = text_to_text.fine_tune(
                model, pairs["train"], STEPS, lr, BATCH, seed=seed, keep_at=CHECKS
            )
            scores = {"dev": {}, "test": {}}
            for step in CHECKS:
                tuned.load_state_dict(snapshots[step])
                for split in scores:
                    scores[split][step] = text_to_text.accuracy(tuned, pairs[split])
            runs.append(dict(lr=lr, seed=seed, dev=scores["dev"], test=scores["test"],
                             cpu_seconds=time.process_time() - start))  # fmt: skip
            print(f"lr {lr:g} seed {seed}: dev {scores['dev']}, test {scores['test']}",
                  flush=True)  # fmt: skip
    commands = []
    if args.add:  # more runs beside the committed ones (same recipe and checkpoint)
        old = json.loads(args.out.read_text())
        if (old["steps"], old["batch_size"], old["checkpoint_sha256"]) != (
            STEPS,
            BATCH,
            card["sha256"],
        ):
            parser.error(f"--add needs the recipe and checkpoint of {args.out}")
        if {(r["lr"], r["seed"]) for r in old["runs"]} & {(lr, s) for lr in args.lrs
                                                          for s in args.seeds}:  # fmt: skip
            parser.error(f"--add: some (lr, seed) runs are already in {args.out}")
        for r in old["runs"]:  # JSON keys are strings: the update numbers again
            r["dev"], r["test"] = (
                {int(k): v for k, v in r[x].items()} for x in ("dev", "test")
            )
        runs = old["runs"] + runs
        commands = old.get("commands", [old["command"]])
    lrs = sorted({r["lr"] for r in runs})
    mean_dev = {
        f"{lr:g}@{step}": statistics.mean(r["dev"][step] for r in runs if r["lr"] == lr)
        for lr in lrs
        for step in CHECKS
    }
    chosen_lr, chosen = max(
        ((lr, step) for lr in lrs for step in CHECKS),
        key=lambda c: mean_dev[f"{c[0]:g}@{c[1]}"],
    )
    targets = [tuple(t) for t in pairs["train"][1]]
    commonest = statistics.mode(targets)
    majority = statistics.mean(tuple(t) == commonest for t in pairs["test"][1])
    record = benchmark.provenance(
        f"python benchmarks/ch10_intents.py {' '.join(arguments)}"
    )
    result = dict(
        what="T5 writes ATIS intents as words: exact match per seed (chapter 10, §9)",
        checkpoint_sha256=card["sha256"], steps=STEPS, batch_size=BATCH,
        lrs=lrs, seeds=sorted({r["seed"] for r in runs}), checks=list(CHECKS), runs=runs,
        mean_dev=mean_dev, chosen_lr=chosen_lr, chosen=chosen,
        test_at_chosen=[r["test"][chosen] for r in runs if r["lr"] == chosen_lr],
        majority_test=majority,
        commonest=" ".join(atis.words.decode(commonest[:-1])),
        threads=1, **record, commands=[*commands, record["command"]],
    )  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"chosen lr {chosen_lr:g}, {chosen} updates; test {result['test_at_chosen']}; "
          f"majority {majority:.3f}; wrote {args.out}")  # fmt: skip


if __name__ == "__main__":
    main()
