"""Token accuracy, BIO spans and span-level scores on hand-made cases; the chapter 05
metric exercises."""

import statistics

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


def _pr_f1(guard):
    """Span F1 as P = c/|pred|, R = c/|gold|, 2PR/(P + R), with the given guard."""

    def span_f1(gold, pred):
        g = {(n, *s) for n, tags in enumerate(gold) for s in metrics.bio_spans(tags)}
        p = {(n, *s) for n, tags in enumerate(pred) for s in metrics.bio_spans(tags)}
        c = len(g & p)
        if guard(c, len(p), len(g)):
            return 0.0
        precision, recall = c / len(p), c / len(g)
        return 2 * precision * recall / (precision + recall)

    return span_f1


def test_check_span_f1_names_a_division_by_zero(capsys):
    # the guard the old text asked for (nothing predicted and nothing gold) is not
    # enough: all-O predictions give P = 0/0, and the check must say so, not crash
    only_both_empty = _pr_f1(lambda c, n_pred, n_gold: n_pred == n_gold == 0)
    with pytest.raises(checks.ExerciseError, match="nothing is predicted") as err:
        checks.check_span_f1(only_both_empty)
    assert "divided by zero" in str(err.value)

    # nothing predicted guarded, but P + R = 0 when spans are predicted and none is right
    no_pred = _pr_f1(lambda c, n_pred, n_gold: n_pred == 0 or n_gold == 0)
    with pytest.raises(checks.ExerciseError, match="none is correct"):
        checks.check_span_f1(no_pred)

    def per_sentence(gold, pred):  # divides inside a sentence with no predicted span
        return statistics.mean(
            _pr_f1(lambda *a: False)([g], [p]) for g, p in zip(gold, pred)
        )

    with pytest.raises(checks.ExerciseError, match="whole corpus first"):
        checks.check_span_f1(per_sentence)

    # the P/R form with the guard the exercise states now (0 when no span is correct)
    checks.check_span_f1(_pr_f1(lambda c, n_pred, n_gold: c == 0))
    assert capsys.readouterr().out.count("Correct:") == 1


def test_check_span_f1_wants_zero_without_spans():
    def one_when_empty(gold, pred):  # F1 = 1 when there is no span on either side
        f1 = metrics.span_scores(gold, pred)
        return 1.0 if f1.n_pred == f1.n_gold == 0 else f1.f1

    with pytest.raises(checks.ExerciseError, match="no span at all"):
        checks.check_span_f1(one_when_empty)


def test_pooled_span_scores_adds_the_counts():
    gold = [["B-a", "O", "B-b"], ["B-a", "I-a", "B-c"]]
    pred = [["B-a", "O", "O"], ["B-a", "B-a", "B-c"]]
    by_type = metrics.span_scores_by_type(gold, pred)
    pooled = metrics.pooled_span_scores(list(by_type.values()))
    assert pooled == metrics.span_scores(gold, pred)
    assert (pooled.n_gold, pooled.n_pred, pooled.n_correct) == (4, 4, 2)


def test_confusions_their_kinds_and_added_roles():
    gold = [["O", "B-city_name", "B-toloc.city_name", "I-toloc.city_name", "B-date"]]
    pred = [
        ["B-date", "B-toloc.city_name", "B-fromloc.city_name", "B-toloc.city_name", "O"]
    ]
    confusions = metrics.tag_confusions(gold, pred)
    assert sum(confusions.values()) == 5
    assert confusions[("B-city_name", "B-toloc.city_name")] == 1
    kinds = metrics.confusion_kinds(confusions)
    # O->date and date->O: missed or invented; city_name->toloc and toloc->fromloc:
    # wrong type; I-toloc -> B-toloc: boundary
    assert kinds == {"missed or invented": 2, "wrong type": 2, "boundary": 1}
    assert metrics.role_added(confusions, ("city_name",)) == 1
    assert metrics.role_added(confusions, ("airport_name",)) == 0
    with pytest.raises(ValueError):
        metrics.tag_confusions(gold, [])


def test_slot_roles_reads_the_role_before_the_dot():
    tags = [["B-fromloc.city_name", "I-fromloc.city_name", "B-toloc.city_name"],
            ["B-city_name", "B-airport_name", "B-toloc.airport_name"]]  # fmt: skip
    roles = metrics.slot_roles(tags, "city_name")
    assert roles == {"fromloc": 1, "toloc": 1, "no role": 1}
    assert metrics.slot_roles(tags, "airport_name") == {"no role": 1, "toloc": 1}


def test_distinct_ngram_share_and_known_word_share():
    assert metrics.distinct_ngram_share("abcdef") == 1.0  # 3 strings of 4, none repeats
    assert metrics.distinct_ngram_share("abababab") == 2 / 5  # abab, baba
    assert metrics.distinct_ngram_share("abcabc", n=3) == 3 / 4
    known = {"to", "be"}
    assert metrics.known_word_share(["to be or", "not to be"], known) == 4 / 6


def test_mean_distinct_share_averages_each_text_on_its_own():
    assert metrics.mean_distinct_share(["abcdef", "abababab"]) == (1.0 + 2 / 5) / 2
    with pytest.raises(ValueError, match="texts must hold at least one text"):
        metrics.mean_distinct_share([])


def test_auc_counts_the_pairs_ranked_right_ties_half():
    assert metrics.auc([3.0, 4.0], [1.0, 2.0]) == 1.0
    assert metrics.auc([1.0, 2.0], [3.0, 4.0]) == 0.0
    assert metrics.auc([1.0], [1.0]) == 0.5
    positive, negative = [0.9, 0.4, 0.4, 0.7], [0.4, 0.1, 0.8]
    by_pairs = sum(
        1.0 if p > n else 0.5 if p == n else 0.0 for p in positive for n in negative
    ) / (len(positive) * len(negative))
    assert metrics.auc(positive, negative) == pytest.approx(by_pairs)
    with pytest.raises(ValueError, match="positive and negative"):
        metrics.auc([], [0.1])


def test_unknown_words_removed_with_its_bootstrap_interval():
    known = {"to", "be"}
    base = ["to qq", "be zz"]  # half the words unknown
    cut = ["to be", "be zz"]  # a quarter unknown: half of base's unknown share removed
    share, low, high = metrics.unknown_words_removed(base, cut, known, resamples=400)
    assert share == pytest.approx(0.5)
    assert low <= share <= high and low < high  # the texts differ: draws spread
    # a draw of the cut texts may keep all the unknown words, or remove them all
    assert low == pytest.approx(0.0) and high == pytest.approx(1.0)
    # identical texts on each side: every draw is the same, the interval a point
    same = metrics.unknown_words_removed(["qq to"] * 4, ["to be"] * 4, known)
    assert same == (1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="no unknown word"):
        metrics.unknown_words_removed(["to be"], ["qq"], known)
