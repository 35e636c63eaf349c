"""Chapter 12's choice of the QA learning rate, made on the DEV questions (the test
questions only report): the notebook's QA recipe (all-MiniLM-L6-v2 with a span head,
token embeddings frozen, 50 updates of 16, seed 0) at each rate given, scored by SQuAD
exact match and F1 on the questions of the first 100 ATIS dev queries.

    python benchmarks/ch12_qa_learning_rate.py 1e-4 3e-4 1e-3

Run on 2026-11-30 (1 thread, before the recipe moved into ``finetune.fine_tune``, whose
batches are bucketed by length and whose dropout draws from the seed): 1e-4 EM 0.433 /
F1 0.541, 3e-4 EM 0.467 / F1 0.600, 1e-3 EM 0.295 / F1 0.322 on 349 questions; chapter
12 uses 3e-4.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from transformer_book import bert, bert_heads, data, finetune, qa  # noqa: E402


def main(rates: list[float]) -> None:
    torch.set_num_threads(1)
    tok, minilm = bert.pretrained_tokenizer(), bert.from_pretrained()
    atis_train, atis_dev = data.load_atis("train"), data.load_atis("dev")
    train_q = qa.qa_from_slots(atis_train.sentences, atis_train.tags)
    dev_sents = atis_dev.sentences[:100]
    dev_q = qa.qa_from_slots(dev_sents, atis_dev.tags[: len(dev_sents)])
    f_train = qa.qa_features(tok, train_q, max_len=64)
    f_dev = qa.qa_features(tok, dev_q, max_len=64)
    max_answer = max(f.end - f.start + 1 for f in f_train)
    golds = [f.example.answer_texts() for f in f_dev]
    for lr in rates:
        torch.manual_seed(0)
        reader = bert_heads.SpanExtractor(copy.deepcopy(minilm))
        batches = finetune.qa_batches(tok, f_train, 16, seed=0)
        finetune.fine_tune(reader, batches, 50, lr, finetune.span_loss, seed=0)
        answers = finetune.predict_answers(reader, tok, f_dev, max_answer)
        scores = qa.squad_scores(answers, golds)
        print(f"lr {lr:g}: {len(answers)} dev questions, "
              f"EM {scores['exact_match']:.3f}, F1 {scores['f1']:.3f}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main([float(x) for x in sys.argv[1:]] or [1e-4, 3e-4, 1e-3])
