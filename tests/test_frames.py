"""Frames (src/transformer_book/frames.py): linearise, parse back, score."""

import os

import pytest

from transformer_book import data, data_files, frames, metrics
from transformer_book.frames import Frame

WORDS = str.split("show me flights from boston to new york at lunch time")
TAGS = [
    "O",
    "O",
    "O",
    "O",
    "B-fromloc.city_name",
    "O",
    "B-toloc.city_name",
    "I-toloc.city_name",
    "O",
    "B-depart_time.period_of_day",
    "I-depart_time.period_of_day",
]
GOLD = Frame(
    "atis_flight",
    (
        ("fromloc.city_name", "boston"),
        ("toloc.city_name", "new york"),
        ("depart_time.period_of_day", "lunch time"),
    ),
)


def test_frame_from_tags_and_linearisation():
    f = frames.frame_from_tags(WORDS, TAGS, "atis_flight")
    assert f == GOLD
    assert str(f) == (
        "atis_flight fromloc.city_name: boston toloc.city_name: new york "
        "depart_time.period_of_day: lunch time"
    )


def test_parse_inverts_linearise():
    assert frames.parse_frame(GOLD.tokens()) == GOLD
    assert frames.parse_frame(str(GOLD)) == GOLD
    # a slot name that is also a word ("time" is an ATIS slot) stays readable
    f = Frame("atis_flight", (("time", "time"), ("meal", "lunch time")))
    assert frames.parse_frame(f.tokens()) == f
    assert frames.parse_frame(["atis_airline"]) == Frame("atis_airline")


def test_parse_is_lenient_with_malformed_output():
    f = frames.parse_frame("fromloc.city_name: boston toloc.city_name:")
    assert f == Frame("", (("fromloc.city_name", "boston"), ("toloc.city_name", "")))
    f = frames.parse_frame("atis_flight boston to denver toloc.city_name: denver")
    assert f.slots == (("", "boston to denver"), ("toloc.city_name", "denver"))
    assert frames.parse_frame([]) == Frame("")
    assert not f.same_as(Frame("atis_flight", (("toloc.city_name", "denver"),)))


def test_marked_words_cannot_be_linearised():
    with pytest.raises(ValueError, match="may not end with ':'"):
        Frame("atis_flight", (("city", "boston:"),)).tokens()


def test_stray_inside_tag_opens_a_slot_like_conlleval():
    tags = ["O", "I-toloc.city_name", "B-fromloc.city_name", "I-toloc.city_name"]
    f = frames.frame_from_tags(["to", "denver", "from", "boston"], tags, "x")
    assert f.slots == (
        ("toloc.city_name", "denver"),
        ("fromloc.city_name", "from"),
        ("toloc.city_name", "boston"),
    )
    assert len(f.slots) == len(metrics.bio_spans(tags))


def test_exact_match_ignores_slot_order_but_not_multiplicity():
    swapped = Frame(GOLD.intent, GOLD.slots[::-1])
    assert swapped != GOLD and swapped.same_as(GOLD)
    wrong_intent = Frame("atis_airfare", GOLD.slots)
    missing = Frame(GOLD.intent, GOLD.slots[:2])
    doubled = Frame(GOLD.intent, GOLD.slots + GOLD.slots[:1])
    pred = [swapped, wrong_intent, missing, doubled]
    assert frames.exact_match([GOLD] * 4, pred) == 0.25


def test_slot_scores_count_pairs_per_query():
    gold = [GOLD, Frame("atis_airfare", (("city_name", "boston"),))]
    pred = [
        Frame("atis_airline", GOLD.slots[:2] + (("toloc.city_name", "denver"),)),
        Frame("atis_airfare", (("city_name", "boston"), ("city_name", "boston"))),
    ]
    s = frames.slot_scores(gold, pred)
    assert (s.n_gold, s.n_pred, s.n_correct) == (4, 5, 3)  # intent plays no part
    assert s.precision == pytest.approx(3 / 5) and s.recall == pytest.approx(3 / 4)
    assert s.f1 == pytest.approx(2 * 3 / (4 + 5))
    # the same slot in another query does not count
    s = frames.slot_scores([GOLD, Frame("x")], [Frame("x"), GOLD])
    assert s.n_correct == 0


def test_frame_scores_gather_every_score():
    gold = [GOLD, Frame("atis_airfare", (("city_name", "boston"),))]
    pred = [Frame("atis_airline", GOLD.slots), Frame("atis_airfare")]
    got = frames.frame_scores(gold, pred)
    s = frames.slot_scores(gold, pred)
    assert got == {
        "exact match": 0.0,
        "slot P": s.precision,
        "slot R": s.recall,
        "slot F1": s.f1,
        "intent acc": 0.5,
    }
    with pytest.raises(ValueError, match="frame_scores: gold has 1 frames"):
        frames.frame_scores([GOLD], [])


def test_mean_scores_and_the_scores_table_over_seeds():
    scores = {0: {"exact match": 0.5, "intent acc": 0.8},
              1: {"exact match": 0.7, "intent acc": 0.9}}  # fmt: skip
    assert frames.mean_scores(scores) == pytest.approx(
        {"exact match": 0.6, "intent acc": 0.85}
    )
    table = frames.scores_table(
        {"model": scores, "one seed": {0: scores[0]}}, "test", {"majority": 0.25}
    )
    head, two, one, majority = table.split("\n")
    assert head == f"{'test':<26}{'exact match':>14}{'intent acc':>14}"
    assert two == f"{'model':<26}{'0.600 ± 0.141':>14}{'0.850 ± 0.071':>14}"
    assert one == f"{'one seed':<26}{'0.500':>14}{'0.800':>14}"
    assert majority == f"{'majority':<26}{'':>14}{'0.250':>14}"
    with pytest.raises(ValueError, match="at least one seed"):
        frames.mean_scores({})
    with pytest.raises(ValueError, match="rows must name at least one"):
        frames.scores_table({}, "test")


@pytest.mark.parametrize(
    "pred, kinds",
    [
        (Frame(GOLD.intent, GOLD.slots[::-1]), set()),
        (Frame("atis_airfare", GOLD.slots), {"wrong intent"}),
        (Frame(GOLD.intent, GOLD.slots[:2]), {"slot left out"}),
        (
            Frame(GOLD.intent, GOLD.slots + (("stoploc.city_name", "boston"),)),
            {"slot added"},
        ),
        (
            Frame(GOLD.intent, (("toloc.city_name", "boston"),) + GOLD.slots[1:]),
            {"slot left out", "slot added"},
        ),  # a renamed slot
        (
            Frame(GOLD.intent, (("fromloc.city_name", "new"),) + GOLD.slots[1:]),
            {"wrong value"},
        ),
        (
            Frame(GOLD.intent, (("fromloc.city_name", "denver"),) + GOLD.slots[1:]),
            {"wrong value", "invented word"},
        ),
    ],
)
def test_mistakes_name_how_a_frame_differs(pred, kinds):
    assert frames.mistakes(GOLD, pred, WORDS) == kinds
    assert kinds <= set(frames.MISTAKES)
    assert (not kinds) == GOLD.same_as(pred)


def test_bad_input_raises():
    with pytest.raises(ValueError, match="gold has 1 frames but pred has 2"):
        frames.exact_match([GOLD], [GOLD, GOLD])
    with pytest.raises(ValueError, match="no frames"):
        frames.slot_scores([], [])
    with pytest.raises(ValueError, match="must hold Frame objects"):
        frames.exact_match([GOLD], [str(GOLD)])
    with pytest.raises(ValueError, match="got 2 words but 3 tags"):
        frames.frame_from_tags(["a", "b"], ["O", "O", "O"], "x")


@pytest.mark.skipif(
    not os.environ.get(data_files.DATA_ENV), reason=f"${data_files.DATA_ENV} is not set"
)
def test_every_atis_frame_round_trips():
    for split in ("train", "dev", "test"):
        d = data.load_atis(split)
        gold = [
            frames.frame_from_tags(w, t, i)
            for w, t, i in zip(d.sentences, d.tags, d.intents)
        ]
        back = [frames.parse_frame(f.tokens()) for f in gold]
        assert back == gold
        assert frames.exact_match(gold, back) == 1.0
        n_spans = sum(len(metrics.bio_spans(t)) for t in d.tags)
        assert frames.slot_scores(gold, back).n_correct == n_spans


def test_sort_mistakes_sorts_as_the_chapter_did():
    query = ["flights", "from", "boston", "to", "denver"]
    gold = Frame(
        "atis_flight", (("fromloc.city_name", "boston"), ("toloc.city_name", "denver"))
    )
    preds = [
        gold,  # right
        Frame("atis_airfare", gold.slots),  # wrong intent
        Frame("atis_flight", (("fromloc.city_name", "paris"),)),  # invented, left out
        Frame("atis_flight", (("fromloc.city_name", "boston"),)),  # left out
        Frame("atis_flight", gold.slots + (("depart_date.day_name", "to"),)),  # added
        Frame(
            "atis_flight",
            (("fromloc.city_name", "denver"), ("toloc.city_name", "boston")),
        ),
        gold,  # right, though its gold holds an unknown token
        Frame("atis_flight", ()),  # unwritable gold, wrong
    ]
    golds, sentences = [gold] * len(preds), [query] * len(preds)
    writable = [True] * 6 + [False, False]
    kinds, rest, slot_kinds = frames.sort_mistakes(golds, preds, sentences, writable)
    # the chapter's inline code
    wrong = [n for n, (g, p) in enumerate(zip(golds, preds)) if not g.same_as(p)]
    how = {n: frames.mistakes(golds[n], preds[n], sentences[n]) for n in wrong}
    assert kinds == {
        "hold a token outside the vocabulary": [n for n in wrong if not writable[n]],
        "write a word that is not in the query": [
            n for n in wrong if "invented word" in how[n]
        ],
        "have the wrong intent": [n for n in wrong if "wrong intent" in how[n]],
    }
    assert kinds == {
        "hold a token outside the vocabulary": [7],
        "write a word that is not in the query": [2],
        "have the wrong intent": [1],
    }
    assert rest == [3, 4, 5]
    assert slot_kinds == {
        "leave out a gold slot": [3],
        "add a slot": [4],
        "have the gold slot names, a wrong value": [5],
    }
    with pytest.raises(ValueError):
        frames.sort_mistakes(golds, preds[:2], sentences, writable)
