"""Token accuracy, BIO spans and span-level scores on hand-made cases; the chapter 05
metric exercises."""

import pytest

from transformer_book import checks, metrics


def test_token_accuracy_counts_every_token():
    gold = [["O", "B-a", "I-a"], ["O"]]
    pred = [["O", "B-a", "O"], ["B-b"]]
    assert metrics.token_accuracy(gold, pred) == pytest.approx(2 / 4)
    assert metrics.token_accuracy(gold, pred, ignore="O") == pytest.approx(
        1 / 2
    )  # only B-a, I-a are scored


def test_token_accuracy_rejects_misaligned_input():
    with pytest.raises(ValueError, match="sentence 0 has 2 gold tags but 1 predicted"):
        metrics.token_accuracy([["O", "O"]], [["O"]])
    with pytest.raises(ValueError, match="gold has 1 items but pred has 2"):
        metrics.token_accuracy([["O"]], [["O"], ["O"]])


def test_accuracy():
    assert metrics.accuracy(["a", "b", "c", "d"], ["a", "b", "x", "d"]) == 0.75
    with pytest.raises(ValueError, match="empty"):
        metrics.accuracy([], [])


@pytest.mark.parametrize(
    "tags, spans",
    [
        ([], []),
        (["O", "O"], []),
        (["B-city"], [("city", 0, 1)]),
        (["O", "B-city", "I-city", "I-city", "O"], [("city", 1, 4)]),
        (["B-city", "I-city"], [("city", 0, 2)]),  # a span that runs to the end
        (
            ["B-city", "B-city"],
            [("city", 0, 1), ("city", 1, 2)],
        ),  # B- after a span starts a new one
        (
            ["O", "I-city", "I-city"],
            [("city", 1, 3)],
        ),  # a stray I- starts a span (conlleval)
        (["I-city"], [("city", 0, 1)]),
        (
            ["B-from", "I-to", "I-to"],
            [("from", 0, 1), ("to", 1, 3)],
        ),  # a type change ends the span
        (
            ["B-a.b_c", "I-a.b_c", "O", "B-d"],
            [("a.b_c", 0, 2), ("d", 3, 4)],
        ),  # types may hold dots and underscores
    ],
)
def test_bio_spans(tags, spans):
    assert metrics.bio_spans(tags) == spans


def test_bio_spans_rejects_unknown_tags():
    with pytest.raises(ValueError, match="'X-city' at position 1"):
        metrics.bio_spans(["O", "X-city"])
    with pytest.raises(ValueError, match="'B-' at position 0"):
        metrics.bio_spans(["B-"])


def test_span_scores_by_hand():
    gold = [["B-a", "I-a", "O", "B-b"], ["O", "B-c"]]
    pred = [
        ["B-a", "O", "O", "B-b"],
        ["O", "B-c"],
    ]  # (a, 0, 2) cut short: wrong; b and c right
    s = metrics.span_scores(gold, pred)
    assert (s.n_gold, s.n_pred, s.n_correct) == (3, 3, 2)
    assert (
        s.precision == pytest.approx(2 / 3)
        and s.recall == pytest.approx(2 / 3)
        and s.f1 == pytest.approx(2 / 3)
    )
    assert "F1 0.6667" in str(s)


def test_span_scores_precision_and_recall_differ():
    gold = [["B-a", "O", "O"]]
    pred = [["B-a", "B-b", "B-c"]]
    s = metrics.span_scores(gold, pred)
    assert (
        s.precision == pytest.approx(1 / 3)
        and s.recall == 1.0
        and s.f1 == pytest.approx(0.5)
    )


def test_o_tokens_earn_nothing():
    gold = [["O", "O", "O", "B-a", "O", "O"]]
    all_o = [["O"] * 6]
    assert metrics.token_accuracy(gold, all_o) == pytest.approx(
        5 / 6
    )  # token accuracy flatters
    s = metrics.span_scores(gold, all_o)
    assert (s.n_pred, s.n_correct, s.precision, s.recall, s.f1) == (0, 0, 0.0, 0.0, 0.0)


def test_same_span_in_another_sentence_does_not_count():
    gold = [["B-a", "O"], ["O", "O"]]
    pred = [["O", "O"], ["B-a", "O"]]
    assert metrics.span_scores(gold, pred).n_correct == 0


def test_perfect_prediction_and_empty_corpus():
    gold = [["B-a", "I-a", "O", "B-b"]]
    assert metrics.span_scores(gold, gold).f1 == 1.0
    assert (
        metrics.span_scores([["O"]], [["O"]]).f1 == 0.0
    )  # no spans at all: 0, as conlleval reports


def test_span_scores_by_type_adds_up():
    gold = [["B-a", "I-a", "O", "B-b"], ["B-b", "O"]]
    pred = [["B-a", "I-a", "O", "B-a"], ["B-b", "O"]]
    by_type = metrics.span_scores_by_type(gold, pred)
    assert list(by_type) == ["a", "b"]
    assert (by_type["a"].n_gold, by_type["a"].n_pred, by_type["a"].n_correct) == (
        1,
        2,
        1,
    )
    assert (by_type["b"].n_gold, by_type["b"].n_pred, by_type["b"].n_correct) == (
        2,
        1,
        1,
    )
    total = metrics.span_scores(gold, pred)
    assert sum(s.n_correct for s in by_type.values()) == total.n_correct
    assert sum(s.n_pred for s in by_type.values()) == total.n_pred


# --- the exercise checks -------------------------------------------------------------------


def test_checks_accept_the_reference(capsys):
    checks.check_bio_spans(metrics.bio_spans)
    checks.check_span_f1(lambda g, p: metrics.span_scores(g, p).f1)
    assert capsys.readouterr().out.count("Correct:") == 2


def test_check_bio_spans_explains_mistakes():
    def inclusive_end(tags):
        return [(t, s, e - 1) for t, s, e in metrics.bio_spans(tags)]

    with pytest.raises(checks.ExerciseError, match="one too small"):
        checks.check_bio_spans(inclusive_end)

    def drops_stray_i(tags):
        return [s for s in metrics.bio_spans(tags) if tags[s[1]].startswith("B-")]

    with pytest.raises(checks.ExerciseError, match="stray I-"):
        checks.check_bio_spans(drops_stray_i)

    def stub(tags):
        raise NotImplementedError

    with pytest.raises(checks.ExerciseError, match="not written yet"):
        checks.check_bio_spans(stub)


def test_check_span_f1_explains_mistakes():
    with pytest.raises(checks.ExerciseError, match="token accuracy"):
        checks.check_span_f1(metrics.token_accuracy)

    def pooled(gold, pred):  # forgets which sentence a span came from
        g = {s for tags in gold for s in metrics.bio_spans(tags)}
        p = {s for tags in pred for s in metrics.bio_spans(tags)}
        return 2 * len(g & p) / (len(g) + len(p))

    with pytest.raises(checks.ExerciseError, match="sentence index"):
        checks.check_span_f1(pooled)

    def counts_o(
        gold, pred
    ):  # right on the test corpus only by luck? No: scores O tokens as spans
        def spans(tags):
            return {(i, t) for i, t in enumerate(tags)}

        g = {(n, *s) for n, tags in enumerate(gold) for s in spans(tags)}
        p = {(n, *s) for n, tags in enumerate(pred) for s in spans(tags)}
        return 2 * len(g & p) / (len(g) + len(p))

    with pytest.raises(checks.ExerciseError):
        checks.check_span_f1(counts_o)
