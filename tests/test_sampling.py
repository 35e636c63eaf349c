"""transformer_book.sampling: temperature, top-k and top-p equal Hugging Face's logits
processors; greedy is the argmax; sampling follows the softmax."""

import pytest
import torch

from transformer_book import sampling


def logits_of(*shape, seed=0, scale=2.0):
    g = torch.Generator().manual_seed(seed)
    return scale * torch.randn(*shape, generator=g)


def test_temperature_equals_hugging_face():
    from transformers.generation.logits_process import TemperatureLogitsWarper

    z = logits_of(3, 11)
    for t in (0.5, 1.0, 2.0):
        ref = TemperatureLogitsWarper(t)(None, z.clone())
        torch.testing.assert_close(sampling.apply_temperature(z, t), ref)


@pytest.mark.parametrize("k", [1, 3, 10, 50])
def test_top_k_equals_hugging_face(k):
    from transformers.generation.logits_process import TopKLogitsWarper

    z = logits_of(4, 17, seed=k)
    ref = TopKLogitsWarper(top_k=k)(None, z.clone())
    out = sampling.top_k_filter(z, k)
    assert torch.equal(out.isinf(), ref.isinf())
    torch.testing.assert_close(out, ref)
    assert ((out > float("-inf")).sum(-1) == min(k, 17)).all()


@pytest.mark.parametrize("p", [0.05, 0.3, 0.9, 1.0])
def test_top_p_equals_hugging_face(p):
    from transformers.generation.logits_process import TopPLogitsWarper

    z = logits_of(6, 25, seed=int(100 * p))
    ref = TopPLogitsWarper(top_p=p)(None, z.clone())
    out = sampling.top_p_filter(z, p)
    assert torch.equal(out.isinf(), ref.isinf())
    # the kept set is the smallest that reaches p, and never empty
    kept = out > float("-inf")
    assert (kept.sum(-1) >= 1).all()
    probs = z.softmax(-1)
    assert ((probs * kept).sum(-1) >= p - 1e-6).all()


def test_greedy_is_the_argmax_and_top_k_one_is_greedy():
    z = logits_of(5, 9)
    assert torch.equal(sampling.sample_next(z, temperature=0), z.argmax(-1))
    g = torch.Generator().manual_seed(0)
    assert torch.equal(sampling.sample_next(z, top_k=1, generator=g), z.argmax(-1))


def test_samples_follow_the_softmax():
    z = torch.tensor([[2.0, 1.0, 0.0, -1.0]]).expand(20_000, 4)
    g = torch.Generator().manual_seed(0)
    draws = sampling.sample_next(z, temperature=1.0, generator=g)
    freq = torch.bincount(draws, minlength=4) / 20_000
    torch.testing.assert_close(freq, z[0].softmax(-1), atol=0.015, rtol=0)
    cold = sampling.sample_next(z, temperature=0.25, generator=g)
    assert (
        cold == 0
    ).float().mean() > 0.95  # a low temperature concentrates on the top
    top2 = sampling.sample_next(z, top_k=2, generator=g)
    assert set(top2.unique().tolist()) == {0, 1}


def test_bad_inputs_raise():
    z = logits_of(2, 5)
    with pytest.raises(ValueError, match="temperature must be > 0 to rescale"):
        sampling.apply_temperature(z, 0)
    with pytest.raises(ValueError, match="temperature must be >= 0"):
        sampling.sample_next(z, temperature=-1)
    with pytest.raises(ValueError, match="top_k must be a positive integer, got 0"):
        sampling.top_k_filter(z, 0)
    with pytest.raises(ValueError, match=r"top_p must be in \(0, 1\], got 1.5"):
        sampling.top_p_filter(z, 1.5)
    with pytest.raises(ValueError, match=r"logits must have shape \(B, vocab_size\)"):
        sampling.sample_next(logits_of(5))
    with pytest.raises(ValueError, match="floating-point tensor"):
        sampling.top_k_filter(torch.arange(5), 2)


def _top_k_probs(z, k):
    return sampling.top_k_filter(z, k).softmax(-1)


def _top_p_probs(z, p):
    return sampling.top_p_filter(z, p).softmax(-1)


def test_check_top_k_top_p_passes_and_names_the_typical_mistakes():
    from transformer_book import checks
    from transformer_book.checks._core import ExerciseError

    checks.check_top_k_top_p(_top_k_probs, _top_p_probs)

    def exactly_k(z, k):  # torch.topk's indices: drops ties with the k-th
        out = torch.full_like(z, float("-inf"))
        idx = z.topk(k).indices
        out[idx] = z[idx]
        return out.softmax(-1)

    def past_p_dropped(z, p):  # cumsum <= p: the token that crosses p is lost
        probs = z.softmax(-1)
        s, order = probs.sort(descending=True)
        keep = torch.zeros_like(probs, dtype=torch.bool)
        keep[order[s.cumsum(0) <= p]] = True
        kept = probs * keep
        return kept / kept.sum().clamp_min(1e-12)

    def not_renormalised(z, k):
        return z.softmax(-1) * (z >= z.topk(k).values[-1])

    for bad_k, bad_p, match in (
        (exactly_k, _top_p_probs, "tied for second place"),
        (_top_k_probs, past_p_dropped, "keep the token that crosses p"),
        (not_renormalised, _top_p_probs, "renormalise"),
    ):
        with pytest.raises(ExerciseError, match=match):
            checks.check_top_k_top_p(bad_k, bad_p)


def test_nucleus_size_counts_what_top_p_keeps():
    z = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05], [0.97, 0.01, 0.01, 0.01]]))
    assert sampling.nucleus_size(z, 0.9).tolist() == [3, 1]


def test_next_logits_is_the_last_position_without_gradients():
    model = torch.nn.Sequential(torch.nn.Embedding(7, 5), torch.nn.Linear(5, 7))
    ids = torch.tensor([[1, 2, 3], [4, 5, 6]])  # (B, T)
    z = sampling.next_logits(model, ids)  # (B, V)
    assert z.shape == (2, 7) and not z.requires_grad and z.dtype == torch.float32
    torch.testing.assert_close(z, model(ids)[:, -1].detach())
    with pytest.raises(ValueError, match=r"ids must be \(B, T\).*\(3,\)"):
        sampling.next_logits(model, torch.tensor([1, 2, 3]))


def test_certainty_by_kind_averages_each_kind_of_position():
    # vocabulary: 0 = "a", 1 = "b", 2 = " "; x read, y came next
    is_letter = torch.tensor([True, True, False])
    x = torch.tensor([[0, 0, 2, 1]])  # (1, 4)
    y = torch.tensor([[1, 2, 0, 0]])  # inside, end, after a space, inside
    logits = logits_of(1, 4, 3, seed=3)
    top = logits.softmax(-1).amax(-1)[0]  # (4,)
    kept = sampling.nucleus_size(logits, 0.9)[0]  # (4,)
    out = sampling.certainty_by_kind(logits, x, y, is_letter, space=2, p=0.9)
    assert [v["n"] for v in out.values()] == [2, 1, 1]
    inside = out["inside a word"]
    assert inside["top"] == pytest.approx(top[[0, 3]].mean().item())
    assert inside["kept"] == pytest.approx(kept[[0, 3]].float().mean().item())
    assert inside["q1"] <= inside["top"] <= inside["q3"]
    assert out["end of a word"]["top"] == pytest.approx(top[1].item())
    assert out["after a space"]["kept"] == kept[2].item()


class _Echo(torch.nn.Module):
    """generate() appends a token: greedy the last one again, else a random one."""

    def generate(self, ids, n, temperature=1.0, top_p=None, generator=None):
        for _ in range(n):
            if temperature == 0:
                new = ids[:, -1:]
            else:
                new = torch.randint(0, 5, (len(ids), 1), generator=generator)
            ids = torch.cat([ids, new], 1)
        return ids


def test_certainty_lines_print_each_kind():
    where = {"after a space": dict(n=1200, top=0.31, q1=0.2, q3=0.4, kept=12.25)}
    assert sampling.certainty_lines(where) == [
        "after a space 1,200 positions: most likely p = 0.31 (quartiles 0.20-0.40), "
        "top-p keeps 12.2"
    ]


def test_continuations_seed_every_setting_and_keep_one_greedy_text():
    prompt = torch.tensor([[1, 2, 3]])
    settings = {"greedy": dict(temperature=0.0), "a": {}, "b": dict(top_p=0.9)}
    out = sampling.continuations(_Echo(), prompt, 4, 3, settings, seed=7)
    assert out["greedy"].tolist() == [[3, 3, 3, 3]]
    assert out["a"].shape == (3, 4) and torch.equal(out["a"], out["b"])  # same seed
    again = sampling.continuations(_Echo(), prompt, 4, 3, settings, seed=7)
    assert torch.equal(again["a"], out["a"])
