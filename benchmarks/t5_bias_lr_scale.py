"""Chapter 10's choice of ``SpanPretrainConfig.bias_lr_scale`` (the multiple of the
learning rate at which T5's relative-bias tables learn), made on ATIS's **dev** split:
the trainer's ``tiny`` recipe run longer (``--steps``, default 600) at each scale and
seed, every run scored on the same fixed draw of span-corrupted dev windows
(``pretraining_data.t5_heldout(..., split="dev")``) beside the baselines fitted on the
training text. The scale with the lowest mean dev cross-entropy is the choice; chapter 10 reads
this file and checks that the package's default is that choice. The test split, on
which the chapter reports, is not read here.

    python benchmarks/t5_bias_lr_scale.py [--scales 1 3 10 30 100] [--seeds 0 1 2]
                                          [--steps 600] [--out FILE] [--add]

(``--add``: run more seeds or scales and add them to the committed result; its
``commands`` lists every command that contributed runs.)

writes benchmarks/results/t5_bias_lr_scale.json (1 thread, CPU; about 50 CPU-s a run).
"""

from __future__ import annotations

import argparse
import dataclasses
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
    pretraining_data,
    span_pretraining,
    train,
)

RESULT = ROOT / "benchmarks" / "results" / "t5_bias_lr_scale.json"
BASELINES = ("most_frequent_accuracy", "unigram_nats", "bigram_accuracy", "bigram_nats")


def sweep(scales: list[float], seeds: list[int], steps: int) -> dict:
    """Every (scale, seed) run's dev scores, the baselines and the chosen scale."""
    torch.set_num_threads(1)
    atis = pretraining_data.atis_words()
    base_recipe = dataclasses.replace(train.T5_RECIPES["tiny"], steps=steps)
    dev = pretraining_data.t5_heldout(atis, base_recipe.window, split="dev")
    runs, baselines = [], None
    for scale in scales:
        for seed in seeds:
            recipe = dataclasses.replace(base_recipe, bias_lr_scale=scale, seed=seed)
            config = recipe.t5_config(len(atis.words), atis.words.pad_id, atis.eos)
            start = time.process_time()
            model, losses = span_pretraining.pretrain_t5(
                atis.train, config, atis.sentinels, recipe, "cpu"
            )
            cpu = time.process_time() - start
            scores = pretraining_data.t5_scores(model, atis, dev)
            baselines = {k: scores[k] for k in (*BASELINES, "hidden_words")}
            runs.append(dict(scale=scale, seed=seed, dev_nats=scores["nats"],
                             dev_accuracy=scores["accuracy"],
                             final_train_loss=statistics.mean(losses[-20:]),
                             cpu_seconds=cpu))  # fmt: skip
            print(f"scale {scale:g} seed {seed}: dev {scores['nats']:.3f} nats, "
                  f"accuracy {scores['accuracy']:.3f} ({cpu:.0f} CPU-s)", flush=True)  # fmt: skip
    recipe = {k: v for k, v in dataclasses.asdict(base_recipe).items()
              if k not in ("bias_lr_scale", "seed")}  # fmt: skip
    return summarise(runs, recipe, baselines)


def summarise(runs: list[dict], recipe: dict, baselines: dict) -> dict:
    """The runs with their scales, seeds, mean dev loss per scale and the choice."""
    scales = sorted({r["scale"] for r in runs})
    mean_nats = {
        f"{s:g}": statistics.mean(r["dev_nats"] for r in runs if r["scale"] == s)
        for s in scales
    }
    chosen = min(scales, key=lambda s: mean_nats[f"{s:g}"])
    return dict(recipe=recipe, scales=scales, seeds=sorted({r["seed"] for r in runs}),
                runs=runs, mean_dev_nats=mean_nats, chosen=chosen,
                baselines=baselines)  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", type=float, nargs="+", default=[1, 3, 10, 30, 100])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--out", type=Path, default=RESULT)
    parser.add_argument("--add", action="store_true",
                        help="add these runs to the result already in --out")  # fmt: skip
    arguments = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(arguments)
    if any(s <= 0 for s in args.scales) or args.steps < 1:
        parser.error("scales and steps must be positive")
    result = sweep(args.scales, args.seeds, args.steps)
    commands = []
    if args.add:  # more runs beside the committed ones (same recipe and dev windows)
        old = json.loads(args.out.read_text())
        if old["recipe"] != result["recipe"]:
            parser.error(f"--add needs the same recipe as {args.out}")
        done = {(r["scale"], r["seed"]) for r in old["runs"]}
        if done & {(r["scale"], r["seed"]) for r in result["runs"]}:
            parser.error(f"--add: some (scale, seed) runs are already in {args.out}")
        result = summarise(old["runs"] + result["runs"], result["recipe"],
                           result["baselines"])  # fmt: skip
        commands = old.get("commands", [old["command"]])
    record = benchmark.provenance(
        f"python benchmarks/t5_bias_lr_scale.py {' '.join(arguments)}"
    )
    result.update(
        what="T5 bias-table learning-rate multiple chosen on ATIS dev windows",
        threads=1, **record, commands=[*commands, record["command"]],
    )  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"chosen scale {result['chosen']:g}; wrote {args.out}")


if __name__ == "__main__":
    main()
