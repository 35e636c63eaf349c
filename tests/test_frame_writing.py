"""transformer_book.frame_writing: chapter 7's experiment (the frame vocabulary and
pairs, the training run, the cache timings, the future probe, the verdicts and the
no-mask table), each against the chapter's old inline code."""

import pytest
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


def test_fit_table_and_future_probe_text_print_the_chapters_tables():
    text = frame_writing.fit_table({"train": (0.9, 0.1, 0.8), "dev": (0.7, 0.3, 0.6)})
    head, train, dev = text.split("\n")
    assert "greedy exact match" in head and head.endswith("all argmax")
    assert train == f"{'train':22}{0.9:>20.3f}{0.1:>22.3f}{0.8:>12.3f}"
    with pytest.raises(ValueError, match="rows must hold"):
        frame_writing.fit_table({"train": (0.9, 0.1)})
    row = dict(seen=0.1, hidden=0.2, exact_match=0.3, eos_share=0.4)
    table = {"masked": {**row, "written": [["a"] * 13]},
             "no mask": {**row, "written": [["b", "c"]]}}  # fmt: skip
    lines = frame_writing.future_probe_text(table, ["x", "y"]).split("\n")
    assert lines[1] == f"{'masked':<18}{0.1:>22.3f}{0.2:>8.3f}{0.3:>13.3f}{0.4:>15.3f}"
    assert lines[3:] == ["", "x y", "  masked: " + " ".join("a" * 12) + " ...",
                         "  no mask: b c"]  # fmt: skip
    with pytest.raises(ValueError, match="n_tokens must be >= 1"):
        frame_writing.future_probe_text(table, ["x"], 0)


def test_wrong_frames_counts_the_kinds_beside_the_tagger():
    from transformer_book.frames import Frame

    query = ["flights", "from", "boston"]
    gold = Frame("atis_flight", (("fromloc.city_name", "boston"),))
    unseen = Frame("atis_new", ())  # an intent no training frame holds
    golds = [gold, gold, gold, unseen, gold]
    preds = [gold, Frame("atis_airfare", gold.slots), Frame("atis_flight"),
             Frame("atis_flight"), Frame("atis_flight")]  # fmt: skip
    tags = [gold, gold, Frame("atis_flight"), Frame("atis_flight"), gold]
    writable = [True, True, True, False, False]
    found = frame_writing.wrong_frames(
        golds, preds, tags, [query] * 5, writable, [gold]
    )
    assert found.indices == {
        "wrong": [1, 2, 3, 4],
        "oov": [3, 4],
        "unseen_name": [3],
        "tagger_right": [1, 4],
        "rest": [2],
        "rest_tag_wrong": [2],
    }
    assert found.text.startswith("4 wrong frames of 5; of these,")
    assert "       1 of which an intent or a slot name unseen in training" in found.text
    assert found.text.endswith("the tagger's frame is wrong too for 1 of the 1")
    with pytest.raises(ValueError, match="tag_pred holds 1 frames for 5 gold"):
        frame_writing.wrong_frames(golds, preds, tags[:1], [query] * 5, writable, [])


def test_cache_speedups_read_the_rounds():
    by_round, text = frame_writing.cache_speedups({False: [4.0, 6.0], True: [1.0, 2.0]})
    assert by_round == [4.0, 3.0]
    assert text == (
        "median seconds without the cache 5.000, with it 1.500\n"
        "speed-up, round by round: 4.0, 3.0"
    )
    with pytest.raises(ValueError, match="as many rounds"):
        frame_writing.cache_speedups({False: [1.0], True: []})
