"""Chapter 11's next-sentence prediction where a negative can change topic (section
8): chapter 11's quick recipe (``train.BERT_RECIPES["tiny"]``: 2 layers of width 64,
MLM + NSP, batches of 16 at 3e-3) pre-trained on 2,500 texts of each of three kinds
(:func:`pretraining_data.topic_corpus`: film reviews, flight queries, voice-assistant
requests), its WordPiece vocabulary learned on them, for several run lengths and
seeds. Each run is scored on the dev and the test texts: NSP on one draw of pairs
like training's (:func:`pretraining.heldout_metrics`, beside always answering "is
next" and the unigram MLM baseline) and on pairs of each kind
(:func:`masked_lm.nsp_pairs_by_kind`: the true B, a B of the same topic, a B of
another topic). The chapter chooses the run length on dev and reports test.

    python benchmarks/ch11_nsp_topics.py [--steps 500 1000 2000] [--seeds 0 1 2 3 4]

writes benchmarks/results/ch11_nsp_topics.json (1 thread, CPU; about 3 minutes).
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
    pretraining,
    pretraining_data,
    tokenizer,
    train,
)

N_TRAIN, N_HELDOUT = 2500, 300
RESULT = ROOT / "benchmarks" / "results" / "ch11_nsp_topics.json"


def scores(model, tok, train_texts, heldout: dict[str, list[str]]) -> dict:
    """One held-out split's scores: the natural draw and the three kinds of pair."""
    texts = [t for topic in pretraining_data.TOPICS for t in heldout[topic]]
    natural = pretraining.heldout_metrics(
        model, tok, train_texts, texts, seed=pretraining_data.HELDOUT_SEED
    )
    docs = {
        topic: [masked_lm.word_pieces_by_word(tok, t) for t in heldout[topic]]
        for topic in pretraining_data.TOPICS
    }
    pairs = masked_lm.nsp_pairs_by_kind(
        docs, random.Random(pretraining_data.HELDOUT_SEED)
    )
    by_kind = pretraining.nsp_accuracy_by_kind(model, tok, pairs)
    topic, coherence = pretraining.topic_and_coherence(by_kind)
    return dict(natural=natural, by_kind=by_kind, topic=topic, coherence=coherence)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[500, 1000, 2000])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--n-train", type=int, default=N_TRAIN)
    parser.add_argument("--out", type=Path, default=RESULT)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    corpus = pretraining_data.topic_corpus(args.n_train, N_HELDOUT)
    train_texts = [
        t for topic in pretraining_data.TOPICS for t in corpus["train"][topic]
    ]
    recipe = train.BERT_RECIPES["tiny"]
    tok = tokenizer.WordPiece.train(train_texts, recipe.vocab_size)
    docs = [masked_lm.word_pieces_by_word(tok, t) for t in train_texts]
    runs = []
    for steps in args.steps:
        for seed in args.seeds:
            config = dataclasses.replace(recipe, steps=steps, seed=seed)
            start = time.process_time()
            model = pretraining.pretrain(train_texts, config, tok, docs).model
            cpu = time.process_time() - start
            run = dict(steps=steps, seed=seed, cpu_seconds=round(cpu, 1))
            for split in ("dev", "test"):
                run[split] = scores(model, tok, train_texts, corpus[split])
            runs.append(run)
            print(
                f"steps {steps} seed {seed}: {cpu:.1f} CPU-s | "
                + " | ".join(
                    f"{s} NSP {run[s]['natural']['nsp_accuracy']:.3f} topic "
                    f"{run[s]['topic']:.3f} coherence {run[s]['coherence']:.3f}"
                    for s in ("dev", "test")
                ),
                flush=True,
            )
    result = dict(
        recipe=dataclasses.asdict(recipe), n_train=args.n_train, n_heldout=N_HELDOUT,
        topics=list(pretraining_data.TOPICS), vocab_size=len(tok),
        steps=args.steps, seeds=args.seeds, runs=runs,
        machine=benchmark.machine(), torch=torch.__version__,
        date=dt.date.today().isoformat(),
        command="python benchmarks/ch11_nsp_topics.py "
        + " ".join(sys.argv[1:] if argv is None else argv),
    )  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")
    return result


if __name__ == "__main__":
    main()
