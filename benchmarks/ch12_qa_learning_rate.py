"""Chapter 12's choice of the QA learning rate, made on the DEV questions (the test
questions only report): the chapter's QA recipe (all-MiniLM-L6-v2 with a span head,
token embeddings frozen, ``--steps`` updates of 16 questions of the first
``--train-queries`` ATIS training queries, seed 0, ``finetune.fine_tune``) at each rate
given, scored by SQuAD exact match and F1 on the questions of the first 100 ATIS dev
queries. Writes ``benchmarks/results/ch12_qa_learning_rate.json``, which the
chapter reads (the chosen rate and the scores behind the choice).

    python benchmarks/ch12_qa_learning_rate.py                  # the committed run
    python benchmarks/ch12_qa_learning_rate.py --lrs 1e-4 --steps 2 --out /tmp/qa.json
"""

from __future__ import annotations

import argparse
import copy
import datetime as dt
import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from transformer_book import (  # noqa: E402
    benchmark,
    bert_heads,
    data,
    finetune,
    minilm_weights,
    qa,
)

LRS = (1e-4, 3e-4, 1e-3, 3e-3)
STEPS, BATCH, TRAIN_QUERIES, DEV_QUERIES, MAX_LEN = 25, 16, 1000, 100, 64


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lrs", nargs="+", type=float, default=list(LRS))
    p.add_argument("--steps", type=int, default=STEPS)
    p.add_argument("--train-queries", type=int, default=TRAIN_QUERIES)
    out = ROOT / "benchmarks/results/ch12_qa_learning_rate.json"
    p.add_argument("--out", default=str(out))
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    tok, minilm = (
        minilm_weights.pretrained_tokenizer(),
        minilm_weights.from_pretrained(),
    )
    atis_train, atis_dev = data.load_atis("train"), data.load_atis("dev")
    n = args.train_queries
    train_q = qa.qa_from_slots(atis_train.sentences[:n], atis_train.tags[:n])
    dev_sents = atis_dev.sentences[:DEV_QUERIES]
    dev_q = qa.qa_from_slots(dev_sents, atis_dev.tags[: len(dev_sents)])
    f_train = qa.qa_features(tok, train_q, max_len=MAX_LEN)
    f_dev = qa.qa_features(tok, dev_q, max_len=MAX_LEN)
    max_answer = max(f.end - f.start + 1 for f in f_train)
    golds = [f.example.answer_texts() for f in f_dev]
    scores = []
    for lr in args.lrs:
        start = time.process_time()
        torch.manual_seed(0)
        reader = bert_heads.SpanExtractor(copy.deepcopy(minilm))
        batches = finetune.qa_batches(tok, f_train, BATCH, seed=0)
        finetune.fine_tune(reader, batches, args.steps, lr, finetune.span_loss, seed=0)
        answers = finetune.predict_answers(reader, tok, f_dev, max_answer)
        s = qa.squad_scores(answers, golds)
        scores.append({"lr": lr, "exact_match": s["exact_match"], "f1": s["f1"],
                       "cpu_seconds": time.process_time() - start})  # fmt: skip
        print(json.dumps(scores[-1]), flush=True)
    chosen = max(scores, key=lambda s: s["f1"])["lr"]
    result = {
        "what": "QA learning rate of chapter 12, chosen by F1 on dev questions",
        "settings": {"steps": args.steps, "batch_size": BATCH, "seed": 0,
                     "train_queries": n, "dev_queries": DEV_QUERIES, "max_len": MAX_LEN},
        "dev_questions": len(f_dev), "scores": scores, "chosen_lr": chosen,
        "command": " ".join(["python benchmarks/ch12_qa_learning_rate.py",
                             *(argv if argv is not None else sys.argv[1:])]),
        "date": dt.date.today().isoformat(), "torch": torch.__version__,
        "machine": benchmark.machine(), "threads": 1,
    }  # fmt: skip
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    main()
