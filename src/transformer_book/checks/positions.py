"""Checks for the exercises of chapter 04 (positional encodings)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import torch
from torch import Tensor

from .. import positions
from ._core import ExerciseError, call, expect_close, passed

__all__ = [
    "check_sinusoidal_encoding",
    "check_alibi_slopes",
    "check_rope_rotation",
    "check_unseen_buckets",
    "UNSEEN_SETTINGS",
    "check_unseen_prediction",
    "check_extrapolation_prediction",
]


def _same(got: object, other: Tensor) -> bool:
    """True when ``got`` is a tensor of ``other``'s shape holding (nearly) its values."""
    return (
        isinstance(got, Tensor)
        and got.shape == other.shape
        and torch.allclose(got.float(), other, atol=1e-5)
    )


def check_sinusoidal_encoding(fn: Callable[[int, int], Tensor]) -> str:
    """``fn(n_positions, d_model)`` must return the (n_positions, d_model) sinusoidal encoding,
    sin in the even columns and cos in the odd ones, ``ω_i = 10000^(-2i/d_model)``."""
    n, d = 40, 16
    got = call(fn, n, d)
    expected = positions.sinusoidal_encoding(n, d)
    p = torch.arange(n, dtype=torch.float64)[:, None]
    i = torch.arange(d // 2, dtype=torch.float64)
    omega = 10000.0 ** (-2 * i / d)
    mistakes = {
        (
            "sin and cos are swapped: even columns (0, 2, 4, …) hold sin(p·ω_i), "
            "odd columns cos(p·ω_i)."
        ): torch.stack(((p * omega).cos(), (p * omega).sin()), -1).reshape(n, d),
        "You put all the sines first and all the cosines after them: interleave them instead, "
        "column 2i = sin(p·ω_i), column 2i+1 = cos(p·ω_i).": torch.cat(
            ((p * omega).sin(), (p * omega).cos()), -1
        ),
        "The exponent uses the pair index i over d_model: ω_i = 10000^(-2i/d_model), note the 2 "
        "(the exponent reaches about -1 in the last pair, not -1/2).": torch.stack(
            ((p * 10000.0 ** (-i / d)).sin(), (p * 10000.0 ** (-i / d)).cos()), -1
        ).reshape(n, d),
        (
            "Each column got its own frequency 10000^(-j/d_model) with j the column: "
            "a sin/cos pair must share one frequency, ω_i for columns 2i and 2i+1, "
            "or the dot product stops depending on the distance alone."
        ): torch.where(
            torch.arange(d) % 2 == 0,
            (p * 10000.0 ** (-torch.arange(d) / d)).sin(),
            (p * 10000.0 ** (-torch.arange(d) / d)).cos(),
        ),
        "Positions start at 0, not 1: row 0 must be sin(0)=0, cos(0)=1, 0, 1, …": (
            positions.sinusoidal_encoding(n + 1, d)[1:].double()
        ),
    }
    for message, wrong in mistakes.items():
        if _same(got, wrong.float()):
            raise ExerciseError(message)
    expect_close(
        got,
        expected,
        "sinusoidal encoding",
        "PE[p, 2i] = sin(p·ω_i), PE[p, 2i+1] = cos(p·ω_i).",
    )
    return passed(
        "every position gets its own pattern, and PE_m · PE_n = Σ_i cos((m − n)·ω_i)."
    )


def check_alibi_slopes(fn: Callable[[int], Tensor]) -> str:
    """``fn(n_heads)`` must return ALiBi's (n_heads,) slopes, for any number of heads."""
    for n in (1, 2, 4, 8, 16, 3, 6, 12, 20):
        got = call(fn, n)
        expected = positions.alibi_slopes(n)
        if isinstance(got, (list, tuple)):
            raise ExerciseError(
                "Return a tensor, e.g. torch.tensor(slopes), not a Python list."
            )
        if n > 1 and _same(got, expected.flip(0)):
            raise ExerciseError(
                f"n_heads={n}: your slopes run backwards; head 0 gets the steepest slope 2^(-8/n)."
            )
        naive = torch.tensor([2.0 ** (-8.0 * (h + 1) / n) for h in range(n)])
        if n & (n - 1) and _same(got, naive):
            raise ExerciseError(
                f"n_heads={n} is not a power of two: the paper does not use 2^(-8/n) directly. "
                "Take the slopes for the largest power of two p below n, then every other slope "
                "of the 2p-head sequence for the remaining n - p heads."
            )
        if (
            isinstance(got, Tensor)
            and got.shape == expected.shape
            and n & (n - 1)
            and not _same(got, expected)
        ):
            if torch.allclose(
                got.float().sort().values, expected.sort().values, atol=1e-6
            ):
                raise ExerciseError(
                    f"n_heads={n}: right slopes in the wrong order. The p power-of-two slopes come "
                    "first, then the ones borrowed from the 2p sequence."
                )
        expect_close(
            got,
            expected,
            f"slopes for n_heads={n}",
            "For a power of two n: slope_h = 2^(-8(h+1)/n), h = 0 … n-1.",
            atol=1e-7,
            rtol=1e-6,
        )
    return passed(
        "a geometric sequence from 2^(-8/n) for powers of two, "
        "interleaved from the 2p sequence otherwise."
    )


def _rope_reference(
    x: Tensor, pos: Tensor, sign: float = 1.0, half_split: bool = True, two: float = 2.0
) -> Tensor:
    """The rotation in the book's half-split layout, with switches that reproduce common
    mistakes."""
    d = x.shape[-1]
    theta = 10000.0 ** (-two * torch.arange(d // 2, dtype=torch.float64) / d)  # (d/2,)
    ang = sign * pos.double()[:, None] * theta  # (T, d/2)
    cos, sin = ang.cos(), ang.sin()
    x = x.double()
    if half_split:
        x1, x2 = x[..., : d // 2], x[..., d // 2 :]  # pair i = (x_i, x_{i+d/2})
        return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), -1).float()
    x1, x2 = x[..., 0::2], x[..., 1::2]  # pair i = (x_2i, x_2i+1)
    return (
        torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), -1).flatten(-2).float()
    )


def check_rope_rotation(fn: Callable[[Tensor, Tensor], Tensor]) -> str:
    """``fn(x, pos)`` with x (B, H, T, Dh) and positions (T,) must rotate pair
    (x_i, x_{i+Dh/2}) of the token at position p by the angle p·θ_i,
    ``θ_i = 10000^(-2i/Dh)`` (the book's half-split layout)."""
    g = torch.Generator().manual_seed(4)
    x = torch.randn(2, 3, 7, 8, generator=g)
    pos = torch.tensor([0, 1, 2, 5, 9, 30, 100])
    got = call(fn, x.clone(), pos.clone())
    cos, sin = positions.rope_angles(pos, 8)
    expected = positions.apply_rope(x, cos, sin)
    if _same(got, x):
        raise ExerciseError(
            "The output equals the input: nothing was rotated "
            "(only position 0 should stay unchanged)."
        )
    mistakes = {
        (
            "You rotate by -p·θ_i (clockwise): the rotation is "
            "(x1 cos − x2 sin, x1 sin + x2 cos). Scores would still depend only on "
            "the offset, but with the opposite sign convention of the paper and of "
            "Llama's weights."
        ): _rope_reference(x, pos, sign=-1.0),
        (
            "You paired neighbouring features (x_2i, x_2i+1), as the RoFormer paper "
            "writes it. The book pairs x_i with x_{i + Dh/2} (Hugging Face Llama's "
            "rotate_half): split the last axis into two halves."
        ): _rope_reference(x, pos, half_split=False),
        (
            "The frequencies are off: θ_i = 10000^(-2i/Dh) for pair i = 0 … Dh/2 − 1 "
            "(note the 2)."
        ): _rope_reference(x, pos, two=1.0),
    }
    for message, wrong in mistakes.items():
        if _same(got, wrong):
            raise ExerciseError(message)
    if isinstance(got, Tensor) and got.shape == x.shape:
        norms = got.float().norm(dim=-1), x.norm(dim=-1)
        if not torch.allclose(*norms, atol=1e-4):
            raise ExerciseError(
                "A rotation keeps every vector's length, yours does not: did you use "
                "the same angle for both members of a pair, and cos for one term and "
                "sin for the other?"
            )
    expect_close(
        got,
        expected,
        "rotated x",
        "x·cos + rotate_half(x)·sin with rotate_half(x) = (−x2, x1).",
    )
    return passed(
        "each feature pair turns by p·θ_i, so q_m · k_n depends on n − m only."
    )


# --- T5: which buckets does a longer test reach that training never did? ----------------


def _causal_buckets(
    first: int, last: int, num_buckets: int, max_distance: int, sign: int = -1
) -> set[int]:
    """The causal T5 buckets of the distances ``first … last`` into the past."""
    if last < first:
        return set()
    rel = sign * torch.arange(first, last + 1)  # key - query: negative = the past
    return set(
        positions.t5_relative_position_bucket(
            rel, bidirectional=False, num_buckets=num_buckets, max_distance=max_distance
        ).tolist()
    )


def _unseen(
    train_len: int,
    test_len: int,
    num_buckets: int,
    max_distance: int,
    train_extra: int = 0,
    test_extra: int = 0,
    sign: int = -1,
    subtract: bool = True,
) -> list[int]:
    """The reference answer, with switches that reproduce the usual mistakes."""
    args = (num_buckets, max_distance, sign)
    seen = _causal_buckets(0, train_len - 1 + train_extra, *args)
    test = _causal_buckets(train_len, test_len - 1 + test_extra, *args)
    return sorted(test - seen if subtract else test)


def check_unseen_buckets(fn: Callable[[int, int, int, int], Iterable[int]]) -> str:
    """``fn(train_len, test_len, num_buckets, max_distance)`` must return the sorted
    causal T5 buckets that test sequences of ``test_len`` tokens reach and training
    sequences of ``train_len`` tokens never do."""
    settings = [
        (32, 64, 16, 32),
        (32, 64, 16, 128),
        (32, 64, 32, 128),
        (20, 200, 32, 128),
    ]
    settings += [(8, 40, 8, 16), (10, 11, 16, 64), (30, 33, 16, 128)]
    mistakes = {
        (
            "Your training distances go one too far: a sequence of train_len tokens "
            "holds distances 0 … train_len − 1 (query at the last position, key at "
            "the first)."
        ): dict(train_extra=1),
        (
            "Your test distances go one too far: a sequence of test_len tokens holds "
            "distances up to test_len − 1, not test_len."
        ): dict(test_extra=1),
        (
            "You passed the distances as positive numbers. t5_relative_position_bucket "
            "takes key − query, which is negative for the keys a causal model sees "
            "(they lie in the past); positive values all fall into bucket 0."
        ): dict(sign=1),
        (
            "These are all the buckets the test reaches, including the ones training "
            "reached too: remove the buckets of the distances 0 … train_len − 1."
        ): dict(subtract=False),
    }
    for train_len, test_len, num_buckets, max_distance in settings:
        got = call(fn, train_len, test_len, num_buckets, max_distance)
        if isinstance(got, Tensor):
            got = got.tolist()
        try:
            got = sorted(int(b) for b in got)
        except TypeError:
            raise ExerciseError(
                f"Return a list of bucket numbers (ints), got {type(got).__name__}."
            ) from None
        setting = (
            f"train_len={train_len}, test_len={test_len}, "
            f"num_buckets={num_buckets}, max_distance={max_distance}"
        )
        expected = _unseen(train_len, test_len, num_buckets, max_distance)
        if got == expected:
            continue
        for message, switch in mistakes.items():
            if got == _unseen(train_len, test_len, num_buckets, max_distance, **switch):
                raise ExerciseError(f"{setting}: {message}")
        raise ExerciseError(
            f"{setting}: got {got}, expected {expected}. Use the causal buckets "
            "(bidirectional=False) of the distances train_len … test_len − 1, minus "
            "those of 0 … train_len − 1."
        )
    return passed(
        "with max_distance at the training length, every longer distance shares the "
        "last bucket, which training reached; with a larger max_distance, the test "
        "meets buckets whose bias was never trained."
    )


# --- predict, then measure: does a longer test meet T5 buckets training never saw? ---

# (train_len, test_len) pairs of exercise 1, with T5's defaults: 32 causal buckets,
# max_distance 128
UNSEEN_SETTINGS = ((32, 64), (64, 128), (128, 256), (512, 2048))


def check_unseen_prediction(
    predicted: Mapping[tuple[int, int], int] | Callable[[], Mapping],
    num_buckets: int = 32,
    max_distance: int = 128,
) -> str:
    """Compare a prediction of how many causal T5 buckets a test of ``test_len`` tokens
    meets that training on ``train_len`` tokens never reached, for every pair of
    :data:`UNSEEN_SETTINGS`. Graded: none or some, per pair; the exact counts are shown.
    """
    if callable(predicted):
        predicted = call(predicted)
    if not isinstance(predicted, Mapping) or set(predicted) != set(UNSEEN_SETTINGS):
        raise ExerciseError(
            "Return a dict with one count per (train_len, test_len) pair: "
            f"{list(UNSEEN_SETTINGS)}."
        )
    # the first distance of the last bucket (the clamp merges it with the overflow)
    top = min(
        d
        for d in range(max_distance + 1)
        if _causal_buckets(d, d, num_buckets, max_distance) == {num_buckets - 1}
    )
    wrong, lines = [], []
    for train_len, test_len in UNSEEN_SETTINGS:
        unseen = _unseen(train_len, test_len, num_buckets, max_distance)
        every = _unseen(train_len, test_len, num_buckets, max_distance, subtract=False)
        guess = int(predicted[train_len, test_len])
        lines.append(
            f"train {train_len}, test {test_len}: you said {guess}, measured "
            f"{len(unseen)} {unseen}"
        )
        if (guess > 0) == (len(unseen) > 0):
            continue
        where = f"- train {train_len}, test {test_len}: you said {guess}, measured " + (
            f"{len(unseen)} ({unseen})."
        )
        if guess == len(every) and guess > 0:
            why = (
                "You counted every bucket the test reaches; training reached those "
                f"of the distances 0 … {train_len - 1} already."
            )
        elif guess == 0:
            why = (
                f"Only distances from {top} on share the last bucket (it starts a "
                f"little below max_distance = {max_distance}). Below that the buckets "
                f"are log-spaced, so distances {train_len} … {min(test_len, top) - 1} "
                "still get buckets of their own, which training never reached."
            )
        else:
            why = (
                f"The last bucket starts at distance {top} (the clamp merges it with "
                f"everything from max_distance on), and training at {train_len} tokens "
                "reached it: every longer distance shares it, so a longer test meets "
                "nothing new."
            )
        wrong.append(f"{where} {why}")
    if wrong:
        raise ExerciseError(
            "Your prediction and the measurement disagree:\n" + "\n".join(wrong)
        )
    return passed("none or some, as you predicted. Exact counts:\n" + "\n".join(lines))


# --- predict, then measure: which position schemes survive twice the length? ----------

SCHEME_NAMES = ("none", "learned", "sinusoidal", "T5 bias", "ALiBi", "RoPE")
# A measurement closer than _MARGIN to the threshold that decides it is too close to call
# on one seed: either prediction is accepted. In chapter 4's quick setting, seeds 0-4
# of measure_copy(1, 128) spread by at most 0.06 on the measurement nearest a threshold
# (ALiBi at the training length, 0.61-0.67; the threshold is 0.8).
_LEARN, _KEEP, _MARGIN = 0.8, 0.9, 0.08

# Why a scheme fails or survives, shown when a prediction disagrees with the measurement.
_WHY_FAILS = {
    "none": "Without positions the model cannot tell which earlier token is 1 back.",
    "learned": (
        "The learned table has no vector for positions past max_len: the model cannot "
        "even run at twice the training length."
    ),
    "sinusoidal": (
        "Positions 32–63 were never seen in training: their encodings are inputs the "
        "model never learned to read."
    ),
    "T5 bias": (
        "Distances past max_distance share the last bucket; if max_distance exceeds "
        "the training length, longer tests meet buckets training never updated."
    ),
    "ALiBi": (
        "ALiBi's penalty is smallest at distance 0, the query's own token, not the "
        "token before it: a head favours the token itself over the previous one "
        "whatever the content. Mixing heads of different slopes can work around "
        "that, but a small one-layer model does not find it in a short training."
    ),
    "RoPE": (
        "Offset 1 was seen in training, but keys 32–63 places back were not: nothing "
        "kept their scores low, and they draw attention away (section 8 measures it)."
    ),
}
_WHY_SURVIVES = {
    "T5 bias": (
        "The bias of distance 1 is the same at any length, and every distance past "
        "max_distance (the training length here) shares one bucket that training "
        "reached."
    ),
    "ALiBi": (
        "Its fixed penalty is the same rule at every length, and this model found a "
        "way around the head-level preference for the token itself (mixing heads "
        "of different slopes can favour the previous token)."
    ),
}


def _verdict(acc_train: float, acc_twice: float | None) -> tuple[bool, bool]:
    """(survives, clear): survives = learned at the training length and kept 90 % of
    that on the positions beyond it (the second half of a sequence twice as long);
    clear = the threshold that decides the verdict lies at least
    ``_MARGIN`` away, so that another seed or another CPU does not flip it.

    A scheme that clearly fails one condition is clear whatever the other one says: a
    model at 0.83 on the short test that keeps only 0.5 on the new positions fails
    either way.
    """
    learned = acc_train >= _LEARN
    learn_clear = abs(acc_train - _LEARN) >= _MARGIN
    if acc_twice is None:
        return False, True
    kept = acc_twice >= _KEEP * acc_train
    keep_clear = abs(acc_twice - _KEEP * acc_train) >= _MARGIN
    if (not learned and learn_clear) or (not kept and keep_clear):
        return False, True  # clearly fails one of the two
    return learned and kept, learn_clear and keep_clear


def check_extrapolation_prediction(
    predicted: Iterable[str] | Callable[[], Iterable[str]],
    measured: Mapping[str, tuple[float, float | None]],
) -> str:
    """Compare a prediction with a measurement of which position schemes survive twice
    the training length.

    ``predicted``: a set of scheme names, or a function returning one: the schemes that
    learn the task at the training length (accuracy >= 0.8) and keep 90 % of that
    accuracy on the positions a sequence of twice that length adds (chapter 4 scores
    only those). ``measured``: scheme -> (accuracy at the training length, accuracy on
    the new positions, or None where the model cannot run). A scheme within 0.08 of
    a threshold is too close to call, and either prediction is accepted for it.
    """
    if callable(predicted):
        predicted = call(predicted)
    if isinstance(predicted, str) or not isinstance(predicted, Iterable):
        raise ExerciseError(
            "Write your prediction as a set of scheme names, e.g. {'RoPE', 'ALiBi'} "
            "(an empty set() if you think none survives)."
        )
    predicted = set(predicted)
    unknown = predicted - set(SCHEME_NAMES)
    if unknown:
        raise ExerciseError(
            f"Unknown scheme names {sorted(unknown)}: use names from {SCHEME_NAMES}."
        )
    missing = set(SCHEME_NAMES) - set(measured)
    if missing:
        raise ExerciseError(f"measured lacks the schemes {sorted(missing)}.")
    wrong, survivors, unclear = [], [], []
    for name in SCHEME_NAMES:
        acc_train, acc_twice = measured[name]
        survives, clear = _verdict(acc_train, acc_twice)
        twice = "n/a" if acc_twice is None else f"{acc_twice:.2f}"
        numbers = (
            f"measured {acc_train:.2f} at the training length, {twice} on the "
            "positions beyond it"
        )
        survivors += [name] if survives else []
        if not clear:
            unclear.append(f"{name} ({numbers})")
        elif survives != (name in predicted):
            said = "survives" if name in predicted else "fails"
            why = (_WHY_SURVIVES if survives else _WHY_FAILS).get(name, "")
            wrong.append(f"- {name}: you predicted it {said}; {numbers}. {why}")
    if wrong:
        raise ExerciseError(
            "Your prediction and the measurement disagree:\n" + "\n".join(wrong)
        )
    note = f" Too close to call on this run: {', '.join(unclear)}." if unclear else ""
    return passed(f"survivors measured: {survivors or 'none'}, as you predicted.{note}")
