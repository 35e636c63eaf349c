"""What gets a small GPT below nanoGPT's 1.88 on Tiny Shakespeare in less time: train
the recipes of :data:`VARIANTS`, several seeds each, and record the held-out loss and
the time of every run.

    python benchmarks/shakespeare_ablation.py [--variants a,b] [--seeds 0,1,2]
        [--threads 1] [--out benchmarks/results/shakespeare_ablation.json]

Every run is ``python -m transformer_book.train gpt`` with a recipe (chapter 14's
``gpt_training.run``): the first 90 % of the characters to train on, the last 10 %
held out (nanoGPT's split), evaluated once at the end on every held-out character, and
on each half of them alone (``val_loss_halves``: choose on the first, report the
second). Runs
already in the output file are kept (so variants can be added one at a time);
``--force`` repeats them. Chapter 14 shows the table this writes.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import fcntl
import json
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))  # the book's package, also when not installed

from transformer_book import benchmark, gpt_training  # noqa: E402

DEFAULT_OUT = ROOT / "benchmarks" / "results" / "shakespeare_ablation.json"
NANOGPT = gpt_training.RECIPES["nanogpt-cpu"]
QUICK = gpt_training.RECIPES["book-quick"]
# name -> (what changes, the recipe); each differs from the row above it in one thing
# (``width`` in two that go together: the width and the batch, to keep a step's cost)
SCHEDULE = dataclasses.replace(
    NANOGPT, steps=QUICK.steps, lr=QUICK.lr, warmup=QUICK.warmup
)
WIDTH = dataclasses.replace(
    SCHEDULE, d_model=QUICK.d_model, batch_size=QUICK.batch_size
)
RELU = dataclasses.replace(WIDTH, activation=QUICK.activation)
# the last rung is the book's recipe: RELU must differ from it in the positions only
assert dataclasses.replace(RELU, positions=QUICK.positions) == QUICK
VARIANTS: dict[str, tuple[str, gpt_training.TrainConfig]] = {
    "nanogpt": ("nanoGPT's CPU recipe: 2,000 steps, lr 1e-3", NANOGPT),
    "nanogpt-short": (
        "the same, its schedule fitted to the book's step budget",
        dataclasses.replace(NANOGPT, steps=QUICK.steps),
    ),
    "schedule": (
        f"peak learning rate {QUICK.lr:g}, {QUICK.warmup} warm-up steps",
        SCHEDULE,
    ),
    "width": (
        f"width {QUICK.d_model} and batches of {QUICK.batch_size}",
        WIDTH,
    ),
    "relu": ("ReLU instead of GELU", RELU),
    "book-quick": (
        "RoPE instead of learned positions (the book's recipe)",
        QUICK,
    ),
    "untied": (
        "the head untied from the embedding",
        dataclasses.replace(QUICK, tie_embeddings=False),
    ),
}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    parser.add_argument("--force", action="store_true", help="repeat runs on file")
    args = parser.parse_args(argv)
    names = args.variants.split(",")
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        raise SystemExit(f"unknown variants {unknown}; known: {list(VARIANTS)}")
    seeds = [int(s) for s in args.seeds.split(",")]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(args.threads)
    for seed in seeds:  # seed by seed: every variant gets its first seeds soonest
        for name in names:
            what, recipe = VARIANTS[name]
            with _locked(out) as result:
                entry = result["variants"].get(name, {"runs": []})
                if any(r["seed"] == seed for r in entry["runs"]) and not args.force:
                    continue
            config = dataclasses.replace(recipe, seed=seed, log_every=0, threads=0)
            r = gpt_training.run(config)
            run = {
                "seed": seed,
                "val_loss": r["val_loss"],
                "val_loss_halves": r["val_loss_halves"],
                "train_cpu_seconds": r["train_cpu_seconds"],
                "train_wall_seconds": r["train_wall_seconds"],
                "final_train_loss": sum(r["history"][-100:]) / 100,
            }
            print(f"{name} seed {seed}: held-out loss {r['val_loss']:.4f}, "
                  f"{r['train_cpu_seconds']:.0f} CPU s", flush=True)  # fmt: skip
            with _locked(out) as result:  # several workers may share the file
                entry = result["variants"].setdefault(name, {"runs": []})
                entry.update(what=what, config=dataclasses.asdict(recipe))
                entry["runs"] = [x for x in entry["runs"] if x["seed"] != seed]
                entry["runs"] = sorted([*entry["runs"], run], key=lambda x: x["seed"])
                result.update(
                    threads=args.threads,
                    machine=benchmark.machine(),
                    torch=torch.__version__,
                    date=datetime.datetime.now(datetime.timezone.utc).isoformat(
                        timespec="seconds"
                    ),
                    command="python benchmarks/shakespeare_ablation.py --threads "
                    f"{args.threads} --seeds {args.seeds}",
                )
    with _locked(out) as result:
        return result


@contextlib.contextmanager
def _locked(out: Path):
    """The results on file, read and (on leaving) written back under a lock."""
    with open(Path(tempfile.gettempdir()) / f"{out.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        result = json.loads(out.read_text()) if out.is_file() else {"variants": {}}
        yield result
        out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
