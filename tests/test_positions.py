"""Tests for transformer_book.positions: references (Hugging Face T5 and Llama, the ALiBi
paper's recipe, the closed sinusoidal formula) and invariants (relative position, causality)."""

import math
import os

import pytest
import torch

from transformer_book import attention, checks, masks, positions

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _paper_alibi_slopes(n: int) -> list[float]:
    """The ALiBi authors' reference recipe (ofirpress/attention_with_linear_biases), written out."""

    def power_of_2(n: int) -> list[float]:
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]

    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + _paper_alibi_slopes(2 * closest)[0::2][: n - closest]


# --- learned absolute -------------------------------------------------------------------


def test_learned_embedding_adds_one_vector_per_position():
    emb = positions.LearnedPositionalEmbedding(max_len=10, d_model=4)
    x = torch.zeros(2, 6, 4)
    torch.testing.assert_close(emb(x), emb.embedding.weight[:6].expand(2, 6, 4))
    torch.testing.assert_close(
        emb(x, offset=4), emb.embedding.weight[4:10].expand(2, 6, 4)
    )


def test_learned_embedding_past_max_len_names_length_and_max_len():
    emb = positions.LearnedPositionalEmbedding(max_len=8, d_model=4)
    emb(torch.zeros(1, 8, 4))  # exactly max_len is fine
    with pytest.raises(ValueError, match=r"sequence length 9 .*max_len=8"):
        emb(torch.zeros(1, 9, 4))
    with pytest.raises(ValueError, match=r"positions 5\.\.10\) exceeds max_len=8"):
        emb(torch.zeros(1, 6, 4), offset=5)
    with pytest.raises(ValueError, match=r"d_model=4"):
        emb(torch.zeros(1, 3, 5))
    with pytest.raises(ValueError, match=r"offset must be >= 0, got -1"):
        emb(torch.zeros(1, 3, 4), offset=-1)


# --- sinusoidal -------------------------------------------------------------------------


def test_sinusoidal_equals_closed_formula():
    n, d = 50, 16
    pe = positions.sinusoidal_encoding(n, d)
    assert pe.shape == (n, d)
    for p in (0, 1, 7, 49):
        for i in range(d // 2):
            w = 1.0 / 10000 ** (2 * i / d)
            assert math.isclose(pe[p, 2 * i].item(), math.sin(p * w), abs_tol=1e-6)
            assert math.isclose(pe[p, 2 * i + 1].item(), math.cos(p * w), abs_tol=1e-6)


def test_sinusoidal_dot_product_depends_only_on_distance():
    n, d = 60, 32
    pe = positions.sinusoidal_encoding(n, d).double()
    gram = pe @ pe.T  # (n, n)
    omega = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    for k in (-20, -3, 0, 1, 5, 37):
        diagonal = torch.diagonal(gram, offset=k)
        expected = torch.cos(k * omega).sum()
        torch.testing.assert_close(
            diagonal, expected.expand_as(diagonal), atol=1e-5, rtol=0
        )


def test_sinusoidal_rejects_odd_width():
    with pytest.raises(
        ValueError, match="d_model must be a positive even number.*got 7"
    ):
        positions.sinusoidal_encoding(4, 7)


# --- T5 relative bias -------------------------------------------------------------------


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("num_buckets,max_distance", [(32, 128), (16, 32), (8, 20)])
def test_t5_buckets_equal_hugging_face(bidirectional, num_buckets, max_distance):
    # a test dependency (requirements.txt): never skip
    import transformers.models.t5.modeling_t5 as t5

    rel = torch.arange(-300, 301)
    ours = positions.t5_relative_position_bucket(
        rel, bidirectional, num_buckets, max_distance
    )
    ref = t5.T5Attention._relative_position_bucket(
        rel, bidirectional, num_buckets, max_distance
    )
    assert torch.equal(ours, ref.long())
    assert ours.min() >= 0 and ours.max() < num_buckets


def test_t5_buckets_exact_near_logarithmic_far():
    # bidirectional, 32 buckets: 16 per direction, of which 8 exact distances (0..7)
    rel = torch.tensor([0, -1, -7, -8, -15, -127, -128, -1000, 1, 15, 1000])
    buckets = positions.t5_relative_position_bucket(
        rel, bidirectional=True, num_buckets=32, max_distance=128
    )
    assert buckets.tolist() == [0, 1, 7, 8, 9, 15, 15, 15, 17, 25, 31]
    causal = positions.t5_relative_position_bucket(
        torch.tensor([3, 0, -5, -200]), bidirectional=False
    )
    assert causal.tolist() == [
        0,
        0,
        5,
        31,
    ]  # future keys share bucket 0; 16 exact distances


def test_t5_relative_bias_shape_and_toeplitz():
    torch.manual_seed(0)
    module = positions.T5RelativeBias(n_heads=3, num_buckets=8, max_distance=16)
    bias = module(6, 6)
    assert bias.shape == (1, 3, 6, 6)
    for k in range(-5, 6):
        diagonal = torch.diagonal(bias[0], offset=k, dim1=-2, dim2=-1)  # (H, 6 - |k|)
        assert torch.equal(diagonal, diagonal[:, :1].expand_as(diagonal))
    # 2 queries against 6 keys are the last 2 rows of the full matrix
    torch.testing.assert_close(module(2, 6), bias[:, :, 4:])


def test_t5_bucket_rejects_float_and_tiny_settings():
    with pytest.raises(ValueError, match="integer tensor, got dtype torch.float32"):
        positions.t5_relative_position_bucket(torch.zeros(3))
    with pytest.raises(ValueError, match="max_distance must exceed"):
        positions.t5_relative_position_bucket(
            torch.zeros(3, dtype=torch.long), num_buckets=32, max_distance=4
        )


# --- ALiBi ------------------------------------------------------------------------------


@pytest.mark.parametrize("n_heads", [1, 2, 4, 8, 16, 3, 6, 12, 20, 24])
def test_alibi_slopes_follow_the_paper(n_heads):
    torch.testing.assert_close(
        positions.alibi_slopes(n_heads), torch.tensor(_paper_alibi_slopes(n_heads))
    )


def test_alibi_slopes_written_out():
    assert positions.alibi_slopes(8).tolist() == [2.0**-k for k in range(1, 9)]
    torch.testing.assert_close(
        positions.alibi_slopes(16),
        torch.tensor([2.0 ** (-k / 2) for k in range(1, 17)]),
    )
    # 6 heads: the 4-head slopes, then the 1st and 3rd of the 8-head slopes
    assert positions.alibi_slopes(6).tolist() == [
        2.0**-2,
        2.0**-4,
        2.0**-6,
        2.0**-8,
        2.0**-1,
        2.0**-3,
    ]
    # 12 heads: the 8-head slopes, then the odd-numbered of the 16-head slopes
    expected12 = [2.0**-k for k in range(1, 9)] + [
        2.0**-0.5,
        2.0**-1.5,
        2.0**-2.5,
        2.0**-3.5,
    ]
    torch.testing.assert_close(positions.alibi_slopes(12), torch.tensor(expected12))
    with pytest.raises(ValueError, match="n_heads must be >= 1, got 0"):
        positions.alibi_slopes(0)


def test_alibi_bias_is_minus_slope_times_distance():
    bias = positions.alibi_bias(4, 5)
    assert bias.shape == (1, 4, 5, 5)
    slopes = positions.alibi_slopes(4)
    for h in range(4):
        for i in range(5):
            for j in range(5):
                assert math.isclose(
                    bias[0, h, i, j].item(),
                    -slopes[h].item() * abs(i - j),
                    rel_tol=1e-6,
                )
    torch.testing.assert_close(
        positions.alibi_bias(4, 2, 5), positions.alibi_bias(4, 5)[:, :, 3:]
    )


# --- RoPE -------------------------------------------------------------------------------


def test_rope_scores_depend_only_on_offset():
    torch.manual_seed(0)
    q, k = torch.randn(16), torch.randn(16)

    def score(m: int, n: int) -> torch.Tensor:
        cos, sin = positions.rope_angles(torch.tensor([m, n]), 16)
        return positions.apply_rope(q, cos[0], sin[0]) @ positions.apply_rope(
            k, cos[1], sin[1]
        )

    for m, n in ((0, 3), (5, 1), (2, 2), (10, 40)):
        for shift in (1, 7, 100):
            torch.testing.assert_close(
                score(m + shift, n + shift), score(m, n), atol=1e-4, rtol=1e-5
            )
    assert not torch.isclose(
        score(0, 3), score(0, 4)
    )  # ... but they do depend on the offset


def test_rotary_module_scores_are_toeplitz():
    torch.manual_seed(0)
    rope = positions.RotaryEmbedding(8)
    v = torch.randn(8)
    q = v.expand(1, 1, 12, 8)  # the same query and key content at every position
    qr, kr = rope(q, q)
    scores = (qr @ kr.transpose(-2, -1))[0, 0]  # (12, 12)
    for k in range(-11, 12):
        diagonal = torch.diagonal(scores, offset=k)
        torch.testing.assert_close(
            diagonal, diagonal[:1].expand_as(diagonal), atol=1e-5, rtol=1e-5
        )


def test_rope_preserves_norms_and_position_zero():
    x = torch.randn(2, 3, 5, 16)
    cos, sin = positions.rope_angles(torch.arange(5), 16)
    y = positions.apply_rope(x, cos, sin)
    torch.testing.assert_close(y.norm(dim=-1), x.norm(dim=-1))
    torch.testing.assert_close(y[..., 0, :], x[..., 0, :])


def test_rope_equals_hugging_face_llama():
    import transformers.models.llama.modeling_llama as llama  # a test dependency: never skip
    from transformers import LlamaConfig

    head_dim, n_heads, T = 16, 4, 23
    config = LlamaConfig(
        hidden_size=head_dim * n_heads,
        num_attention_heads=n_heads,
        num_hidden_layers=1,
        intermediate_size=32,
        vocab_size=10,
        max_position_embeddings=64,
    )
    rotary = llama.LlamaRotaryEmbedding(config)
    torch.manual_seed(0)
    q, k = torch.randn(2, n_heads, T, head_dim), torch.randn(2, n_heads, T, head_dim)
    position_ids = torch.arange(T)[None].expand(2, T)  # (B, T)
    cos, sin = rotary(q, position_ids)  # (B, T, Dh) each
    ref_q, ref_k = llama.apply_rotary_pos_emb(q, k, cos, sin)
    ours_q, ours_k = positions.RotaryEmbedding(head_dim)(q, k)
    torch.testing.assert_close(ours_q, ref_q, atol=1e-5, rtol=0)
    torch.testing.assert_close(ours_k, ref_k, atol=1e-5, rtol=0)


def test_rotary_queries_sit_at_the_last_key_positions():
    torch.manual_seed(0)
    rope = positions.RotaryEmbedding(8)
    q, k = torch.randn(1, 2, 10, 8), torch.randn(1, 2, 10, 8)
    full_q, full_k = rope(q, k)
    last_q, same_k = rope(q[:, :, 7:], k)
    torch.testing.assert_close(last_q, full_q[:, :, 7:])
    torch.testing.assert_close(same_k, full_k)


def test_rotary_rejects_bad_head_dim():
    with pytest.raises(
        ValueError, match="head_dim must be a positive even number.*got 7"
    ):
        positions.RotaryEmbedding(7)
    with pytest.raises(
        ValueError,
        match=r"q must have shape \(\.\.\., T, head_dim=8\), got \(1, 1, 3, 6\)",
    ):
        positions.RotaryEmbedding(8)(torch.zeros(1, 1, 3, 6), torch.zeros(1, 1, 3, 6))


def test_multi_head_attention_with_rope_runs_and_is_causal():
    torch.manual_seed(0)
    mha = attention.MultiHeadAttention(32, 4, rope=positions.RotaryEmbedding(8)).eval()
    x = torch.randn(2, 9, 32)
    mask = masks.causal_mask(9)
    out, weights = mha(x, mask=mask, need_weights=True)
    assert out.shape == (2, 9, 32) and weights.shape == (2, 4, 9, 9)
    assert (weights[..., ~mask] == 0).all()
    changed = x.clone()
    changed[:, 5:] = torch.randn(2, 4, 32)  # change the future of position 4
    out2, _ = mha(changed, mask=mask)
    torch.testing.assert_close(out2[:, :5], out[:, :5])
    assert not torch.allclose(out2[:, 5:], out[:, 5:])
    fast, _ = mha(x, mask=mask, need_weights=False)
    torch.testing.assert_close(fast, out, atol=1e-5, rtol=1e-5)
    # without RoPE the same weights give a different output: the rotation is really applied
    plain = attention.MultiHeadAttention(32, 4).eval()
    plain.load_state_dict(mha.state_dict())
    assert not torch.allclose(plain(x, mask=mask)[0], out)


# --- exercise checks accept the reference and reject common mistakes ----------------------


def test_checks_accept_reference_answers():
    checks.check_sinusoidal_encoding(positions.sinusoidal_encoding)
    checks.check_alibi_slopes(positions.alibi_slopes)
    checks.check_rope_rotation(
        lambda x, p: positions.apply_rope(x, *positions.rope_angles(p, x.shape[-1]))
    )


def test_checks_explain_common_mistakes():
    def swapped(n, d):
        return (
            positions.sinusoidal_encoding(n, d)
            .view(n, d // 2, 2)
            .flip(-1)
            .reshape(n, d)
        )

    with pytest.raises(checks.ExerciseError, match="sin and cos are swapped"):
        checks.check_sinusoidal_encoding(swapped)
    with pytest.raises(checks.ExerciseError, match="not a power of two"):
        checks.check_alibi_slopes(
            lambda n: torch.tensor([2.0 ** (-8.0 * (h + 1) / n) for h in range(n)])
        )

    def clockwise(x, p):
        return positions.apply_rope(x, *positions.rope_angles(-p, x.shape[-1]))

    with pytest.raises(checks.ExerciseError, match="-p·θ_i"):
        checks.check_rope_rotation(clockwise)


def _reference_unseen(train_len, test_len, num_buckets, max_distance):
    def buckets(first, last):
        rel = -torch.arange(first, last + 1)  # key - query: the past is negative
        return set(
            positions.t5_relative_position_bucket(
                rel, False, num_buckets, max_distance
            ).tolist()
        )

    return sorted(buckets(train_len, test_len - 1) - buckets(0, train_len - 1))


def test_unseen_buckets_check_accepts_the_answer_and_explains_mistakes():
    checks.check_unseen_buckets(_reference_unseen)
    # the chapter's numbers: max_distance = training length leaves nothing unseen
    assert _reference_unseen(32, 64, 16, 32) == []
    assert _reference_unseen(32, 64, 16, 128) == [12, 13]

    def off_by_one(train_len, test_len, num_buckets, max_distance):
        return _reference_unseen(train_len, test_len + 1, num_buckets, max_distance)

    def positive(train_len, test_len, num_buckets, max_distance):
        return []

    def everything(train_len, test_len, num_buckets, max_distance):
        rel = -torch.arange(train_len, test_len)
        return sorted(
            set(
                positions.t5_relative_position_bucket(
                    rel, False, num_buckets, max_distance
                ).tolist()
            )
        )

    with pytest.raises(checks.ExerciseError, match="test_len − 1, not test_len"):
        checks.check_unseen_buckets(off_by_one)
    with pytest.raises(checks.ExerciseError, match="positive numbers"):
        checks.check_unseen_buckets(positive)
    with pytest.raises(checks.ExerciseError, match="remove the buckets"):
        checks.check_unseen_buckets(everything)
    with pytest.raises(checks.ExerciseError, match="list of bucket numbers"):
        checks.check_unseen_buckets(lambda *args: 3)


MEASURED = {
    "none": (0.23, 0.18),
    "learned": (1.0, None),
    "sinusoidal": (0.93, 0.50),
    "T5 bias": (1.0, 0.99),
    "ALiBi": (0.64, 0.60),
    "RoPE": (1.0, 0.61),
}


def test_prediction_check_accepts_a_right_prediction(capsys):
    checks.check_extrapolation_prediction({"T5 bias"}, MEASURED)
    assert "Correct" in capsys.readouterr().out


def test_prediction_check_explains_every_wrong_scheme():
    with pytest.raises(checks.ExerciseError) as err:
        checks.check_extrapolation_prediction({"T5 bias", "ALiBi", "RoPE"}, MEASURED)
    message = str(err.value)
    assert "ALiBi: you predicted it survives" in message
    assert "distance 0" in message
    assert "RoPE: you predicted it survives" in message
    assert "T5 bias" not in message.split("disagree")[1]
    with pytest.raises(checks.ExerciseError, match="T5 bias: you predicted it fails"):
        checks.check_extrapolation_prediction(set(), MEASURED)


def test_prediction_check_accepts_either_answer_when_too_close_to_call(capsys):
    close = dict(MEASURED, RoPE=(1.0, 0.95))  # 0.95 is within 0.08 of 0.9 x 1.0
    checks.check_extrapolation_prediction({"T5 bias"}, close)
    checks.check_extrapolation_prediction({"T5 bias", "RoPE"}, close)
    assert "Too close to call on this run: RoPE" in capsys.readouterr().out


def test_prediction_check_grades_a_clear_failure_near_the_other_threshold():
    # 0.83 is near the 0.8 needed to learn, but 0.5 at twice the length fails by far:
    # the scheme fails either way, so a prediction that it survives is wrong
    near = dict(MEASURED, sinusoidal=(0.83, 0.50))
    with pytest.raises(checks.ExerciseError, match="sinusoidal: you predicted it"):
        checks.check_extrapolation_prediction({"T5 bias", "sinusoidal"}, near)
    checks.check_extrapolation_prediction({"T5 bias"}, near)


def test_prediction_check_rejects_bad_input():
    with pytest.raises(checks.ExerciseError, match="set of scheme names"):
        checks.check_extrapolation_prediction("T5 bias", MEASURED)
    with pytest.raises(checks.ExerciseError, match="Unknown scheme names"):
        checks.check_extrapolation_prediction({"T5"}, MEASURED)
    with pytest.raises(checks.ExerciseError, match="lacks the schemes"):
        checks.check_extrapolation_prediction({"T5 bias"}, {"RoPE": (1.0, 0.6)})


def test_rope_rotation_diagram_draws_and_rejects_different_offsets():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from transformer_book import diagrams

    fig = diagrams.positions.rope_rotation()
    # the angle between the rotated vectors is printed once per panel, the same in both
    labels = [
        t.get_text() for t in fig.axes[0].texts if "angle between" in t.get_text()
    ]
    assert labels == ["angle between them: 70°"] * 2
    plt.close(fig)
    with pytest.raises(ValueError, match="same offset"):
        diagrams.positions.rope_rotation(pairs=((1, 3), (5, 8)))


@pytest.mark.parametrize("is_decoder", [False, True])
def test_t5_relative_bias_equals_hugging_face_and_lives_in_the_first_layer(is_decoder):
    # a test dependency (requirements.txt): never skip
    import transformers.models.t5.modeling_t5 as t5
    from transformers import T5Config

    config = T5Config(
        d_model=16, d_kv=4, d_ff=32, num_heads=4, num_layers=3, is_decoder=is_decoder
    )
    torch.manual_seed(0)
    stack = t5.T5Stack(config).eval()
    # T5 learns one bias table, in the first layer; the others reuse its output
    has_bias = [
        blk.layer[0].SelfAttention.has_relative_attention_bias for blk in stack.block
    ]
    assert has_bias == [True, False, False]
    # and it does not divide q · k by sqrt(d_k)
    assert stack.block[0].layer[0].SelfAttention.scaling == 1.0
    hf = stack.block[0].layer[0].SelfAttention
    ours = positions.T5RelativeBias(
        4,
        config.relative_attention_num_buckets,
        config.relative_attention_max_distance,
        bidirectional=not is_decoder,
    )
    ours.embedding.weight.data.copy_(hf.relative_attention_bias.weight.data)
    with torch.no_grad():
        torch.testing.assert_close(ours(7, 7), hf.compute_bias(7, 7))
        # 3 new queries after 4 cached tokens: the last 3 rows
        torch.testing.assert_close(
            ours(3, 7), hf.compute_bias(3, 7, past_seen_tokens=4)
        )


def test_prediction_check_calls_a_prediction_function():
    def not_yet():
        raise NotImplementedError

    with pytest.raises(checks.ExerciseError, match="not written yet"):
        checks.check_extrapolation_prediction(not_yet, MEASURED)
    checks.check_extrapolation_prediction(lambda: {"T5 bias"}, MEASURED)


RIGHT_COUNTS = {(32, 64): 5, (64, 128): 5, (128, 256): 0, (512, 2048): 0}


def test_unseen_prediction_grades_none_or_some_and_names_the_mistake(capsys):
    checks.check_unseen_prediction(RIGHT_COUNTS)
    checks.check_unseen_prediction(lambda: RIGHT_COUNTS)
    assert capsys.readouterr().out.count("Correct") == 2
    checks.check_unseen_prediction({**RIGHT_COUNTS, (32, 64): 3})  # some: right
    with pytest.raises(checks.ExerciseError, match="log-spaced"):
        checks.check_unseen_prediction({**RIGHT_COUNTS, (32, 64): 0})
    with pytest.raises(checks.ExerciseError, match="counted every bucket"):
        checks.check_unseen_prediction({**RIGHT_COUNTS, (128, 256): 1})
    with pytest.raises(checks.ExerciseError, match="starts at distance 113"):
        checks.check_unseen_prediction({**RIGHT_COUNTS, (512, 2048): 4})
    with pytest.raises(checks.ExerciseError, match="one count per"):
        checks.check_unseen_prediction({(32, 64): 5})


def test_causal_buckets_are_the_buckets_the_distances_into_the_past_reach():
    reach = positions.causal_buckets(0, 31, max_distance=32, num_buckets=16)
    assert reach == list(range(16))  # training at 32 tokens reaches every bucket
    assert positions.causal_buckets(32, 63, 32, 16) == [15]  # all in the last one
    rel = -torch.arange(32, 64)
    ref = positions.t5_relative_position_bucket(rel, False, 16, 128).unique().tolist()
    assert positions.causal_buckets(32, 63, 128, 16) == ref
    with pytest.raises(ValueError, match="need 0 <= first <= last"):
        positions.causal_buckets(5, 4)
