"""Chapter 12's few-label experiment: does pre-training pay when labels are few?

A pre-trained encoder (``--encoder``: all-MiniLM-L6-v2, ``minilm_weights.from_pretrained()``, by
default; or the book's ``sst-bert`` of chapter 11, ``checkpoints.load``, each with its
own tokenizer) and the SAME architecture with random weights
(``type(encoder)(config)``) are fine-tuned by one recipe
(``finetune.fine_tune_classifier``: BERT's AdamW, 10 % warm-up then linear decay,
clipping at 1) on a few hundred labelled SST-2 training phrases, each with a [CLS] head
and a mean head. Every choice is made on a SELECTION split of other training phrases
that share no 4-word run with them (``data.few_labels``); SST-2's 872 dev sentences
only report.

1. the peak rate of every arm and head: one seed (``--select-seed``) per rate in
   ``--lrs``, chosen by its selection accuracy (dev accuracy recorded, not used);
2. at each chosen rate, ``--seeds`` seeds (the run of step 1 is the select seed's),
   scored on the selection split and on dev;
3. a longer run of the scratch head chosen on the selection split
   (``--longer-epochs``, one seed), to see whether more passes over the few labels
   rescue the random start;
4. a linear probe on frozen features of the SAME phrases (the pooling chosen on
   the selection split), and the majority class of the phrases, both on dev.

The pre-trained arm keeps its token embeddings frozen (the chapter's recipe: they were
learnt from large corpora, and half of the parameters); the scratch arm trains them
(frozen RANDOM word vectors would handicap it for no reason; training them is the
generous choice for the control). Writes ``benchmarks/results/ch12_few_labels.json``
(MiniLM; one thread, about 15 CPU-minutes) or ``ch12_few_labels_sst_bert.json``
(``--encoder sst-bert``, the same recipe; a few CPU-minutes), which the chapter reads.

    OMP_NUM_THREADS=1 python benchmarks/ch12_few_labels.py          # the committed run
    OMP_NUM_THREADS=1 python benchmarks/ch12_few_labels.py --encoder sst-bert
    python benchmarks/ch12_few_labels.py --lrs 1e-3 --seeds 0 --epochs 1 \
        --poolings mean --longer-epochs 0 --n-dev 50 --out /tmp/x.json  # a smoke test
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from transformer_book import (  # noqa: E402
    benchmark,
    checkpoints,
    data,
    finetune,
    metrics,
    minilm_weights,
    probe,
    tokenizer,
)

#: the chapter's few-label setting: phrases of >= min_words words, n_labels to
#: fine-tune on, n_select (of >= select_min_words words) to choose on, one draw (seed)
SETTINGS = dict(
    n_labels=256, n_select=500, min_words=6, select_min_words=12, ngram=4, seed=0,
    batch_size=8, max_len=64, eval_len=64,
)  # fmt: skip
ARMS = {  # name: (from_scratch, freeze_token_embeddings)
    "pre-trained": (False, True),
    "scratch": (True, False),
}
POOLINGS = ("cls", "mean")
LRS = (1e-4, 3e-4, 1e-3)
EPOCHS, LONGER_EPOCHS = 2, 6
SELECT_SEED, SEEDS = 0, (0, 1, 2)
#: the encoders ``--encoder`` can fine-tune, each with its own tokenizer, and the file
#: its result goes to: all-MiniLM-L6-v2 (the chapter's), and the book's own ``sst-bert``
#: of chapter 11 (4 layers of width 128, pre-trained by MLM + NSP on SST-2's training
#: phrases, 4,000-piece WordPiece), which chapters 12 and 13 compare with it
ENCODERS = {
    "minilm": "ch12_few_labels.json",
    "sst-bert": "ch12_few_labels_sst_bert.json",
}
DESCRIPTION = {
    "minilm": "all-MiniLM-L6-v2",
    "sst-bert": "the book's sst-bert checkpoint (chapter 11)",
}


def load_encoder(name: str) -> tuple[torch.nn.Module, object]:
    """``(encoder, tokenizer)`` for ``--encoder name``: a :class:`bert.BertModel` and
    its own WordPiece vocabulary."""
    if name == "minilm":
        return minilm_weights.from_pretrained(), minilm_weights.pretrained_tokenizer()
    model, _ = checkpoints.load(name)
    return model.bert, tokenizer.WordPiece.from_file(
        checkpoints.path(name) / "vocab.txt"
    )


def phrases() -> tuple[tuple[list, list], tuple[list, list]]:
    """The chapter's training phrases and selection split (``SETTINGS``)."""
    texts, labels = data.load_sst2("train")
    s = SETTINGS
    return data.few_labels(
        texts, labels, s["n_labels"], s["n_select"], s["min_words"], s["seed"],
        s["ngram"], s["select_min_words"],
    )  # fmt: skip


def steps_for(epochs: int) -> int:
    """Updates in ``epochs`` passes over the training phrases."""
    return epochs * -(-SETTINGS["n_labels"] // SETTINGS["batch_size"])


def one_run(encoder, tok, train, arm, pooling, lr, epochs, seed, evals) -> dict:
    """One fine-tuning run, scored on every split of ``evals`` (name: (texts, labels))."""
    start = time.process_time()
    from_scratch, freeze = ARMS[arm]
    run = finetune.fine_tune_classifier(
        encoder, tok, *train, steps_for(epochs), lr, pooling=pooling, seed=seed,
        batch_size=SETTINGS["batch_size"], max_len=SETTINGS["max_len"],
        from_scratch=from_scratch, freeze_token_embeddings=freeze,
    )  # fmt: skip
    out = {"arm": arm, "pooling": pooling, "lr": lr, "epochs": epochs, "seed": seed,
           "steps": len(run.losses)}  # fmt: skip
    for name, (texts, labels) in evals.items():
        pred = finetune.predict_classes(run.model, tok, texts, SETTINGS["eval_len"])
        out[f"{name}_accuracy"] = metrics.accuracy(labels, pred)
    tail = run.losses[-max(1, len(run.losses) // 10) :]
    out.update(first_loss=run.losses[0], final_loss=statistics.mean(tail),
               max_loss=max(run.losses), cpu_seconds=time.process_time() - start)  # fmt: skip
    print(json.dumps(out), flush=True)
    return out


def fit_probe(encoder, tok, train, select, dev) -> dict:
    """Step 4's linear probe on frozen ``encoder`` features of the training phrases:
    the pooling chosen on the selection split, scored on dev."""
    start = time.process_time()
    feats = {
        name: probe.frozen_features(encoder, tok, texts, SETTINGS["eval_len"])
        for name, texts in (("train", train[0]), ("select", select[0]), ("dev", dev[0]))
    }
    probed = {"selection_accuracy": {}}
    for kind in ("cls", "mean"):
        head = probe.linear_probe(feats["train"][kind], train[1])
        pred = head(feats["select"][kind]).argmax(-1).tolist()
        probed["selection_accuracy"][kind] = metrics.accuracy(select[1], pred)
    kind = max(probed["selection_accuracy"], key=probed["selection_accuracy"].get)
    head = probe.linear_probe(feats["train"][kind], train[1])
    with torch.no_grad():
        pred = head(feats["dev"][kind]).argmax(-1).tolist()
    probed.update(pooling=kind, dev_accuracy=metrics.accuracy(dev[1], pred),
                 cpu_seconds=time.process_time() - start)  # fmt: skip
    return probed


def summary(values: list[float]) -> dict:
    return {
        "mean": statistics.mean(values),
        "std": statistics.stdev(values) if len(values) > 1 else 0.0,
        "n": len(values),
    }


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--poolings", nargs="+", default=list(POOLINGS), choices=POOLINGS)
    p.add_argument("--lrs", nargs="+", type=float, default=list(LRS))
    p.add_argument("--epochs", type=int, default=EPOCHS)
    p.add_argument("--longer-epochs", type=int, default=LONGER_EPOCHS, help="0: none")
    p.add_argument("--select-seed", type=int, default=SELECT_SEED)
    p.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS))
    p.add_argument("--n-dev", type=int, default=None, help="first N dev sentences")
    p.add_argument("--encoder", default="minilm", choices=list(ENCODERS),
                   help="the pre-trained encoder; the scratch arm is its architecture")  # fmt: skip
    p.add_argument("--no-probe", action="store_true", help="skip step 4's probe")
    p.add_argument("--out", default=None, help="default: benchmarks/results/ + "
                   + ", ".join(f"{e}: {f}" for e, f in ENCODERS.items()))  # fmt: skip
    args = p.parse_args(argv)
    out = Path(args.out or ROOT / "benchmarks/results" / ENCODERS[args.encoder])
    torch.set_num_threads(1)
    wall = time.time()
    encoder, tok = load_encoder(args.encoder)
    train, select = phrases()
    dev = tuple(x[: args.n_dev] for x in data.load_sst2("dev"))
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, text=True,
                            capture_output=True).stdout.strip()  # fmt: skip
    result: dict = {
        "what": f"few-label SST-2: {DESCRIPTION[args.encoder]} pre-trained vs the same "
        "architecture from scratch, fine-tuned by finetune.fine_tune_classifier; "
        "rates chosen on the selection split, reported on SST-2 dev",
        "encoder": args.encoder,
        "settings": {**SETTINGS, "epochs": args.epochs, "arms": ARMS,
                     "lrs": args.lrs, "select_seed": args.select_seed,
                     "seeds": args.seeds, "n_dev": len(dev[0])},
        "command": " ".join(["python benchmarks/ch12_few_labels.py",
                             *(argv if argv is not None else sys.argv[1:])]),
        "commit": commit, "date": dt.date.today().isoformat(),
        "torch": torch.__version__, "machine": benchmark.machine(), "threads": 1,
        "selection_runs": {}, "chosen": {}, "final_runs": {}, "dev": {},
    }  # fmt: skip
    for arm in ARMS:  # 1. the rates, on the selection split
        for pooling in args.poolings:
            key = f"{arm}/{pooling}"
            runs = [  # dev too, so that the chosen run counts as a seed of step 2
                one_run(encoder, tok, train, arm, pooling, lr, args.epochs,
                        args.select_seed, {"selection": select, "dev": dev})
                for lr in args.lrs
            ]  # fmt: skip
            best = max(runs, key=lambda r: (r["selection_accuracy"], -r["lr"]))
            result["selection_runs"][key] = runs
            result["chosen"][key] = {"lr": best["lr"], "epochs": args.epochs}
    for key, chosen in result["chosen"].items():  # 2. seeds at the chosen rates
        arm, pooling = key.split("/")
        same = [r for r in result["selection_runs"][key] if r["lr"] == chosen["lr"]]
        runs = [
            same[0] if seed == args.select_seed else
            one_run(encoder, tok, train, arm, pooling, chosen["lr"], args.epochs,
                    seed, {"selection": select, "dev": dev})
            for seed in args.seeds
        ]  # fmt: skip
        result["final_runs"][key] = runs
        result["dev"][key] = summary([r["dev_accuracy"] for r in runs])
    if args.longer_epochs:  # 3. more passes for the scratch head chosen on selection
        key = max(
            (k for k in result["chosen"] if k.startswith("scratch/")),
            key=lambda k: next(
                r["selection_accuracy"] for r in result["selection_runs"][k]
                if r["lr"] == result["chosen"][k]["lr"]
            ),
        )  # fmt: skip
        _, pooling = key.split("/")
        result["longer"] = one_run(
            encoder, tok, train, "scratch", pooling, result["chosen"][key]["lr"],
            args.longer_epochs, args.seeds[0], {"selection": select, "dev": dev},
        )  # fmt: skip
    # 4. the probe on frozen features of the same phrases, and the majority class
    if args.no_probe:
        result["probe"] = {"skipped": "--no-probe: no linear probe was fitted"}
    else:
        result["probe"] = fit_probe(encoder, tok, train, select, dev)
    majority = Counter(train[1]).most_common(1)[0][0]
    result["majority"] = {
        "label": majority,
        "dev_accuracy": metrics.accuracy(dev[1], [majority] * len(dev[1])),
    }
    result["wall_seconds"] = time.time() - wall
    out.write_text(json.dumps(result, indent=1) + "\n")
    for key, s in result["dev"].items():
        print(f"{key:>17} lr {result['chosen'][key]['lr']:g}: dev "
              f"{s['mean']:.3f} ± {s['std']:.3f} ({s['n']} seeds)")  # fmt: skip
    print("probe", result["probe"], "majority", result["majority"])
    return result


if __name__ == "__main__":
    main()
