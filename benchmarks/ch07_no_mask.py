"""Chapter 7's "why the mask" experiment (section 8) on several seeds: the quick
profile's encoder-decoder trained for its first 100 steps (of the 450-step schedule:
AdamW at 8e-3, 50 warm-up steps, cosine decay, batches of 64), with and without the
decoder's causal mask, from the same initial weights and the same batches per seed.
For each arm: the mean training loss of steps 91-100, the teacher-forced loss on the
first 100 ATIS dev queries with the future in view and hidden (the same weights with
the mask), the greedy exact match and the share of outputs that end in <eos> on those
queries. The chapter runs seed 0 itself and prints these seeds' spread beside it.

    python benchmarks/ch07_no_mask.py [SEEDS ...]   # default 0 1 2 3 4

writes benchmarks/results/ch07_no_mask.json (1 thread, CPU).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import statistics
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from transformer_book import data, frame_writing, frames, seq2seq  # noqa: E402

STEPS, SCHEDULE, WARMUP, LR, BATCH, N_DEV = 100, 450, 50, 8e-3, 64, 100
SIZES = dict(d_model=64, n_heads=4, d_ff=256, n_encoder_layers=1, n_decoder_layers=1,
             dropout=0.0)  # fmt: skip
RESULT = ROOT / "benchmarks" / "results" / "ch07_no_mask.json"


def main(seeds: list[int]) -> None:
    torch.set_num_threads(1)
    train, dev = data.load_atis("train"), data.load_atis("dev")
    gold = {
        name: [frames.frame_from_tags(*x) for x in zip(d.sentences, d.tags, d.intents)]
        for name, d in (("train", train), ("dev", dev))
    }
    # the vocabulary and the pairs, as in the chapter
    vocab = frame_writing.frame_vocab(train.sentences, gold["train"])
    train_src, train_tgt = frame_writing.frame_pairs(
        vocab, train.sentences, gold["train"]
    )
    dev_src, dev_tgt = frame_writing.frame_pairs(vocab, dev.sentences, gold["dev"])
    probe = [x[:N_DEV] for x in (dev.sentences, dev_src, dev_tgt, gold["dev"])]
    config = seq2seq.Seq2SeqConfig(
        len(vocab), pad_id=vocab.pad_id, bos_id=vocab["<bos>"], eos_id=vocab["<eos>"],
        **SIZES,
    )  # fmt: skip
    rows = []
    for seed in seeds:
        for causal in (True, False):
            model, history, _, _ = frame_writing.train_run(
                dataclasses.replace(config, causal=causal), train_src, train_tgt,
                SCHEDULE, LR, warmup=WARMUP, batch_size=BATCH, seed=seed, stop_at=STEPS,
                progress=False,
            )  # fmt: skip
            found = frame_writing.future_probe(
                model, vocab, *probe, lambda S: 2 * S + 2
            )
            row = dict(
                seed=seed, causal=causal, train_loss=statistics.mean(history[-10:]),
                dev_loss_seen=found["seen"], dev_loss_hidden=found["hidden"],
                exact_match=found["exact_match"], eos_share=found["eos_share"],
            )  # fmt: skip
            rows.append(row)
            print(json.dumps(row), flush=True)
    result = dict(
        steps=STEPS, schedule_steps=SCHEDULE, warmup=WARMUP, lr=LR, batch_size=BATCH,
        sizes=SIZES, dev_queries=N_DEV, seeds=seeds, rows=rows,
        torch=torch.__version__, date=dt.date.today().isoformat(),
        command="python benchmarks/ch07_no_mask.py " + " ".join(map(str, seeds)),
    )  # fmt: skip
    RESULT.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {RESULT.relative_to(ROOT)}")


if __name__ == "__main__":
    main([int(x) for x in sys.argv[1:]] or [0, 1, 2, 3, 4])
