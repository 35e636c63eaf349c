"""The exercise checks accept the reference answer and explain typical wrong answers."""

import math

import pytest
import torch

from transformer_book import attention, checks


def test_accepts_correct_answers(capsys):
    checks.check_self_attention_weights(lambda X: (X @ X.T).softmax(-1))
    checks.check_batched_self_attention(
        lambda X: (X @ X.transpose(-2, -1)).softmax(-1) @ X
    )

    def cos(X, tau):
        Xn = X / X.norm(dim=-1, keepdim=True)
        return (Xn @ Xn.transpose(-2, -1) / tau).softmax(-1) @ X

    checks.check_cosine_attention(cos)
    checks.check_masked_attention(
        lambda q, k, v, m: attention.scaled_dot_product_attention(q, k, v, mask=m)
    )
    checks.check_split_heads(attention.split_heads)
    checks.check_mha_parameter_count(lambda d, h: 4 * d * d + 4 * d)
    assert capsys.readouterr().out.count("Correct:") == 6


def test_not_implemented_is_explained():
    def stub(X):
        raise NotImplementedError

    with pytest.raises(checks.ExerciseError, match="not written yet"):
        checks.check_self_attention_weights(stub)


@pytest.mark.parametrize(
    "wrong, message",
    [
        (lambda X: X @ X.T, "raw scores"),
        (lambda X: (X @ X.T).softmax(dim=0), "columns"),
        (lambda X: (X @ X.T)[:2], "shape"),
    ],
)
def test_self_attention_weights_mistakes(wrong, message):
    with pytest.raises(checks.ExerciseError, match=message):
        checks.check_self_attention_weights(wrong)


def test_masked_attention_mistakes():
    unscaled = lambda q, k, v, m: attention.scaled_dot_product_attention(
        q, k, v, mask=m, scale=1.0
    )
    with pytest.raises(checks.ExerciseError, match="unscaled"):
        checks.check_masked_attention(unscaled)

    def mask_after_softmax(q, k, v, m):
        w = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(-1) * m
        return w @ v, w

    with pytest.raises(checks.ExerciseError, match="values differ"):
        checks.check_masked_attention(mask_after_softmax)


def test_split_heads_plain_reshape_is_explained():
    with pytest.raises(checks.ExerciseError, match="mixes tokens into heads"):
        checks.check_split_heads(lambda x, h: x.reshape(x.shape[0], h, x.shape[1], -1))


def test_parameter_count_mistake():
    with pytest.raises(checks.ExerciseError, match="does n_heads matter"):
        checks.check_mha_parameter_count(lambda d, h: 4 * d * d * h)


def test_cosine_attention_mixing_normalised_values():
    def wrong(X, tau):
        Xn = X / X.norm(dim=-1, keepdim=True)
        return (Xn @ Xn.transpose(-2, -1) / tau).softmax(-1) @ Xn

    with pytest.raises(checks.ExerciseError, match="original rows"):
        checks.check_cosine_attention(wrong)


def _same_sentence_mask(B, T):
    sentence = torch.arange(B * T) // T
    return sentence[:, None] == sentence[None, :]


def test_same_sentence_mask_accepts_the_block_diagonal(capsys):
    checks.check_same_sentence_mask(_same_sentence_mask)
    assert "block-diagonal" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, message",
    [
        (lambda B, T: ~_same_sentence_mask(B, T), "swapped"),
        (lambda B, T: torch.eye(B * T, dtype=torch.bool), "only the diagonal"),
        (lambda B, T: _same_sentence_mask(B, T).float(), "boolean"),
        (
            lambda B, T: (
                (torch.arange(B * T) % B)[:, None] == (torch.arange(B * T) % B)[None, :]
            ),
            "k % B",
        ),
        (lambda B, T: torch.ones(B * T, B * T, dtype=torch.bool), "wrong entries"),
        (lambda B, T: _same_sentence_mask(B, T)[:-1], "shape"),
    ],
)
def test_same_sentence_mask_mistakes(wrong, message):
    with pytest.raises(checks.ExerciseError, match=message):
        checks.check_same_sentence_mask(wrong)


def _saturation_width(n_keys, threshold, scale=False, trials=2000, reduce=None):
    gen = torch.Generator().manual_seed(n_keys)
    for d in [2**i for i in range(9)]:
        q = torch.randn(trials, 1, d, generator=gen)
        k = torch.randn(trials, n_keys, d, generator=gen)
        scores = q @ k.transpose(-2, -1) / (math.sqrt(d) if scale else 1.0)
        w = scores.softmax(dim=-1)
        largest = reduce(w) if reduce else w.max(dim=-1).values.mean()
        if largest > threshold:
            return d
    return None


def test_saturation_width_accepts_a_monte_carlo_answer(capsys):
    checks.check_saturation_width(_saturation_width)
    out = capsys.readouterr().out
    assert "passes 0.75 at d_k = 16 with 4 keys, at 32 with 16 keys and at 64" in out


def test_saturation_width_mistakes():
    scaled = lambda n, t: _saturation_width(n, t, scale=True)
    with pytest.raises(checks.ExerciseError, match="not q·k/√d_k"):
        checks.check_saturation_width(scaled)
    # the mean weight (always 1/n_keys) instead of the largest one never passes
    mean_weight = lambda n, t: _saturation_width(n, t, reduce=lambda w: w.mean())
    with pytest.raises(checks.ExerciseError, match="largest\\s+weight over the keys"):
        checks.check_saturation_width(mean_weight)
    last_below = lambda n, t: _saturation_width(n, t) // 2
    with pytest.raises(checks.ExerciseError, match="not the last one below"):
        checks.check_saturation_width(last_below)
    too_wide = lambda n, t: _saturation_width(n, t) * 4
    with pytest.raises(checks.ExerciseError, match="smallest"):
        checks.check_saturation_width(too_wide)
    with pytest.raises(checks.ExerciseError, match="an int"):
        checks.check_saturation_width(lambda n, t: 48)


def test_shift_targets_accepts_roll(capsys):
    checks.check_shift_targets(lambda t, offset: t.roll(-offset, dims=1))
    assert "Correct:" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, message",
    [
        (lambda t, offset: t.roll(offset, dims=1), "opposite direction"),
        (lambda t, offset: t.roll(-offset, dims=0), "across the batch"),
        (
            lambda t, offset: torch.stack(
                [
                    torch.tensor(
                        [
                            r[i + offset] if 0 <= i + offset < len(r) else -1
                            for i in range(len(r))
                        ]
                    )
                    for r in t.tolist()
                ]
            ),
            "wrong at the ends",
        ),
        (lambda t, offset: t, "unchanged"),
        (lambda t, offset: t.roll(-offset, dims=1) + 1, "values differ"),
    ],
)
def test_shift_targets_mistakes(wrong, message):
    with pytest.raises(checks.ExerciseError, match=message):
        checks.check_shift_targets(wrong)


def test_outweigh_self_accepts_a_longer_vector_along_x(capsys):
    checks.check_outweigh_self(lambda x: 2 * x)
    checks.check_outweigh_self(lambda x: x + x / x.norm())
    assert capsys.readouterr().out.count("Cauchy–Schwarz") == 2


def _orthogonal_and_long(x):
    other = torch.ones_like(x)
    other = other - (other @ x) / (x @ x) * x  # remove the part along x
    return 100 * other / other.norm()


@pytest.mark.parametrize(
    "wrong, message",
    [
        (lambda x: x.clone(), "ties with x"),
        (lambda x: x / 2, "not larger than"),
        (lambda x: -3 * x, "points too far"),
        (_orthogonal_and_long, "points too far"),
        (lambda x: 10 * torch.ones_like(x), "built from x itself"),
        (lambda x: x[:2], "same width"),
        (lambda x: x.tolist(), "torch.Tensor"),
    ],
)
def test_outweigh_self_mistakes(wrong, message):
    with pytest.raises(checks.ExerciseError, match=message):
        checks.check_outweigh_self(wrong)


def _best_span(start, end, max_len, later_wins):
    """Exhaustive span search; on a tie the later (``later_wins``) or the earlier span."""
    best, pick = None, None
    for j in range(len(end)):
        for i in range(max(0, j - max_len + 1), j + 1):
            score = float(start[i] + end[j])
            if best is None or score > best or (later_wins and score == best):
                best, pick = score, (i, j)
    return pick


@pytest.mark.parametrize("later_wins", [False, True])
def test_best_span_accepts_a_tie_broken_either_way(later_wins):
    checks.check_best_span(lambda s, e, n: _best_span(s, e, n, later_wins))


def test_best_span_rejects_separate_argmaxes():
    with pytest.raises(checks.ExerciseError, match="chosen together"):
        checks.check_best_span(lambda s, e, n: (int(s.argmax()), int(e.argmax())))
