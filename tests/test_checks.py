"""The exercise checks accept the reference answer and explain typical wrong answers."""

import math

import pytest

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
