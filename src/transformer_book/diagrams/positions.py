"""Diagrams of positional encodings: RoPE's rotation of a query and a key in 2-D, and
chapter 4's plots of what the position functions compute (the sinusoids' similarity
by offset, T5's buckets, ALiBi's penalties)."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Arc

from transformer_book import plotting, positions

from ._draw import EDGE, arrow, canvas, text

__all__ = ["rope_rotation", "sinusoid_similarity", "t5_buckets", "alibi_penalties"]


def _vector(ax, origin, angle_deg, length, color, label, dashed=False) -> None:
    """An arrow from ``origin`` at ``angle_deg`` with its label just past the tip."""
    ox, oy = origin
    dx, dy = math.cos(math.radians(angle_deg)), math.sin(math.radians(angle_deg))
    if dashed:
        ax.plot(
            [ox, ox + length * dx],
            [oy, oy + length * dy],
            color=color,
            ls="--",
            lw=1.2,
            alpha=0.6,
        )
    else:
        arrow(ax, (ox, oy), (ox + length * dx, oy + length * dy), color=color)
    tx, ty = ox + (length + 0.35) * dx, oy + (length + 0.35) * dy
    text(ax, tx, ty, label, 11, color=color, alpha=0.7 if dashed else 1.0)


def _arc(ax, origin, radius, start, end, color, label, lw=1.4, at=0.5) -> None:
    """An arc of ``radius`` from angle ``start`` to ``end`` (degrees), labelled at the
    fraction ``at`` of its length."""
    ax.add_patch(
        Arc(
            origin, 2 * radius, 2 * radius, theta1=start, theta2=end, color=color, lw=lw
        )
    )
    mid = math.radians(start + at * (end - start))
    r = radius + 0.28
    x, y = origin[0] + r * math.cos(mid), origin[1] + r * math.sin(mid)
    text(ax, x, y, label, 10, color=color)


def _times_theta(p: int) -> str:
    """``pθ`` as math text, ``θ`` alone for p = 1."""
    return r"\theta" if p == 1 else f"{p}\\theta"


def rope_rotation(
    theta_deg: float = 20.0,
    q_deg: float = 10.0,
    k_deg: float = 40.0,
    pairs: tuple[tuple[int, int], tuple[int, int]] = ((1, 3), (5, 7)),
) -> Figure:
    """RoPE in two dimensions: the query of position m turns by mθ, the key of position
    n by nθ; the angle between them, hence their dot product, depends on n − m only.

    Two panels, one per (m, n) pair of ``pairs`` with the same offset: dashed arrows are
    q and k before the rotation, solid ones after it.
    """
    (m1, n1), (m2, n2) = pairs
    if n1 - m1 != n2 - m2:
        raise ValueError(
            f"pairs must have the same offset n - m to show the same angle, got {pairs}"
        )
    fig, ax = canvas(12.0, 4.9)
    q_color, k_color, between = EDGE["input"], EDGE["weight"], EDGE["output"]
    for cx, (m, n) in zip((3.0, 9.0), pairs):
        o = (cx, 1.5)
        # the upper half of the circle the vectors turn on, and the two axes
        ax.add_patch(Arc(o, 4.0, 4.0, theta1=0, theta2=180, color="#BBBBBB", lw=0.8))
        ax.plot([cx - 2.4, cx + 2.4], [1.5, 1.5], color="#BBBBBB", lw=0.8)
        ax.plot([cx, cx], [1.5, 1.5 + 2.3], color="#BBBBBB", lw=0.8)
        q_rot, k_rot = q_deg + m * theta_deg, k_deg + n * theta_deg
        _vector(ax, o, q_deg, 2.0, q_color, "$q$", dashed=True)
        _vector(ax, o, k_deg, 1.6, k_color, "$k$", dashed=True)
        _arc(ax, o, 0.7, q_deg, q_rot, q_color, f"${_times_theta(m)}$", at=0.35)
        _arc(ax, o, 1.15, k_deg, k_rot, k_color, f"${_times_theta(n)}$", at=0.35)
        _vector(ax, o, q_rot, 2.0, q_color, f"$R({_times_theta(m)})\\,q$")
        _vector(ax, o, k_rot, 1.6, k_color, f"$R({_times_theta(n)})\\,k$")
        _arc(ax, o, 0.4, q_rot, k_rot, between, "", lw=2.6)
        text(ax, cx, 4.55, f"query at m = {m}, key at n = {n}", 12)
        gap = k_rot - q_rot
        text(ax, cx, 1.0, f"angle between them: {gap:g}°", 11, color=between)
    d_angle = k_deg - q_deg
    text(
        ax,
        6.0,
        0.35,
        f"same offset n − m = {n1 - m1}, θ = {theta_deg:g}°: the angle is (n − m)θ "
        f"+ {d_angle:g}° (the angle from q to k) in both, so the score is the same",
        11,
    )
    return fig


def sinusoid_similarity(n_positions: int = 50, d: int = 128) -> Figure:
    """The dot product of two sinusoidal encodings against their offset k = n - m: the
    formula sum_i cos(k omega_i) as a line, and PE_m . PE_n of the middle position m
    against every n as dots (float64)."""
    pe = positions.sinusoidal_encoding(n_positions, d).double()  # (n_positions, d)
    omega = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (d/2,)
    m = n_positions // 2
    offsets = torch.arange(-(n_positions - 1), n_positions)
    curve = torch.cos(offsets[:, None] * omega).sum(dim=1)
    fig, ax = plt.subplots(figsize=plotting.SINGLE)
    plotting.curves(offsets, {r"$\sum_i \cos(k\,\omega_i)$": curve}, ax,
                    styles=["-"], legend=False)  # fmt: skip
    label = rf"$\mathrm{{PE}}_{{{m}}} \cdot \mathrm{{PE}}_n$, $k = n - {m}$"
    ax.plot(torch.arange(n_positions) - m, pe[m] @ pe.T, "o", ms=3, label=label)
    ax.text(2, d / 2, f"k = 0: d/2 = {d // 2}", va="top", fontsize=9)
    ax.set(xlabel="offset k = n - m", ylabel="dot product")
    ax.set_title("sinusoidal encodings: similarity depends on the offset only")
    ax.legend()
    return fig


def t5_buckets(num_buckets: int = 32, max_distance: int = 128) -> Figure:
    """T5's bucket of every relative position j - i from -300 to 300, bidirectional
    (an encoder) and causal, with the dotted lines at ±max_distance."""
    rel = torch.arange(-300, 301)  # key position - query position
    fig, ax = plt.subplots(figsize=plotting.SINGLE)
    for bidirectional, label in ((True, "bidirectional (encoder)"), (False, "causal")):
        b = positions.t5_relative_position_bucket(
            rel, bidirectional, num_buckets, max_distance
        )
        ax.step(rel, b, where="mid", label=label)
    for x, label in ((-max_distance, None), (max_distance, "±max_distance")):
        ax.axvline(x, color="grey", ls=":", lw=1, label=label)
    ax.text(-290, 0.7 * num_buckets, "keys before the query", fontsize=9)
    ax.text(20, 0.1 * num_buckets, "keys after it", fontsize=9)
    title = f"T5 buckets: {num_buckets} buckets, max_distance = {max_distance}"
    ax.set(xlabel="relative position j - i (key - query)", ylabel="bucket", title=title)
    ax.legend()
    return fig


def alibi_penalties(n_heads: int = 8, n_keys: int = 33) -> Figure:
    """The bias ALiBi adds to the score in every head, against the distance to the key
    (the query at the last of ``n_keys`` positions), steep heads dark, shallow light."""
    # (H, n_keys): the query at position n_keys - 1, keys 0 … n_keys - 1 places back
    bias = positions.alibi_bias(n_heads, 1, n_keys)[0, :, 0].flip(-1)
    slopes = positions.alibi_slopes(n_heads).tolist()
    fig, ax = plt.subplots(figsize=plotting.SINGLE)
    for h, m in enumerate(slopes):  # steep to shallow: dark to light
        label = f"head {h}: m = 1/{1 / m:g}"
        ax.plot(bias[h], color=plt.cm.viridis(h / n_heads), label=label)
    ax.text(n_keys - 1, bias[0, -1].item(), "steepest", ha="right", va="bottom",
            fontsize=9)  # fmt: skip
    ax.set(xlabel="distance |i - j|", ylabel="bias added to the score",
           title=f"ALiBi penalties, {n_heads} heads")  # fmt: skip
    ax.legend(fontsize=8, ncol=2)
    return fig
