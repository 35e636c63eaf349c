"""transformer_book.masks: True = may attend, for separate query and key lengths."""

import pytest
import torch

from transformer_book import checks, masks


def test_causal_square():
    m = masks.causal_mask(4)
    assert m.dtype == torch.bool
    assert torch.equal(
        m,
        torch.tensor(
            [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]], dtype=torch.bool
        ),
    )


def test_causal_queries_are_the_last_positions():
    m = masks.causal_mask(2, 5)  # two new tokens at positions 3 and 4
    assert torch.equal(
        m, torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    )
    assert masks.causal_mask(1, 10).all()


def test_causal_rejects_more_queries_than_keys():
    with pytest.raises(ValueError, match="n_queries=5, n_keys=3"):
        masks.causal_mask(5, 3)


def test_padding_mask_shape_and_values():
    m = masks.padding_mask(torch.tensor([3, 0, 5]), 5)
    assert m.shape == (3, 1, 1, 5)
    assert m[0, 0, 0].tolist() == [True, True, True, False, False]
    assert not m[1].any() and m[2].all()


def test_padding_mask_from_ids():
    ids = torch.tensor([[5, 6, 0, 0], [7, 0, 8, 0]])
    m = masks.padding_mask_from_ids(ids, pad_id=0)
    assert m.shape == (2, 1, 1, 4)
    assert m[1, 0, 0].tolist() == [True, False, True, False]


def test_padding_mask_bad_lengths():
    with pytest.raises(
        ValueError, match=r"lengths must lie in \[0, n_keys=4\], got \[2, 6\]"
    ):
        masks.padding_mask(torch.tensor([2, 6]), 4)
    with pytest.raises(ValueError, match="1-D integer tensor"):
        masks.padding_mask(torch.tensor([[1.0]]), 4)


def test_combined_masks_broadcast():
    m = masks.causal_mask(4) & masks.padding_mask(torch.tensor([4, 2]), 4)
    assert m.shape == (2, 1, 4, 4)
    assert m[1, 0, 3].tolist() == [True, True, False, False]


# --- sliding windows and global tokens (chapter 08) ---------------------------------


def test_sliding_window_causal_values():
    m = masks.sliding_window_mask(5, window=2)
    expected = torch.tensor(
        [
            [1, 0, 0, 0, 0],
            [1, 1, 0, 0, 0],
            [0, 1, 1, 0, 0],
            [0, 0, 1, 1, 0],
            [0, 0, 0, 1, 1],
        ],
        dtype=torch.bool,
    )
    assert m.dtype == torch.bool and torch.equal(m, expected)


def test_sliding_window_non_causal_values():
    m = masks.sliding_window_mask(4, window=2, causal=False)
    expected = torch.tensor(
        [[1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 1], [0, 0, 1, 1]], dtype=torch.bool
    )
    assert torch.equal(m, expected)


@pytest.mark.parametrize("n_queries,n_keys", [(6, 6), (1, 9), (3, 8), (0, 4)])
def test_sliding_window_matches_the_definition(n_queries, n_keys):
    for window in (1, 2, 3, 5, 20):
        for causal in (True, False):
            m = masks.sliding_window_mask(
                n_queries, n_keys, window=window, causal=causal
            )
            assert m.shape == (n_queries, n_keys)
            for i in range(n_queries):
                p = i + n_keys - n_queries
                for j in range(n_keys):
                    ok = 0 <= p - j < window if causal else abs(p - j) < window
                    assert bool(m[i, j]) == ok, (i, j, window, causal)


@pytest.mark.parametrize("n_queries,n_keys", [(7, 7), (2, 7), (1, 1)])
def test_wide_window_equals_causal_mask(n_queries, n_keys):
    for window in (n_keys, n_keys + 3):
        assert torch.equal(
            masks.sliding_window_mask(n_queries, n_keys, window=window),
            masks.causal_mask(n_queries, n_keys),
        )
    # one key narrower and the oldest key is cut off for the last query
    if n_keys > 1:
        assert not masks.sliding_window_mask(n_queries, n_keys, window=n_keys - 1)[
            -1, 0
        ]


def test_sliding_window_window_one_is_the_diagonal():
    assert torch.equal(masks.sliding_window_mask(5, window=1), torch.eye(5).bool())
    assert torch.equal(
        masks.sliding_window_mask(5, window=1, causal=False), torch.eye(5).bool()
    )


def test_sliding_window_matches_hugging_face_sliding_window_masks():
    """HF's causal sliding window (Mistral's) w = ours; HF's bidirectional window w =
    our w + 1."""
    mu = pytest.importorskip("transformers.masking_utils")
    T = 9
    q_idx, kv_idx = torch.arange(T)[:, None], torch.arange(T)[None, :]
    for w in (1, 3, 4, 8):
        hf_causal = mu.sliding_window_causal_mask_function(w)(0, 0, q_idx, kv_idx)
        assert torch.equal(masks.sliding_window_mask(T, window=w), hf_causal)
        hf_bidir = mu.sliding_window_bidirectional_mask_function(w)(0, 0, q_idx, kv_idx)
        ours = masks.sliding_window_mask(T, window=w + 1, causal=False)
        assert torch.equal(ours, hf_bidir.expand(T, T))


def test_sliding_window_bad_inputs():
    with pytest.raises(ValueError, match=r"window must be an int >= 1.*got 0"):
        masks.sliding_window_mask(4, window=0)
    with pytest.raises(ValueError, match=r"window must be an int >= 1.*got 2.5"):
        masks.sliding_window_mask(4, window=2.5)
    with pytest.raises(ValueError, match="n_queries=5, n_keys=3"):
        masks.sliding_window_mask(5, 3, window=2)
    with pytest.raises(ValueError, match="n_queries must be an int, got 4.0"):
        masks.sliding_window_mask(4.0, window=2)
    with pytest.raises(TypeError):
        masks.sliding_window_mask(4, 4, 2)  # window is keyword-only


def test_global_tokens_see_and_are_seen_by_everyone():
    local = masks.sliding_window_mask(6, window=2, causal=False)
    m = masks.with_global_tokens(local, [0, 4])
    assert m[:, 0].all() and m[:, 4].all()  # every query sees them
    assert m[0].all() and m[4].all()  # they see every key
    others = [1, 2, 3, 5]
    assert torch.equal(m[others][:, others], local[others][:, others])
    assert not torch.equal(m, local) and local.sum() < m.sum()  # a copy, not in place
    assert masks.with_global_tokens(local, []).equal(local)


def test_global_tokens_with_fewer_queries_than_keys_and_batch_dims():
    local = masks.sliding_window_mask(2, 6, window=2)  # queries at positions 4 and 5
    m = masks.with_global_tokens(local, torch.tensor([1, 5]))
    assert m[:, 1].all()  # column of key 1
    assert m[1].all()  # query 1 is position 5, a global token
    assert m[0].tolist() == [False, True, False, True, True, True]
    batched = masks.with_global_tokens(local.expand(3, 2, 2, 6), [1, 5])
    assert batched.shape == (3, 2, 2, 6) and torch.equal(batched[2, 1], m)


def test_global_tokens_and_causal_mask_combine():
    T = 6
    m = masks.with_global_tokens(masks.sliding_window_mask(T, window=2), [0])
    m = m & masks.causal_mask(T)
    assert m[:, 0].all()  # everyone still sees the global first token
    assert not m.triu(1).any()  # and nobody sees the future


def test_global_tokens_bad_inputs():
    local = masks.sliding_window_mask(4, window=2)
    with pytest.raises(ValueError, match=r"positions must lie in \[0, n_keys=4\)"):
        masks.with_global_tokens(local, [4])
    with pytest.raises(ValueError, match=r"positions must lie in \[0, n_keys=4\)"):
        masks.with_global_tokens(local, [-1])
    with pytest.raises(ValueError, match="positions must be a 1-D list or tensor"):
        masks.with_global_tokens(local, [0.5])
    with pytest.raises(ValueError, match="mask must be a boolean tensor.*float32"):
        masks.with_global_tokens(local.float(), [0])
    with pytest.raises(ValueError, match="n_queries <= n_keys"):
        masks.with_global_tokens(torch.ones(5, 3, dtype=torch.bool), [0])


# --- the exercise checks of chapter 08 ------------------------------------------------


def _window_answer(n_q, n_k, window):
    p = torch.arange(n_q)[:, None] + n_k - n_q
    d = p - torch.arange(n_k)
    return (d >= 0) & (d < window)


def test_check_sliding_window_mask_accepts_the_answer(capsys):
    checks.check_sliding_window_mask(_window_answer)
    assert "Correct" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong,message",
    [
        (lambda q, k, w: _window_answer(q, k, w + 1), "window \\+ 1 keys"),
        (
            lambda q, k, w: masks.sliding_window_mask(q, k, window=w, causal=False),
            "looks both ways",
        ),
        (lambda q, k, w: masks.causal_mask(q, k), "full causal mask"),
        (lambda q, k, w: _window_answer(q, k, w).int(), "boolean mask"),
        (
            lambda q, k, w: torch.cat(
                (_window_answer(q, q, w), torch.zeros(q, k - q, dtype=torch.bool)), 1
            ),
            "the \\*last\\* positions",
        ),
    ],
)
def test_check_sliding_window_mask_explains_mistakes(wrong, message):
    with pytest.raises(checks.ExerciseError, match=message):
        checks.check_sliding_window_mask(wrong)


def _earliest(t, windows):
    if None in windows:
        return 0
    return max(0, t - sum(w - 1 for w in windows))


def test_check_earliest_input_accepts_the_answer(capsys):
    checks.check_earliest_input(_earliest)
    assert "Correct" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong,message",
    [
        (lambda t, ws: max(0, t - sum(w for w in ws if w)), "not window"),
        (
            lambda t, ws: max(0, t - sum(w - 1 for w in ws if w is not None)),
            "one global layer",
        ),
        (lambda t, ws: _earliest(t, ws) if t > 10 else -1, "clamp at 0|expected"),
        (lambda t, ws: float(_earliest(t, ws)), "return an int"),
    ],
)
def test_check_earliest_input_explains_mistakes(wrong, message):
    with pytest.raises(checks.ExerciseError, match=message):
        checks.check_earliest_input(wrong)


def test_check_earliest_input_no_clamp():
    wrong = lambda t, ws: 0 if None in ws else t - sum(w - 1 for w in ws)  # noqa: E731
    with pytest.raises(checks.ExerciseError, match="clamp at 0"):
        checks.check_earliest_input(wrong)


def _merge(m1, l1, o1, m2, l2, o2):
    m = torch.maximum(m1, m2)
    safe = m.masked_fill(m == float("-inf"), 0.0)  # both sets masked: measure from 0
    a, b = torch.exp(m1 - safe), torch.exp(m2 - safe)
    return m, l1 * a + l2 * b, o1 * a + o2 * b


def _unguarded_merge(m1, l1, o1, m2, l2, o2):
    m = torch.maximum(m1, m2)
    a, b = torch.exp(m1 - m), torch.exp(m2 - m)  # NaN where m1 = m2 = -inf
    return m, l1 * a + l2 * b, o1 * a + o2 * b


def test_check_merge_softmax_accepts_the_answer(capsys):
    checks.check_merge_softmax(_merge)
    assert "Correct" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong,message",
    [
        (
            lambda m1, l1, o1, m2, l2, o2: (torch.maximum(m1, m2), l1 + l2, o1 + o2),
            "o = o1 \\+ o2",
        ),
        (
            lambda *a: (_merge(*a)[0], a[1] + a[4], _merge(*a)[2]),
            "l = l1 \\+ l2",
        ),
        (
            lambda *a: (_merge(*a)[0], _merge(*a)[1], _merge(*a)[2] / _merge(*a)[1]),
            "normalised",
        ),
        (lambda *a: (a[0] + a[3], *_merge(*a)[1:]), "m = max"),
        (lambda *a: _merge(*a)[:2], "tuple \\(m, l, o\\)"),
        (_unguarded_merge, "masked in both sets .* gives NaN"),
    ],
)
def test_check_merge_softmax_explains_mistakes(wrong, message):
    with pytest.raises(checks.ExerciseError, match=message):
        checks.check_merge_softmax(wrong)


def test_masked_mean():
    h = torch.arange(12.0).reshape(1, 4, 3)  # (B=1, T=4, D=3)
    keep = torch.tensor([[True, True, False, False]])
    torch.testing.assert_close(
        masks.masked_mean(h, keep), torch.tensor([[1.5, 2.5, 3.5]])
    )
    assert (
        masks.masked_mean(h, torch.zeros(1, 4, dtype=torch.bool)).abs().sum() == 0
    )  # nothing kept: zeros
    with pytest.raises(ValueError, match="keep must be a bool tensor of shape"):
        masks.masked_mean(h, keep.float())
