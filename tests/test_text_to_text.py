"""text_to_text (chapter 10, section 9): intents written as words, the teacher-forced
exact match against greedy decoding, and the fine-tuning run's bookkeeping."""

import pytest
import torch

from transformer_book import t5, text_to_text, vocab

PAD, EOS = 0, 1


@pytest.fixture
def model():
    torch.manual_seed(0)
    config = t5.T5Config(20, 32, 2, 4, 64, pad_id=PAD, eos_id=EOS)
    model = t5.T5(config).eval()
    with torch.no_grad():  # (tied) a zero row: the pad id's logit is 0, never the max
        model.tok_emb.weight[PAD] = 0
    return model


@pytest.mark.parametrize(
    "label, words",
    [
        ("atis_flight", "flight"),
        ("atis_ground_service", "ground service"),
        ("atis_flight#atis_airfare", "flight airfare"),
        ("atis_quantity", "how many"),
        ("atis_flight_no", "flight number"),
    ],
)
def test_intents_become_words(label, words):
    assert text_to_text.intent_text(label) == words


def test_a_label_that_is_not_an_atis_intent_is_named():
    with pytest.raises(ValueError, match="'flight'"):
        text_to_text.intent_text("flight")


def test_exact_match_agrees_with_greedy_decoding(model):
    gen = torch.Generator().manual_seed(1)
    sources = [torch.randint(2, 20, (n,), generator=gen).tolist() + [EOS]
               for n in (3, 7, 5, 9)]  # fmt: skip
    written = []
    for s in sources:  # what greedy decoding writes, cut after its end token
        w = model.generate(torch.tensor([s]), 6)[0].tolist()
        written.append(w[: w.index(EOS) + 1] if EOS in w else w)
    assert not any(PAD in w for w in written)
    assert text_to_text.exact(model, sources, written, batch_size=3) == [True] * 4
    wrong = [list(w) for w in written]
    wrong[2][0] = (wrong[2][0] + 1) % 20 or 2  # another first token
    assert text_to_text.exact(model, sources, wrong) == [True, True, False, True]
    assert text_to_text.accuracy(model, (sources, wrong)) == pytest.approx(0.75)


def test_sources_and_targets_must_pair_up_without_padding(model):
    with pytest.raises(ValueError, match="2 and 1"):
        text_to_text.exact(model, [[2, EOS], [3, EOS]], [[EOS]])
    with pytest.raises(ValueError, match="pad id 0"):
        text_to_text.exact(model, [[2, EOS]], [[4, PAD, EOS]])


def test_fine_tuning_leaves_the_model_and_keeps_the_asked_steps(model):
    before = {k: v.clone() for k, v in model.state_dict().items()}
    pairs = ([[2, 3, EOS], [4, 5, 6, EOS]] * 4, [[7, EOS], [8, 9, EOS]] * 4)
    tuned, snapshots = text_to_text.fine_tune(model, pairs, 4, 1e-2, 4, keep_at=[2, 4])
    assert sorted(snapshots) == [2, 4] and not tuned.training
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    moved = [k for k, v in snapshots[2].items() if not torch.equal(v, snapshots[4][k])]
    assert moved  # updates 3 and 4 changed weights
    with pytest.raises(ValueError, match="keep_at"):
        text_to_text.fine_tune(model, pairs, 4, 1e-2, 4, keep_at=[5])


def test_intent_pairs_end_in_the_end_token():
    words = vocab.Vocab(["<pad>", "<unk>", "</s>", ".", "flight", "show", "me"])
    sources, targets = text_to_text.intent_pairs(words, words["</s>"], "dev")
    assert len(sources) == len(targets) == 500  # ATIS's dev split
    assert all(s[-1] == t[-1] == words["</s>"] for s, t in zip(sources, targets))
    assert all(s[-2] == words["."] for s in sources)


def test_encoder_features_are_the_mean_over_each_sources_tokens(model):
    # longest first, batches of 2: encoded sorted by length, returned in this order
    sources = [[4, 5, 6, 7, EOS], [2, 3, EOS], [6, 2, 3, 4, 5, 6, EOS]]
    feats = text_to_text.encoder_features(model, sources, batch_size=2)
    assert feats.shape == (3, 32) and not feats.requires_grad
    for row, s in zip(feats, sources):  # alone, unpadded: the plain mean
        memory, _ = model.encode(torch.tensor([s]))  # (1, S, d)
        torch.testing.assert_close(row, memory[0].mean(0))


def test_write_is_greedy_decoding_cut_after_the_end_token(model):
    sources = [[2, 3, EOS], [4, 5, 6, 7, EOS], [8, EOS]]
    written = text_to_text.write(model, sources, max_new_tokens=6)
    for s, w in zip(sources, written):  # alone, unpadded, cut as the chapter cut it
        row = model.generate(torch.tensor([s]), 6)[0].tolist()
        assert w == (row[: row.index(EOS) + 1] if EOS in row else row)
        assert EOS not in w[:-1]
    assert all(PAD not in w for w in written)


def test_choose_length_takes_the_best_mean_on_dev_and_loads_it(model):
    pairs = ([[2, 3, EOS], [4, 5, 6, EOS]] * 4, [[7, EOS], [8, 9, EOS]] * 4)
    runs = {
        seed: text_to_text.fine_tune(model, pairs, 6, 3e-2, 4, seed=seed,
                                     keep_at=[2, 4, 6])
        for seed in (0, 1)
    }  # fmt: skip
    chosen, dev_acc = text_to_text.choose_length(runs, pairs, [2, 4, 6])
    for step in (2, 4, 6):  # the chapter's inline loop: load every seed, mean accuracy
        accs = []
        for _, snapshots in runs.values():
            copy = t5.T5(model.config).eval()
            copy.load_state_dict(snapshots[step])
            accs.append(text_to_text.accuracy(copy, pairs))
        assert dev_acc[step] == pytest.approx(sum(accs) / 2)
    assert chosen == max(dev_acc, key=dev_acc.get)
    for tuned, snapshots in runs.values():  # left with the chosen weights
        assert all(torch.equal(v, snapshots[chosen][k])
                   for k, v in tuned.state_dict().items())  # fmt: skip
    with pytest.raises(ValueError, match="at least one"):
        text_to_text.choose_length(runs, pairs, [])


def test_dev_rising_compares_the_last_two_lengths_at_the_chosen_rate():
    sweep = {"chosen_lr": 1e-3, "mean_dev": {"0.001@1": 0.5, "0.001@2": 0.6,
                                             "0.001@3": 0.7, "0.01@3": 0.1}}  # fmt: skip
    assert text_to_text.dev_rising(sweep, [1, 2, 3])
    sweep["mean_dev"]["0.001@3"] = 0.6  # level: not rising
    assert not text_to_text.dev_rising(sweep, [1, 2, 3])


def test_intent_sweep_words_quote_the_sweep_as_the_chapter_did():
    sweep = {"test_at_chosen": [0.90, 0.91, 0.89], "majority_test": 0.70,
             "by_init": {"scratch": {"test_at_chosen": [0.84, 0.85, 0.83]}}}  # fmt: skip
    words = text_to_text.intent_sweep_words(sweep)
    assert words == {
        "bench_intent_acc": "90.0 ± 1.0 (89.0–91.0)",
        "bench_intent_seeds": "3",
        "bench_intent_margin": "19.0",  # the worst seed, 0.89, over 0.70
        "scratch_acc": "84.0 ± 1.0 (83.0–85.0)",
    }


def test_head_accuracy_fits_one_class_per_training_label(model):
    train = ([[2, 3, EOS], [4, 5, EOS], [2, 3, 3, EOS], [4, 5, 5, EOS]],
             ["a", "b", "a", "b"])  # fmt: skip
    acc, n_weights = text_to_text.head_accuracy(model, train, train)
    assert acc == 1.0 and n_weights == 2 * 32 + 2  # two classes over d_model = 32
    unseen = (train[0][:2], ["c", "c"])  # a label the head cannot output
    assert text_to_text.head_accuracy(model, train, unseen)[0] == 0.0
    with pytest.raises(ValueError, match="pair sources with labels"):
        text_to_text.head_accuracy(model, train, (train[0], ["a"]))
