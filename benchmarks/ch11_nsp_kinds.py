"""Chapter 11's next-sentence prediction where a negative can change the kind of text
(section 8): chapter 11's quick recipe (``train.BERT_RECIPES["tiny"]``: 2 layers of
width 64, MLM + NSP, batches of 16 at 3e-3) pre-trained on 2,500 texts of each of
three kinds (:func:`nsp_kinds.kinds_corpus`: film reviews, flight queries,
voice-assistant requests), its WordPiece vocabulary learned on them, for several run
lengths and seeds, in two arms: a negative's B drawn from any text (BERT's recipe)
or from a text of the same kind (the control, which the kind of text cannot help).
Each run is scored on the dev and the test texts: NSP on one draw of pairs like
BERT's training (:func:`pretraining.heldout_metrics`, beside always answering "is
next" and the unigram MLM baseline) and on pairs of each kind
(:func:`masked_lm.nsp_pairs_by_kind`: the true B, a B of the same kind and length, a
B of another kind), by accuracy and by the AUC of the head's probability
(:func:`pretraining.nsp_by_kind`). The chapter chooses the run length on dev and
reports test.

    python benchmarks/ch11_nsp_kinds.py [--steps 500 1000 2000] [--seeds 0 1 2 3 4]
        [--n-train 2500] [--n-heldout 300]

writes benchmarks/results/ch11_nsp_kinds.json (1 thread, CPU; about 6 minutes).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import random
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from transformer_book import (  # noqa: E402
    benchmark,
    masked_lm,
    nsp_kinds,
    pretraining,
    pretraining_data,
    tokenizer,
    train,
)

N_TRAIN, N_HELDOUT = 2500, 300
RESULT = ROOT / "benchmarks" / "results" / "ch11_nsp_kinds.json"
# where a training negative's B comes from: any text (BERT's recipe), or a text of the
# same kind (the control, denied the cheap signal)
NEGATIVES = ("any", "same kind")


def scores(model, tok, train_texts, heldout: dict[str, list[str]]) -> dict:
    """One held-out split's scores: the natural draw and the three kinds of pair."""
    texts = [t for kind in nsp_kinds.TEXT_KINDS for t in heldout[kind]]
    natural = pretraining.heldout_metrics(
        model, tok, train_texts, texts, seed=pretraining_data.HELDOUT_SEED
    )
    docs = {
        kind: [masked_lm.word_pieces_by_word(tok, t) for t in heldout[kind]]
        for kind in nsp_kinds.TEXT_KINDS
    }
    pairs = masked_lm.nsp_pairs_by_kind(
        docs, random.Random(pretraining_data.HELDOUT_SEED)
    )
    found = pretraining.nsp_by_kind(model, tok, pairs)
    kind, coherence = pretraining.kind_and_coherence(found["accuracy"])
    return dict(natural=natural, **found, kind=kind, coherence=coherence)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[500, 1000, 2000])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--n-train", type=int, default=N_TRAIN)
    parser.add_argument("--n-heldout", type=int, default=N_HELDOUT)
    parser.add_argument("--out", type=Path, default=RESULT)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    corpus = nsp_kinds.kinds_corpus(args.n_train, args.n_heldout)
    train_texts = [t for kind in nsp_kinds.TEXT_KINDS for t in corpus["train"][kind]]
    recipe = train.BERT_RECIPES["tiny"]
    tok = tokenizer.WordPiece.train(train_texts, recipe.vocab_size)
    docs = [masked_lm.word_pieces_by_word(tok, t) for t in train_texts]
    groups = [kind for kind in nsp_kinds.TEXT_KINDS for _ in corpus["train"][kind]]
    runs = []
    for negatives in NEGATIVES:
        for steps in args.steps:
            for seed in args.seeds:
                config = dataclasses.replace(recipe, steps=steps, seed=seed)
                within = groups if negatives == "same kind" else None
                start = time.process_time()
                model = pretraining.pretrain(
                    train_texts, config, tok, docs, nsp_groups=within
                ).model
                cpu = time.process_time() - start
                run = dict(negatives=negatives, steps=steps, seed=seed,
                           cpu_seconds=round(cpu, 1))  # fmt: skip
                for split in ("dev", "test"):
                    run[split] = scores(model, tok, train_texts, corpus[split])
                runs.append(run)
                print(
                    f"{negatives} steps {steps} seed {seed}: {cpu:.1f} CPU-s | "
                    + " | ".join(
                        f"{s} NSP {run[s]['natural']['nsp_accuracy']:.3f} kind "
                        f"{run[s]['kind']:.3f} coherence {run[s]['coherence']:.3f} "
                        f"AUC {run[s]['auc']['same kind']:.3f}"
                        for s in ("dev", "test")
                    ),
                    flush=True,
                )
    result = dict(
        recipe=dataclasses.asdict(recipe), negatives=list(NEGATIVES),
        n_train=args.n_train, n_heldout=args.n_heldout,
        kinds=list(nsp_kinds.TEXT_KINDS), vocab_size=len(tok),
        steps=args.steps, seeds=args.seeds, runs=runs,
        machine=benchmark.machine(), torch=torch.__version__,
        date=dt.date.today().isoformat(),
        command="python benchmarks/ch11_nsp_kinds.py "
        + " ".join(sys.argv[1:] if argv is None else argv),
    )  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")
    return result


if __name__ == "__main__":
    main()
