"""The key/value cache of a decoder: keep what earlier tokens computed (chapter 09).

In a causal decoder a token's keys and values, in every layer, depend only on the
tokens up to it. Generating token t+1 therefore needs the keys and values of tokens
1 … t that the previous steps already computed: a :class:`KVCache` per layer stores them,
each step appends the new token's and attends to all of them, and the model reads one
token per step instead of the whole text again.

The price is memory: per layer, a key and a value vector per key/value head and token,

    bytes = 2 · n_layers · n_kv_heads · head_dim · seq_len · batch · bytes_per_value

(:func:`kv_cache_bytes`), which grouped-query attention shrinks by
n_heads / n_kv_heads. Pope et al. (2023), "Efficiently Scaling Transformer Inference",
section 3.

The cache is a *static* buffer with a length pointer, like Hugging Face's
``StaticCache``: it allocates room for ``max_len`` positions once and writes each new
token into the next free row, so a decoding step copies one token's keys and values,
not the whole cache (growing it with ``torch.cat`` would copy all of it at every
step). Given no ``max_len``, the buffer doubles whenever it is full, as a Python list
does, so the copies still add up to a few times the final size. ``keys`` and
``values`` are views of the filled rows, whose ``nbytes`` is the formula's;
``capacity_nbytes`` is what the buffers hold. :meth:`KVCache.reset` keeps the buffers
for the next text, as a serving loop reuses one cache for request after request.
:func:`decode_step_times` and :func:`cached_step_seconds` time decoding steps;
:func:`speed_benchmark_summary` reads back ``benchmarks/kv_cache_speed.py``'s result,
and :func:`weights_rate_reading` says what a step's rate of reading its weights means.

An encoder–decoder's decoder (chapter 07) keeps two caches per layer
(:class:`DecoderCache`): its self-attention's, which grows by a token per step like a
GPT's, and its cross-attention's, the keys and values of the encoder's output, which
the first step computes and every later step reads (the source does not change).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import torch
from torch import Tensor

__all__ = [
    "KVCache",
    "DecoderCache",
    "new_cache",
    "new_decoder_cache",
    "filled_cache",
    "cache_nbytes",
    "kv_cache_bytes",
    "decode_step_times",
    "cached_step_seconds",
    "SpeedSummary",
    "speed_benchmark_summary",
    "weights_rate_reading",
]


class KVCache:
    """The keys and values one attention layer has computed so far.

    :meth:`update` writes the new tokens' keys and values after the cached ones and
    returns all of them. ``max_len``: the most positions the cache will hold (a
    model's context window); the buffers are allocated at the first update, with room
    for ``max_len`` positions, and an update past it raises. ``None``: room for the
    first update's positions, doubled whenever full. :meth:`reset` starts a new text
    in the same buffers.
    Shapes: keys and values (B, Hkv, seq_len, Dh), views of buffers
    (B, Hkv, capacity, Dh); both ``None`` until the first update.
    """

    def __init__(self, max_len: int | None = None) -> None:
        if max_len is not None and max_len < 1:
            raise ValueError(f"max_len must be >= 1 or None, got {max_len}")
        self.max_len = max_len
        self.seq_len = 0  # positions filled: the position of the next token
        self.keys: Tensor | None = None  # (B, Hkv, seq_len, Dh), a view of _k
        self.values: Tensor | None = None
        self._k: Tensor | None = None  # (B, Hkv, capacity, Dh)
        self._v: Tensor | None = None

    def __len__(self) -> int:
        return self.seq_len

    @property
    def capacity(self) -> int:
        """Positions the buffers have room for (0 before the first update)."""
        return 0 if self._k is None else self._k.shape[-2]

    @property
    def nbytes(self) -> int:
        """Bytes of the cached keys and values (the formula with T = ``seq_len``)."""
        if self.keys is None or self.values is None:
            return 0
        return self.keys.nbytes + self.values.nbytes

    @property
    def capacity_nbytes(self) -> int:
        """Bytes the buffers hold (the formula with T = ``capacity``)."""
        if self._k is None or self._v is None:
            return 0
        return self._k.nbytes + self._v.nbytes

    def _allocate(self, k: Tensor, end: int) -> None:
        """Buffers with room for ``end`` positions or more, the filled rows copied."""
        B, Hkv, _, Dh = k.shape
        if self.max_len is not None:
            capacity = self.max_len
        else:  # double: the copies stay a few times the final size in all
            capacity = max(end, 2 * self.capacity)
        shape = (B, Hkv, capacity, Dh)
        new_k = k.new_empty(shape)  # (B, Hkv, capacity, Dh), rows >= seq_len unused
        new_v = k.new_empty(shape)
        if self._k is not None and self._v is not None:
            new_k[:, :, : self.seq_len] = self._k[:, :, : self.seq_len]
            new_v[:, :, : self.seq_len] = self._v[:, :, : self.seq_len]
        self._k, self._v = new_k, new_v

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Write ``k`` and ``v`` (B, Hkv, T_new, Dh) after the cached positions and
        return all keys and values (B, Hkv, seq_len + T_new, Dh)."""
        if k.shape != v.shape or k.dim() != 4:
            raise ValueError(
                "k and v must have the same shape (B, Hkv, T_new, Dh), got "
                f"k {tuple(k.shape)}, v {tuple(v.shape)}"
            )
        start, end = self.seq_len, self.seq_len + k.shape[2]
        buf = self._k
        if buf is not None and (
            (k.shape[0], k.shape[1], k.shape[3], k.dtype, k.device)
            != (buf.shape[0], buf.shape[1], buf.shape[3], buf.dtype, buf.device)
        ):
            if start > 0:
                raise ValueError(
                    f"new keys {tuple(k.shape)} {k.dtype} do not match the cached ones "
                    f"{(buf.shape[0], buf.shape[1], start, buf.shape[3])} {buf.dtype} "
                    "in batch, heads, head_dim (B, Hkv, T, Dh), dtype or device"
                )
            self._k = self._v = buf = None  # a new text of another shape: new buffers
        if buf is None:
            if self.max_len is not None and end > self.max_len:
                raise ValueError(
                    f"{end} positions do not fit a cache of max_len={self.max_len}"
                )
            self._allocate(k, end)
        elif end > buf.shape[2]:
            if self.max_len is not None:
                raise ValueError(
                    f"{end} positions do not fit a cache of max_len={self.max_len} "
                    f"({start} cached, {k.shape[2]} new); reset it or start a new one"
                )
            self._allocate(k, end)
        self._k[:, :, start:end] = k  # rows start … end - 1
        self._v[:, :, start:end] = v
        self.seq_len = end
        self.keys = self._k[:, :, :end]  # (B, Hkv, seq_len, Dh), a view: no copy
        self.values = self._v[:, :, :end]
        return self.keys, self.values

    def reset(self) -> None:
        """Forget the cached positions (start a new text). The buffers stay: the next
        text is written into them without allocating again, unless its batch, heads,
        head_dim, dtype or device differ (then new buffers replace them)."""
        self.seq_len = 0
        self.keys = self.values = None

    def __repr__(self) -> str:
        shape = None if self.keys is None else tuple(self.keys.shape)
        return (
            f"KVCache(seq_len={self.seq_len}, capacity={self.capacity}, keys={shape}, "
            f"nbytes={self.nbytes})"
        )


@dataclass
class DecoderCache:
    """One encoder–decoder decoder layer's two caches.

    ``self_attn`` grows by the new tokens at every step; ``cross_attn`` holds the keys
    and values of the encoder's output, filled by the first step and only read after
    (reset both for a new source). Shapes: as :class:`KVCache`; ``cross_attn`` holds
    (B, Hkv, S, Dh) for a source of S positions.
    """

    self_attn: KVCache = field(default_factory=KVCache)
    cross_attn: KVCache = field(default_factory=KVCache)

    @property
    def seq_len(self) -> int:
        """Number of target positions cached (the position of the next token)."""
        return self.self_attn.seq_len

    @property
    def nbytes(self) -> int:
        """Bytes held by both caches' key and value tensors."""
        return self.self_attn.nbytes + self.cross_attn.nbytes

    def reset(self) -> None:
        """Forget the target and the source."""
        self.self_attn.reset()
        self.cross_attn.reset()


def new_cache(n_layers: int, max_len: int | None = None) -> list[KVCache]:
    """One empty :class:`KVCache` per layer of a model, each with room for ``max_len``
    positions (None: growing as needed)."""
    if n_layers < 1:
        raise ValueError(f"n_layers must be >= 1, got {n_layers}")
    return [KVCache(max_len) for _ in range(n_layers)]


def new_decoder_cache(n_layers: int) -> list[DecoderCache]:
    """One empty :class:`DecoderCache` per layer of an encoder–decoder's decoder."""
    if n_layers < 1:
        raise ValueError(f"n_layers must be >= 1, got {n_layers}")
    return [DecoderCache() for _ in range(n_layers)]


def filled_cache(model, ids: Tensor, max_len: int | None = None) -> list[KVCache]:
    """A new cache (:func:`new_cache`, room for ``max_len`` positions) for every layer
    of a :class:`transformer_book.gpt.GPT`, filled by reading ``ids`` (B, T) once.
    Each layer's keys and values: (B, n_kv_heads, T, head_dim)."""
    if ids.dim() != 2:
        raise ValueError(f"ids must be (B, T) token ids, got shape {tuple(ids.shape)}")
    cache = new_cache(model.config.n_layers, max_len)
    with torch.no_grad():
        model(ids, cache=cache)
    return cache


def cache_nbytes(cache: Sequence[KVCache | DecoderCache]) -> int:
    """Bytes held by the key and value tensors of every layer's cache."""
    return sum(layer.nbytes for layer in cache)


def kv_cache_bytes(
    n_layers: int,
    n_kv_heads: int,
    head_dim: int,
    seq_len: int,
    batch: int = 1,
    bytes_per_value: int = 2,
) -> int:
    """Size of a full KV cache: ``2 · n_layers · n_kv_heads · head_dim · seq_len · batch
    · bytes_per_value`` (the 2: one key and one value per head and token).

    ``bytes_per_value``: 2 for fp16/bf16, 4 for fp32, 1 for an 8-bit cache.
    """
    sizes = dict(
        n_layers=n_layers,
        n_kv_heads=n_kv_heads,
        head_dim=head_dim,
        batch=batch,
        bytes_per_value=bytes_per_value,
    )
    for name, value in sizes.items():
        if int(value) != value or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if int(seq_len) != seq_len or seq_len < 0:
        raise ValueError(f"seq_len must be a non-negative integer, got {seq_len!r}")
    return int(2 * n_layers * n_kv_heads * head_dim * seq_len * batch * bytes_per_value)


def decode_step_times(model, n_new: int, use_cache: bool, batch: int = 1) -> Tensor:
    """Seconds of each of ``n_new`` steps of greedy decoding by a
    :class:`transformer_book.gpt.GPT` from a one-token prompt (token 0), for ``batch``
    sequences, with a cache or re-reading every token. On a CPU the clock is this
    process's CPU time; on a GPU the wall clock, after waiting for the kernels.
    Returns: (n_new,) seconds.
    """
    from . import benchmark

    device = model.lm_head.weight.device
    clock = time.process_time if device.type == "cpu" else time.perf_counter
    ids = torch.zeros(batch, 1, dtype=torch.long, device=device)
    cache = new_cache(model.config.n_layers, n_new) if use_cache else None
    times = []
    with torch.no_grad():
        for _ in range(n_new):
            benchmark.synchronize(device)
            start = clock()
            step_in = ids[:, -1:] if use_cache and ids.shape[1] > 1 else ids
            logits = model(step_in, cache=cache)
            ids = torch.cat((ids, logits[:, -1].argmax(-1, keepdim=True)), dim=1)
            benchmark.synchronize(device)
            times.append(clock() - start)
    return torch.tensor(times)


def cached_step_seconds(
    model, batch: int, n_cached: int = 128, repeats: int = 9
) -> float:
    """Median seconds of one cached decoding step of a
    :class:`transformer_book.gpt.GPT` for ``batch`` sequences, after ``n_cached``
    positions of random keys and values (B, H, n_cached, Dh) in every layer: a
    step's time does not depend on their values. Each timed call appends one position;
    the clock is :func:`transformer_book.benchmark.median_time`'s ``"auto"``.
    """
    from . import benchmark

    config = model.config
    device = model.lm_head.weight.device
    cache = new_cache(config.n_layers, max_len=2 * n_cached)  # room for the calls
    shape = (2, batch, config.n_heads, n_cached, config.d_model // config.n_heads)
    for layer in cache:
        layer.update(*torch.randn(shape, device=device).unbind(0))
    tokens = torch.zeros(batch, 1, dtype=torch.long, device=device)
    with torch.no_grad():
        step = lambda: model(tokens, cache=cache)  # noqa: E731 - +1 position per call
        return benchmark.median_time(step, repeats=repeats, device=device, clock="auto")


class SpeedSummary(NamedTuple):
    """:func:`speed_benchmark_summary`'s numbers by name, their formats, their text."""

    values: dict[str, float]
    formats: dict[str, str]
    text: str


def speed_benchmark_summary(result: dict) -> SpeedSummary:
    """The numbers chapter 09 quotes of ``benchmarks/kv_cache_speed.py``'s result (as
    ``benchmark.committed_result`` reads it): medians over the rounds (wall clock) of
    the cache's speed-up (``bench_*``, with its range), the reference decoder's
    (``ref_*``), the floor (``floor_s``), uncached / floor (``ceiling``), cached / floor
    (``over_floor``, and its inverse ``floor_share``), the bare decoder's seconds and
    speed-up (``bare_s``, ``bare_speedup``) and the share of the cached run it does not
    need (``structure_share``), the load before; from the step-by-step pass, the last
    uncached step in ms and the sum of the cached ones."""
    needed = (
        "seconds", "speedup", "rounds", "step_seconds", "reference", "floor", "bare"
    )  # fmt: skip
    missing = [k for k in (*needed, "load_average") if k not in result]
    if missing:
        raise ValueError(f"result lacks {missing}: not a kv_cache_speed.py result")
    secs, up = result["seconds"], result["speedup"]["wall"]
    ref, floor, bare = result["reference"], result["floor"], result["bare"]
    ref_up = ref["speedup"]
    # (n_new,) per mode, in ms: the float32 arithmetic the chapter's plot reads
    steps_ms = {m: 1e3 * torch.tensor(result["step_seconds"][m]) for m in secs}
    values = {
        "bench_speedup": up["median"],
        "bench_min": up["min"],
        "bench_max": up["max"],
        "bench_load": result["load_average"]["before"][0],
        "last_plain_ms": steps_ms["uncached"][-1].item(),
        "all_cached_s": steps_ms["cached"].sum().item() / 1e3,
        "ref_speedup": ref_up["median"],
        "ref_cached": ref["seconds"]["cached"]["wall"]["median"],
        "bench_cached": secs["cached"]["wall"]["median"],
        "floor_s": floor["seconds"]["wall"]["median"],
        "ceiling": floor["ceiling"]["median"],
        "over_floor": floor["cached_over_floor"]["median"],
        "floor_share": 1 / floor["cached_over_floor"]["median"],
        "bare_s": bare["seconds"]["wall"]["median"],
        "bare_speedup": bare["speedup"]["median"],
        "structure_share": bare["structure_share"]["median"],
    }
    seconds = ("all_cached_s", "ref_cached", "bench_cached", "floor_s", "bare_s")
    formats = dict.fromkeys(values, "{:.1f}") | dict.fromkeys(seconds, "{:.2f}")
    formats.update(last_plain_ms="{:.0f}", floor_share="{:.0%}")
    formats.update(structure_share="{:.0%}")
    lines = []
    for mode in ("cached", "uncached"):
        s = secs[mode]["wall"]
        lines.append(
            f"{mode:>8}: {s['median']:5.2f} s (min {s['min']:.2f}, max {s['max']:.2f})"
        )
    rounds = len(result["rounds"]["speedup"]["wall"])
    load = result["load_average"]
    ref_s = {m: ref["seconds"][m]["wall"]["median"] for m in ("cached", "uncached")}
    lines += [
        f"speed-up over {rounds} rounds: median {up['median']:.1f}x "
        f"(min {up['min']:.1f}x, max {up['max']:.1f}x)",
        f"load average {load['before'][0]:.1f} before, {load['after'][0]:.1f} after",
        f"reference decoder (transformers {ref['transformers']} GPT-2, same shape): "
        f"cached {ref_s['cached']:.2f} s, uncached {ref_s['uncached']:.2f} s",
        f"its speed-up: median {ref_up['median']:.1f}x "
        f"(min {ref_up['min']:.1f}x, max {ref_up['max']:.1f}x)",
        f"the floor: {values['floor_s']:.2f} s for the same tokens; uncached / floor "
        f"{values['ceiling']:.1f}x, cached / floor {values['over_floor']:.2f}x",
        f"the same operations bare (no modules, checks or cache object): "
        f"{values['bare_s']:.2f} s, speed-up {values['bare_speedup']:.1f}x; the "
        f"package's structure is {values['structure_share']:.0%} of the cached run",
    ]
    return SpeedSummary(values, formats, "\n".join(lines))


def weights_rate_reading(step_rate: float, read_rate: float) -> str:
    """What a decoding step's rate of reading its weights (``step_rate``, GB/s) says
    against one pass over a large tensor (``read_rate``): faster, they came from a
    cache; else the share of the step they fill at that rate, most (> 80 %) or part."""
    for name, rate in (("step_rate", step_rate), ("read_rate", read_rate)):
        if not rate > 0:
            raise ValueError(f"{name} must be a positive rate in GB/s, got {rate}")
    share = step_rate / read_rate  # of the step: its weights read at the pass's rate
    if share > 1:
        return (
            "the step read its weights faster than that pass, so they came from a cache"
        )
    waits = (
        "most of what this small model's step waits on"
        if share > 0.8
        else "part of what this small model's step waits on, the per-operation costs "
        "of section 5 the rest"
    )
    fill = f"reading the weights at that pass's rate would fill {share:.0%} of the step"
    return f"{fill}, so bytes are {waits}"
