"""large_rate (chapter 12's too-large learning rate): a run recorded with its curves,
dev answers, drift and intent readings, a result checked against a page's settings,
the verdicts and readings in words, on small hand-made runs whose answers are known."""

import copy
import math

import matplotlib
import pytest

from transformer_book import bert, large_rate
from transformer_book.bert_heads import SequenceClassifier
from transformer_book.finetune import ClassifierRun
from transformer_book.tokenizer import SPECIAL_TOKENS, WordPiece

matplotlib.use("Agg")
WORDS = ["to", "den", "##ver", "from", "boston", "a", ".", "m", "at", "5"]
INTENTS = (
    (["to denver", "from boston", "to denver at 5"], ["city", "airport", "city"]),
    (["to denver", "from boston"], ["city", "city"]),
)


@pytest.fixture
def tok():
    return WordPiece([*SPECIAL_TOKENS, *WORDS])


@pytest.fixture
def encoder(tok):
    config = bert.BertConfig(
        vocab_size=len(tok), d_model=16, n_layers=1, n_heads=2, d_ff=16, max_len=16
    )
    return bert.BertModel(config)


def _run(losses, lr=1e-3, steps=None):
    return {"lr": lr, "steps": steps or len(losses), "losses": losses,
            "grad_norms": [1.0] * len(losses), "dev_accuracy": 0.6,
            "dev_top_share": 0.8, "drift": 0.05, "intent_1nn": 0.7,
            "intent_probe": 0.8}  # fmt: skip


def _result():
    return {
        "settings": {"seed": 0, "factor": 10, "n_dev": 4, "n_ref": 3, "n_probes": 2,
                     "n_labels": 8, "batch_size": 2, "max_len": 16, "eval_len": 16},
        "before": {"intent_1nn": 0.81, "intent_probe": 0.875},
        "top_intent": "city",
        "intent_majority": 1.0,
        "runs": {"chosen rate": {**_run([1.0, 0.5, 0.4, 0.2], 1e-4), "drift": 0.01},
                 "large rate": _run([1.0, 2.0, 0.7, 0.8]),
                 "scratch": _run([0.7] * 4, 3e-4)},
    }  # fmt: skip


def test_intent_sets_are_atis_queries_and_their_intents():
    (ref, ref_intents), (held, held_intents) = large_rate.intent_sets(5, 3)
    assert len(ref) == len(ref_intents) == 5 and len(held) == len(held_intents) == 3
    assert all(isinstance(t, str) and t for t in ref + held)
    assert all(i.startswith("atis_") for i in ref_intents + held_intents)
    with pytest.raises(ValueError, match="n_ref and n_probes"):
        large_rate.intent_sets(0, 3)


def test_record_run_and_measure_read_the_encoder_against_its_start(tok, encoder):
    model = SequenceClassifier(copy.deepcopy(encoder), n_classes=2)
    run = ClassifierRun(model, [0.7, 0.6], [1.0, 0.5])
    plain = large_rate.record_run(run, [1, 1, 0, 1], [1, 0, 0, 1], 1e-3)
    assert plain["dev_accuracy"] == 0.75 and plain["dev_top_share"] == 0.75
    assert plain["steps"] == 2 and "drift" not in plain
    read = large_rate.record_run(run, [1, 1], [1, 0], 1e-3, encoder, tok, INTENTS)
    assert read["drift"] == 0.0  # the copy has not moved
    assert 0.0 <= read["intent_1nn"] <= 1.0 and 0.0 <= read["intent_probe"] <= 1.0
    with pytest.raises(ValueError, match="one answer per dev label"):
        large_rate.record_run(run, [1], [1, 0], 1e-3)
    with pytest.raises(ValueError, match="reference needs tok and intents"):
        large_rate.record_run(run, [1], [1], 1e-3, encoder)
    runs = {"chosen rate": (run, [1, 1], 1e-3), "scratch": (run, [0, 1], 3e-3)}
    result = large_rate.measure(runs, [1, 0], encoder, tok, INTENTS, 0, 10)
    assert result["top_intent"] == "city" and result["intent_majority"] == 1.0
    assert result["settings"] == {"seed": 0, "factor": 10, "n_dev": 2, "n_ref": 3,
                                  "n_probes": 2}  # fmt: skip
    assert "drift" in result["runs"]["chosen rate"]
    assert "drift" not in result["runs"]["scratch"]


def test_check_result_names_what_differs():
    settings = {"n_labels": 8, "batch_size": 2, "max_len": 16, "eval_len": 16}
    large_rate.check_result(_result(), settings, 0, 10, INTENTS)  # the same: silent
    with pytest.raises(ValueError, match="'seed': \\(0, 1\\)"):
        large_rate.check_result(_result(), settings, 1, 10, INTENTS)
    with pytest.raises(ValueError, match="batch_size"):
        large_rate.check_result(
            _result(), {**settings, "batch_size": 4}, 0, 10, INTENTS
        )
    other = ((INTENTS[0][0], ["airport"] * 3), INTENTS[1])
    with pytest.raises(ValueError, match="top_intent"):
        large_rate.check_result(_result(), settings, 0, 10, other)


def test_tail_loss_is_the_last_quarter_rounded_up():
    assert large_rate.tail_loss([4.0, 3.0, 2.0, 1.0]) == 1.0
    assert large_rate.tail_loss([9.0] * 5 + [1.0, 3.0]) == 2.0  # 7 updates: last 2
    with pytest.raises(ValueError, match="losses"):
        large_rate.tail_loss([])


def test_failure_kind_tells_divergence_from_collapse():
    ln2 = math.log(2)
    assert large_rate.failure_kind(3.0, 0.6).startswith("divergence")
    assert large_rate.failure_kind(float("nan"), 0.6).startswith("divergence")
    assert large_rate.failure_kind(ln2, 0.99).startswith("a collapse to a constant")
    assert large_rate.failure_kind(0.3, 0.99).endswith("came down, to a worse model")
    assert large_rate.failure_kind(ln2, 0.6).endswith("still vary with the sentence")


def test_forgetting_words_compare_with_the_noise():
    # probe before 0.8 on 100 queries: noise 2 * sqrt(0.8 * 0.2 / 100) = 0.08
    words = large_rate.forgetting_words(
        0.45, 0.80, {"ok": 0.78, "mid": 0.71, "big": 0.60}, majority=0.40, n_probes=100
    )
    assert words["noise"] == "0.080"
    assert words["knn_floor"] == "no better than always answering it"  # 0.45 < 0.48
    assert words["probe_room"].startswith("it stands above the majority")
    assert words["knn_ok"] == "within the noise of the score before"
    assert words["knn_big"] == "below the score before by more than the noise"
    # 0.09 lower: beyond one score's noise, within a difference's (0.08 * sqrt 2)
    assert words["knn_mid"] == "within the noise of the score before"
    flat = large_rate.forgetting_words(0.6, 0.45, {}, majority=0.40, n_probes=100)
    assert flat["knn_floor"] == "above it by more than the noise"
    assert flat["probe_room"].startswith("it does not stand above the majority")


def test_readings_table_and_words_read_the_result():
    result = _result()
    values = large_rate.readings(result)
    assert values["k0"] == 0.875 and values["d_ok"] == 0.01 and values["d_big"] == 0.05
    assert values["tail_ok"] == 0.2 and values["tail_big"] == 0.8
    table = large_rate.readings_table(result)
    assert table.splitlines()[0].startswith("majority intent (city) of the 3 reference")
    assert "lr 0.0001: weight drift 0.010" in table
    assert table.endswith("dev accuracy at lr 0.001: 0.600 (4 sentences)")
    assert large_rate.settings_words({**result, "top_intent": "atis_flight"}) == {
        "big_factor": "10", "big_steps": "4", "big_seed": "0", "n_big_dev": "4",
        "n_ref": "3", "n_probes": "2", "top_intent": "flight",
    }  # fmt: skip
    assert large_rate.where_words(True, result).startswith("The runs are made here")
    assert "all 4 dev sentences" in large_rate.where_words(False, result)
    cpu = {**result, "runs": {"a": {"cpu_seconds": 90.0}, "b": {"cpu_seconds": 30}}}
    assert "(about 2 CPU-minutes, committed)" in large_rate.cpu_words(cpu)


def test_sweep_runs_at_a_rate_and_in_words():
    run = {"lr": 1e-3, "steps": 64, "seed": 0, "dev_accuracy": 0.6,
           "selection_accuracy": 0.55}  # fmt: skip
    few = {"selection_runs": {"pre-trained/cls": [{"lr": 1e-4}, run],
                              "pre-trained/mean": [{"lr": 1e-4}]}}  # fmt: skip
    assert large_rate.sweep_runs_at(few, 1e-3) == {"cls": run, "mean": None}
    with pytest.raises(ValueError, match="arm"):
        large_rate.sweep_runs_at(few, 1e-3, "other")
    words = large_rate.sweep_words(run, 872, 0.509)
    assert words == (
        "the sweep's own run of this rate and head, with the same 64 updates (seed 0), "
        "scored 0.600 on all 872 dev sentences (0.550 on the selection split), "
        "against 0.509 for the majority"
    )
    assert large_rate.sweep_words(None, 872, 0.5) == "the sweep did not run this rate"


def test_plot_runs_draws_three_runs_in_two_panels():
    fig = large_rate.plot_runs(_result())
    loss, norm = fig.axes
    labels = [line.get_label() for line in loss.get_lines()[:3]]
    assert labels == ["pre-trained, lr 0.0001", "scratch, lr 0.0003",
                      "pre-trained, lr 0.001"]  # fmt: skip
    assert norm.get_yscale() == "log"
