"""transformer_book.deep_tagger_readings: chapter 6's runs read back (losses over seeds,
the head's collapse, the tables, the verdicts in words)."""

import math

import pytest
import torch

from transformer_book import blocks, deep_tagger_readings, deep_taggers


def test_seed_summary_and_learned_count_diverged_and_flat_runs():
    losses = [1.0, 2.0, math.inf, 2.49]  # one diverged, one within 0.02 of the prior
    assert (
        deep_tagger_readings.seed_summary(losses, prior=2.5) == "1.830 ± 0.759  1† 1="
    )
    assert deep_tagger_readings.seed_summary([math.inf] * 2, prior=2.5) == "—  2† 0="
    assert deep_tagger_readings.seed_summary([1.0], prior=2.5) == "1.000 ± 0.000  0† 0="
    assert deep_tagger_readings.learned(losses, prior=2.5) == 2
    assert deep_tagger_readings.learned(losses, prior=2.5, margin=1.0) == 1


def test_seed_verdict_is_compare_seeds_unless_a_run_diverged():
    from transformer_book import report

    before, after = [2.0, 2.1, 2.2, 2.05, 2.15], [1.0, 1.1, 1.2, 1.05, 1.15]
    got = deep_tagger_readings.seed_verdict(before, after, pairs=True)
    assert got == report.compare_seeds(before, after, pairs=True)
    assert got == "lower for every seed"
    diverged = deep_tagger_readings.seed_verdict(before, [*after[:4], math.inf])
    assert diverged == "a run diverged: no t-test"


def test_separation_words_name_the_depths_where_initialisations_keep_apart():
    t = torch.tensor
    post = {6: t([1.5, 2.0]), 12: t([1.0, 2.0]), 24: t([1.5, 3.0])}  # (seeds,) each
    pre = {6: t([0.9, 1.1]), 12: t([0.9, 1.1]), 24: t([1.0, 1.2])}  # 12: they overlap
    ratios = {(False, L): r for L, r in post.items()} | {
        (True, L): r for L, r in pre.items()
    }
    assert deep_tagger_readings.separation_words(ratios) == (
        "every post-norm initialisation is more top-heavy than every pre-norm one at "
        "6, 24 blocks; at 12 blocks single ones overlap"
    )
    ratios[False, 12] = t([1.2, 2.0])
    assert deep_tagger_readings.separation_words(ratios).endswith("at 6, 12, 24 blocks")
    overlap = {(first, 6): t([1.0, 2.0]) for first in (False, True)}
    assert deep_tagger_readings.separation_words(overlap).startswith("single post-norm")


def test_spread_change_is_the_ratio_of_means_and_where_the_ranges_lie():
    t = torch.tensor
    ratio, words = deep_tagger_readings.spread_change(
        t([1.0, 2.0]), t([3.0, 4.0]), 6, 24
    )
    assert ratio == pytest.approx(3.5 / 1.5)
    assert words == "with every initialisation at 24 blocks above every one at 6"
    _, words = deep_tagger_readings.spread_change(t([3.0, 4.0]), t([1.0, 2.0]), 6, 24)
    assert "24 blocks below every one at 6" in words
    _, words = deep_tagger_readings.spread_change(t([1.0, 3.0]), t([2.0, 4.0]), 6, 24)
    assert words.startswith("a change within the spread")


def test_grid_words_read_the_quick_and_the_full_grid():
    final = {
        ("post", 0.03, 0): [2.94, 3.0, 3.05],  # none more than 0.02 below the prior
        ("post", 0.03, 9): [3.0, 2.5, 2.94],  # one learned with a warm-up
        ("pre", 0.03, 0): [1.0, 1.2, 1.1],
    }
    words = deep_tagger_readings.grid_words(
        final, prior=2.95, top=0.03, warmup=9, steps=36
    )
    assert words["post_level"] == "no post-norm run ended clearly below the prior"
    assert words["warm_text"] == (
        "With a warm-up over the first 9 steps, 1 of the 3 post-norm runs got below "
        "the prior (the best ended at 2.50): in 36 steps, this warm-up got some of "
        "them learning."
    )
    top = (words["top_lr"], words["pre_top"], words["post_top"])
    assert top == ("0.03", "1.10", "3.00")
    words = deep_tagger_readings.grid_words(
        final, prior=3.5, top=0.03, warmup=9, steps=36
    )
    assert words["post_level"] == "3 of the 3 post-norm runs ended below the prior"
    assert words["warm_text"].startswith("With a warm-up over the first 9 steps, 3 of")
    words = deep_tagger_readings.grid_words(
        final, prior=2.0, top=0.03, warmup=9, steps=36
    )
    assert words["post_level"].startswith("every post-norm run ended above the prior")
    assert "no post-norm run got below" in words["warm_text"]
    assert words["warm_text"].endswith("did not get the deep post-norm stack learning.")
    final |= {
        ("pre", 0.03, 9): [1.0, 1.4, 1.2],
        ("post", 1e-3, 0): [3.0, 2.0, 3.0],
        ("pre", 1e-3, 0): [2.0, 2.0, 3.0],
    }  # the full profile adds smaller rates and pre-norm with a warm-up
    words = deep_tagger_readings.grid_words(
        final, prior=2.95, top=0.03, warmup=9, steps=36
    )
    assert words["warm_text"].endswith(
        "The pre-norm runs with that warm-up ended at 1.20 on average. At the "
        "smallest rate (0.001), 3 of the 6 runs of either kind got below the prior "
        "in 36 steps."
    )


def test_depth_words_read_the_split_and_its_p_value():
    words = deep_tagger_readings.depth_words(5, 6, 0, 5, 6 / 462)
    assert words["depth_verdict"] == (
        "depth makes the difference here (Fisher's exact test: p = 0.01)"
    )
    assert words["k_deep"] == "none of the 5" and words["k_shallow"] == "5"
    assert words["shallow_rest"].startswith("The other 1 shallow runs did not")
    words = deep_tagger_readings.depth_words(2, 2, 1, 5, 0.29)
    assert words["depth_verdict"].startswith("a hint that depth makes the trouble")
    assert words["depth_verdict"].endswith("probability 0.29 (Fisher's exact test)")
    assert words["k_deep"] == "1 of the 5"
    assert words["shallow_rest"] == "At 2 blocks, every run did."


def test_head_collapse_measures_what_the_head_reads_and_how_it_tags():
    model = deep_taggers.deep_tagger(20, 5, 3, True, d_model=16, n_heads=2, d_ff=32)
    ids = torch.tensor([[3, 4, 5, 0], [6, 7, 0, 0]])
    keep = ids != 0
    cos, cos_head, share = deep_tagger_readings.head_collapse(model, ids, keep, tag=2)
    # chapter 6's old inline code: the stream profile of the last block and the
    # encoder's output, and the share of real tokens whose arg-max is the tag
    enc = model.body.encoder
    _, (ref_cos, ref_head) = blocks.stream_profile(
        model, [enc.layers[-1], enc], ids, keep
    )
    with torch.no_grad():
        ref_share = (model(ids).argmax(-1)[keep] == 2).float().mean().item()
    assert (cos, cos_head, share) == (ref_cos, ref_head, ref_share)
    assert cos != cos_head  # pre-norm: the final norm centres the tokens
    shares = [
        deep_tagger_readings.head_collapse(model, ids, keep, t)[2] for t in range(5)
    ]
    assert sum(shares) == pytest.approx(1.0)  # every real token gets one tag


def test_stream_table_reads_each_profile_after_the_chosen_blocks():
    rms = torch.tensor([[1.0, 2.0, 3.0], [1.0, 2.0, 5.0]])  # (seeds, blocks)
    cos = torch.tensor([[0.1, 0.2, 0.3], [0.1, 0.2, 0.3]])
    lines = deep_tagger_readings.stream_table({"pre-norm": (rms, cos)}, at=(1, 3))
    assert lines[0].startswith("after blocks 1, 3:") and len(lines) == 3
    assert lines[1] == "pre-norm RMS: 1.00 ± 0.00 (1.00–1.00); 4.00 ± 1.41 (3.00–5.00)"
    assert lines[2].startswith("pre-norm cosine: 0.10 ± 0.00")
    with pytest.raises(ValueError, match=r"at must count blocks 1\.\.3, got \(1, 4\)"):
        deep_tagger_readings.stream_table({"pre-norm": (rms, cos)}, at=(1, 4))


def test_grid_table_prints_every_setting_and_what_was_not_trained():
    final = {("post", 0.03, 0): [1.0, 1.2], ("pre", 0.03, 0): [0.5, 0.7]}
    lines = deep_tagger_readings.grid_table(final, [(0.03, 0), (0.03, 9)], prior=1.1)
    assert len(lines) == 3 and "0.600 ± 0.141  0† 0=" in lines[1]
    assert lines[2].count("not trained") == 2


def test_collapse_words_read_the_cosines_and_shares_of_both_placements():
    after = {"post": [(0.99, 0.987, 1.0), (0.98, 0.996, 0.97)],
             "pre": [(0.5, 0.2, 0.3), (0.7, 0.4, 0.3)]}  # fmt: skip
    said = deep_tagger_readings.collapse_words(after, truth=0.634)
    assert said["cos_post_after"] == "0.98"  # rounded down
    assert said["cos_pre_after"] == "0.30 ± 0.14 (0.20–0.40)"
    assert said["cos_pre_stream"].startswith("0.60 ±")
    assert said["share_post"] == "at least 97% of the real tokens"
    assert said["share_truth"] == "63%"
    every = {**after, "post": [(0.99, 0.99, 1.0)]}
    assert (
        deep_tagger_readings.collapse_words(every, 0.6)["share_post"]
        == "every real token"
    )
    with pytest.raises(ValueError, match="after must map 'post' and 'pre'"):
        deep_tagger_readings.collapse_words({"post": after["post"]}, 0.6)
