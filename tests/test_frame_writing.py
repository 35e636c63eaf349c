"""transformer_book.frame_writing: chapter 7's experiment (the frame vocabulary and
pairs, the training run, the cache timings, the future probe, the verdicts and the
no-mask table), each against the chapter's old inline code."""

import torch

from test_seq2seq import _options, _seed  # noqa: F401  (the same sizes and seed)
from transformer_book import frame_writing, seq2seq, training
from transformer_book.seq2seq import Seq2Seq, Seq2SeqConfig


def _frames_task():
    from transformer_book.frames import Frame
    from transformer_book.vocab import Vocab

    sentences = [["fly", "to", "rome"], ["fares", "to", "oslo", "please"], ["rome"]]
    gold = [Frame("flight", (("toloc", "rome"),)), Frame("fare", (("toloc", "oslo"),)),
            Frame("city", ())]  # fmt: skip
    vocab = frame_writing.frame_vocab(sentences, gold)
    base = Vocab.from_corpus(sentences + [f.tokens() for f in gold])
    assert vocab.itos == Vocab(["<bos>", "<eos>", *base.itos[2:]]).itos
    assert vocab.itos[:4] == ["<pad>", "<unk>", "<bos>", "<eos>"]
    src, tgt = frame_writing.frame_pairs(vocab, sentences, gold)
    assert src == [vocab.encode(s) for s in sentences]
    assert tgt == [vocab.encode(f.tokens()) + [vocab["<eos>"]] for f in gold]
    cfg = Seq2SeqConfig(len(vocab), pad_id=0, bos_id=2, eos_id=3, **_options())
    return sentences, gold, vocab, src, tgt, cfg


def test_train_run_is_the_chapters_run():
    import copy

    from transformer_book import runtime

    _, _, _, src, tgt, cfg = _frames_task()
    calls = []

    def score(m):
        calls.append(m.training)
        return float(len(calls))

    model, history, curve, early = frame_writing.train_run(
        cfg, src, tgt, 6, 1e-2, warmup=2, batch_size=2, seed=3, score=score,
        score_at=(2,), snapshot_at=3,
    )  # fmt: skip
    assert len(history) == 6 and curve == [(2, 1.0), (6, 2.0)]
    assert not early.training and early is not model
    # the chapter's train_seq2seq, inline
    runtime.seed_everything(3)
    ref = Seq2Seq(cfg)
    snap = []

    def probe(step, loss):
        if step + 1 == 3:
            snap.append(copy.deepcopy(ref).eval())

    batches = seq2seq.PairBatches(src, tgt, 2, cfg.pad_id, seed=3)
    old = training.train(ref, batches, lambda m, b: m.loss(*b), 6, lr=1e-2, warmup=2,
                         decay="cosine", on_step=probe)  # fmt: skip
    assert old == history
    for a, b in zip(model.parameters(), ref.parameters()):
        assert torch.equal(a, b)
    for a, b in zip(early.parameters(), snap[0].parameters()):
        assert torch.equal(a, b)
    # stop_at: the same first steps, on the whole run's schedule
    _, short, _, none = frame_writing.train_run(
        cfg, src, tgt, 6, 1e-2, warmup=2, batch_size=2, seed=3, stop_at=3
    )
    assert short == history[:3] and none is None


def test_future_probe_and_cache_timings_are_the_chapters_cells():
    import dataclasses
    import statistics

    from transformer_book import frames

    sentences, gold, vocab, src, tgt, cfg = _frames_task()
    model = Seq2Seq(dataclasses.replace(cfg, causal=False)).eval()

    def limit(S):
        return 2 * S + 2

    got = frame_writing.future_probe(model, vocab, sentences, src, tgt, gold, limit)
    hidden = Seq2Seq(cfg)
    hidden.load_state_dict(model.state_dict())
    seen = seq2seq.teacher_forced_scores(model, src, tgt)[0]
    unseen = seq2seq.teacher_forced_scores(hidden, src, tgt)[0]
    written = seq2seq.greedy_write(model, vocab, sentences, limit)
    assert got["seen"] == seen and got["hidden"] == unseen and got["written"] == written
    assert seen != unseen  # the unmasked model reads the future
    em = frames.exact_match(gold, [frames.parse_frame(w) for w in written])
    stops = statistics.mean(len(w) < limit(len(q)) for w, q in zip(written, sentences))
    assert got["exact_match"] == em and got["eos_share"] == stops
    causal = Seq2Seq(cfg).eval()
    got = frame_writing.future_probe(causal, vocab, sentences, src, tgt, gold, limit)
    assert abs(got["seen"] - got["hidden"]) < 1e-6  # a causal model never sees it
    seconds, same = frame_writing.cache_timings(
        causal, vocab, sentences, limit, rounds=2
    )
    assert same and [len(v) for v in seconds.values()] == [2, 2]
    assert all(t > 0 for v in seconds.values() for t in v)


def test_fit_verdicts_and_the_no_mask_table():
    under, over = frame_writing.fit_verdicts(0.8, 0.6, 0.1, 0.2)
    assert under.endswith("(it underfits)")
    assert over == "fits its training queries clearly better than it generalises"
    under, over = frame_writing.fit_verdicts(0.95, 0.93, 0.1, 0.2)
    assert under == "is right on nearly all of its own training queries"
    assert (
        over == "does not fit its training queries clearly better than it generalises"
    )
    keys = list(frame_writing.NO_MASK_MEASURES)
    rows = [dict(seed=s, causal=c, **dict.fromkeys(keys, s + (0.5 if c else 0.0)))
            for s in (0, 1, 2) for c in (True, False)]  # fmt: skip
    table, pairs = frame_writing.no_mask_table(rows)
    assert list(table) == list(frame_writing.NO_MASK_MEASURES.values())
    assert table["training loss"] == (
        "1.50 ± 1.00 (0.50–2.50)",
        "1.00 ± 1.00 (0.00–2.00)",
    )
    assert [(m["seed"], n["seed"], m["causal"], n["causal"]) for m, n in pairs] == [
        (s, s, True, False) for s in (0, 1, 2)
    ]
