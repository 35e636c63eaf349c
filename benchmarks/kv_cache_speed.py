"""Greedy decoding with and without the KV cache, side by side (chapter 09).

    python benchmarks/kv_cache_speed.py [--threads 2] [--repeats 7] [--new-tokens 256]
        [--out benchmarks/results/kv_cache_speed.json]

The model is ``gpt.GPT`` in nanoGPT's character-level shape (6 layers, 6 heads,
d_model 384, 65 characters, learned positions) with random weights: the time of a step
does not depend on what the weights are. Each run writes ``--new-tokens`` tokens
greedily (``generate(..., temperature=0)``) after a prompt of ``--prompt`` tokens,
with the cache and without it; the two runs take turns, the order alternating from
round to round, in the same process and with the same threads, so a busy machine
slows both alike. Every round gives one ratio (uncached / cached seconds of that
round's pair), reported as min / median / max with the load average before and after.
Both runs must write the same tokens. A second, shorter pass times every decoding step
of one run per mode (``--step-repeats`` times, interleaved, median per step): the
curves chapter 09 draws.

A third pair of runs takes its turn in every round: a reference decoder, Hugging Face
``transformers``' ``GPT2LMHeadModel`` built in the same shape (random weights, exact
GELU, dropout off) and decoding greedily through its own ``generate`` with its cache
and without; its ratio, in the same rounds on the same machine, says whether the book's
cache is slow or fast for what a step of this shape costs here. (``transformers`` is a
test dependency of the book; without it the script skips this pair.)

Another run in every round, the bare decoder, writes the same tokens with the cached
run's operations alone, called as plain functions on the model's tensors (no module
calls, argument checks or cache object): what the cached run takes beyond it is what
the package's structure costs in Python, per token.

One more cached run in every round keeps oneDNN for the one-token steps
(``model.one_token_native_kernels = False``), which ``generate`` otherwise runs with
torch's own CPU kernels (``runtime.native_cpu_kernels``). Its ``saving`` is
1 - cached / oneDNN kept: the share of that run's time the choice saves (``onednn``);
its extra time per one-token GELU call stands beside one such call timed alone, warm
and after one layer's weight bytes were read (``gelu_call_us``).

A last run in every round measures the floor under any cached run on this machine:
``--new-tokens`` passes over every ``nn.Linear`` weight of the model, one row by each,
and nothing else: the weights read once per token, which a
cached step cannot avoid. Its ratios give the ceiling of the cache's speed-up here
(uncached seconds over the floor's, round by round) and how far the cached run sits
above the floor. The result is written as JSON with the machine, the torch version
and the date; chapter 09 shows it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))  # the book's package, also when not installed

from transformer_book import (  # noqa: E402
    benchmark,
    decoding_speed,
    gpt,
    kv_cache,
    runtime,
)

DEFAULT_OUT = ROOT / "benchmarks" / "results" / "kv_cache_speed.json"
# nanoGPT's character-level Shakespeare model (its GPU configuration), random weights
CONFIG = dict(vocab_size=65, max_len=512, d_model=384, n_layers=6, n_heads=6)
MODES = ("cached", "uncached")


def build_model(device: torch.device) -> gpt.GPT:
    torch.manual_seed(0)
    return gpt.GPT(gpt.GPTConfig(**CONFIG)).to(device).eval()


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed_generate(
    model, prompt, n_new, use_cache
) -> tuple[float, float, torch.Tensor]:
    """Wall and CPU seconds of one greedy ``generate`` run, and its tokens."""
    _sync(prompt.device)
    w0, c0 = time.perf_counter(), time.process_time()
    out = model.generate(prompt, n_new, temperature=0, use_cache=use_cache)
    _sync(prompt.device)
    return time.perf_counter() - w0, time.process_time() - c0, out


@torch.no_grad()
def step_seconds(model, prompt, n_new, use_cache) -> list[float]:
    """Wall seconds of every step of greedy decoding (step 0 reads the prompt), run as
    ``generate`` runs them: in inference mode."""
    cache = kv_cache.new_cache(model.config.n_layers, prompt.shape[1] + n_new)
    ids, times = prompt, []
    with torch.inference_mode():
        for _ in range(n_new):
            _sync(prompt.device)
            start = time.perf_counter()
            if use_cache:
                step_in = ids if cache[0].seq_len == 0 else ids[:, -1:]
                logits = model(step_in, cache=cache)
            else:
                logits = model(ids)
            ids = torch.cat((ids, logits[:, -1].argmax(-1, keepdim=True)), dim=1)
            _sync(prompt.device)
            times.append(time.perf_counter() - start)
    return times


@torch.no_grad()
def timed_weights_once(model, n_new) -> tuple[float, float, None]:
    """Wall and CPU seconds of ``n_new`` passes over every ``nn.Linear`` of ``model``,
    one row by each weight: a cached run's floor."""
    weights = [m.weight for m in model.modules() if isinstance(m, torch.nn.Linear)]
    rows = {w.shape[1]: torch.randn(1, w.shape[1], device=w.device) for w in weights}
    _sync(weights[0].device)
    w0, c0 = time.perf_counter(), time.process_time()
    for _ in range(n_new):
        for w in weights:
            F.linear(rows[w.shape[1]], w)  # (1, in) -> (1, out)
    _sync(weights[0].device)
    return time.perf_counter() - w0, time.process_time() - c0, None


def timed_onednn_kept(model, prompt, n_new) -> tuple[float, float, torch.Tensor]:
    """``timed_generate`` with the cache, oneDNN kept for the one-token steps."""
    before = model.one_token_native_kernels
    model.one_token_native_kernels = False
    try:
        return timed_generate(model, prompt, n_new, True)
    finally:
        model.one_token_native_kernels = before


def gelu_call_us(model: gpt.GPT) -> dict:
    """Microseconds of one call of one token's GELU (1, 1, d_ff) with oneDNN and
    with torch's kernel (``decoding_speed.onednn_call_seconds``, the median call):
    warm, and cold, after reading one layer's weight bytes before every call, as a
    decoding step streams them between two GELU calls."""
    c = model.config
    h = torch.randn(1, 1, c.ff_width)  # (1, 1, d_ff): one token's hidden layer
    layer = model.blocks.layers[0]
    layer_bytes = sum(
        m.weight.nbytes for m in layer.modules() if isinstance(m, torch.nn.Linear)
    )
    result = {"sweep_bytes": layer_bytes}
    for case, sweep in (("warm", 0), ("cold", layer_bytes)):
        seconds = decoding_speed.onednn_call_seconds(
            lambda: F.gelu(h), calls=300, sweep_bytes=sweep
        )
        result[case] = {kernel: 1e6 * s for kernel, s in seconds.items()}
    return result


def bare_weights(model: gpt.GPT) -> list[tuple]:
    """Each block's tensors for :func:`timed_bare`, read from ``model``: its two
    norms' (weight, bias, eps), the stacked query/key/value weight and bias
    (``qkv_proj``), and the output, up and down projections' (weight, bias)."""
    c = model.config
    plain = ("learned", "layer", "gelu", c.n_heads, True)
    if (c.positions, c.norm, c.activation, c.kv_heads, c.bias) != plain:
        raise SystemExit("the bare decoder covers the benchmark's configuration only")
    layers = []
    for block in model.blocks.layers:
        a, ff = block.attn, block.ff
        qkv = (a.qkv_proj.weight, a.qkv_proj.bias)  # (3D, D), (3D,): q, k, v rows
        layers.append((
            (block.norm1.weight, block.norm1.bias, block.norm1.eps), qkv,
            (a.o_proj.weight, a.o_proj.bias),
            (block.norm2.weight, block.norm2.bias, block.norm2.eps),
            (ff.up_proj.weight, ff.up_proj.bias), (ff.down_proj.weight, ff.down_proj.bias),
        ))  # fmt: skip
    return layers


@torch.inference_mode()
def timed_bare(model, prompt, n_new) -> tuple[float, float, torch.Tensor]:
    """Wall and CPU seconds of the cached greedy run with the model's operations and
    nothing else: the same products, norms, attention kernel and cache writes as
    ``generate`` (and its kernels: torch's own, not oneDNN's, for one token), called
    as plain functions on its tensors, with no module, no check
    and no cache object. What the cached run takes beyond this is the package's
    structure (module calls, argument checks, the cache's bookkeeping) in Python. One
    difference in work, not in structure: on the prompt, ``generate`` runs the final
    norm and the output layer at every position, this decoder at the last one only
    (16 rows against 1, once per run). Its tensors are gathered inside the timed
    region.
    Shapes: prompt (1, T0) -> tokens (1, T0 + n_new)."""
    c = model.config
    D, H, T0 = c.d_model, c.n_heads, prompt.shape[1]
    Dh = D // H
    wte, wpe = model.tok_emb.weight, model.pos_emb.embedding.weight
    final = model.blocks.final_norm
    _sync(prompt.device)
    w0, c0 = time.perf_counter(), time.process_time()
    layers = bare_weights(model)  # the model's own tensors, no copy
    out = prompt.new_empty(1, T0 + n_new)
    out[:, :T0] = prompt
    keys = [wte.new_empty(1, H, T0 + n_new, Dh) for _ in layers]  # (1, H, room, Dh)
    values = [wte.new_empty(1, H, T0 + n_new, Dh) for _ in layers]
    # each step reads positions start … T - 1 and writes token T: the prompt first
    steps = [(0, T0)] + [(t, t + 1) for t in range(T0, T0 + n_new - 1)]
    for start, T in steps:
        n = T - start
        x = (wte[out[0, start:T]] + wpe[start:T]).unsqueeze(0)  # (1, n, D)
        # generate's kernels: torch's own, not oneDNN's, for one token on the CPU
        with runtime.native_cpu_kernels(n == 1 and x.device.type == "cpu"):
            for i, (n1, (w, b), o, n2, up, down) in enumerate(layers):
                h = F.layer_norm(x, (D,), *n1[:2], n1[2])
                qkv = F.linear(h, w, b).view(1, n, 3 * H, Dh)  # (1, n, 3H, Dh)
                qkv = qkv.transpose(1, 2)  # (1, 3H, n, Dh)
                q, k, v = qkv.split(H, dim=1)  # (1, H, n, Dh) each
                keys[i][:, :, start:T] = k
                values[i][:, :, start:T] = v
                a = F.scaled_dot_product_attention(
                    q, keys[i][:, :, :T], values[i][:, :, :T], is_causal=start == 0
                )  # (1, H, n, Dh): the prompt causal, a single new token sees all
                x = x + F.linear(a.transpose(1, 2).reshape(1, n, D), *o)  # (1, n, D)
                h = F.layer_norm(x, (D,), *n2[:2], n2[2])
                x = x + F.linear(F.gelu(F.linear(h, *up)), *down)
        x = F.layer_norm(x[:, -1], (D,), final.weight, final.bias, final.eps)  # (1, D)
        out[0, T] = F.linear(x, model.lm_head.weight).argmax(-1)[0]
    _sync(prompt.device)
    return time.perf_counter() - w0, time.process_time() - c0, out.clone()


def build_reference(device: torch.device):
    """Hugging Face's GPT-2 in the benchmark's shape (random weights, no download), or
    None without ``transformers``."""
    try:
        import transformers
    except ImportError:
        return None
    transformers.logging.set_verbosity_error()
    config = transformers.GPT2Config(
        vocab_size=CONFIG["vocab_size"],
        n_positions=CONFIG["max_len"],
        n_embd=CONFIG["d_model"],
        n_layer=CONFIG["n_layers"],
        n_head=CONFIG["n_heads"],
        activation_function="gelu",  # exact GELU, as gpt.GPT's default
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=0,
        eos_token_id=None,
        pad_token_id=0,
    )
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(config).to(device).eval()


def timed_reference(
    model, prompt, n_new, use_cache
) -> tuple[float, float, torch.Tensor]:
    """Wall and CPU seconds of the reference's own greedy ``generate``, and its tokens."""
    _sync(prompt.device)
    w0, c0 = time.perf_counter(), time.process_time()
    out = model.generate(
        prompt,
        attention_mask=torch.ones_like(prompt),
        max_new_tokens=n_new,
        min_new_tokens=n_new,
        do_sample=False,
        use_cache=use_cache,
    )
    _sync(prompt.device)
    return time.perf_counter() - w0, time.process_time() - c0, out


def spread(values: list[float]) -> dict:
    return {
        "min": min(values),
        "median": statistics.median(values),
        "max": max(values),
    }


def beside_cached(what: str, runs: dict, rounds: dict) -> dict:
    """A run taken in every round beside the cached one, which wrote the same tokens:
    what it is, its seconds per clock and each per-round measure in ``rounds`` as
    min / median / max, then the rounds and the runs themselves."""
    return {
        "what": what,
        "same_tokens": True,
        "seconds": {clock: spread(v) for clock, v in runs.items()},
        **{measure: spread(v) for measure, v in rounds.items()},
        "rounds": rounds,
        "runs": runs,
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--repeats", type=int, default=7, help="rounds of both runs")
    parser.add_argument("--prompt", type=int, default=16, help="prompt tokens")
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--step-repeats", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    parser.add_argument(
        "--note", default="", help="stored as is, e.g. the machine's load"
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    model = build_model(device)
    gen = torch.Generator().manual_seed(1)
    prompt = torch.randint(CONFIG["vocab_size"], (1, args.prompt), generator=gen)
    prompt = prompt.to(device)
    load_before = os.getloadavg()

    # warm-up, and the check that both write the same tokens
    outs = {m: timed_generate(model, prompt, 8, m == "cached")[2] for m in MODES}
    reference = build_reference(device)
    refs = () if reference is None else ("ref_cached", "ref_uncached")
    for mode in refs:
        outs[mode] = timed_reference(reference, prompt, 8, mode == "ref_cached")[2]
    outs["bare"] = timed_bare(model, prompt, 8)[2]
    outs["onednn"] = timed_onednn_kept(model, prompt, 8)[2]
    # the bare decoder beside the cached run, whose time its share is read against
    every = ("cached", "bare", "uncached", *refs, "onednn", "floor")
    runs = {m: {"wall": [], "cpu": []} for m in every}
    for r in range(args.repeats):
        for mode in every if r % 2 == 0 else every[::-1]:
            if mode == "floor":
                wall, cpu, _ = timed_weights_once(model, args.new_tokens)
            elif mode == "bare":
                wall, cpu, out = timed_bare(model, prompt, args.new_tokens)
            elif mode == "onednn":  # the cached run, oneDNN kept for one token
                wall, cpu, out = timed_onednn_kept(model, prompt, args.new_tokens)
            elif mode in refs:
                wall, cpu, out = timed_reference(
                    reference, prompt, args.new_tokens, mode == "ref_cached"
                )
            else:
                wall, cpu, out = timed_generate(
                    model, prompt, args.new_tokens, mode == "cached"
                )
            runs[mode]["wall"].append(wall)
            runs[mode]["cpu"].append(cpu)
            if mode != "floor":
                outs[mode] = out
    same_tokens = torch.equal(outs["cached"], outs["uncached"])
    if not same_tokens:
        raise SystemExit("cached and uncached decoding wrote different tokens")
    if not torch.equal(outs["bare"], outs["cached"]):
        raise SystemExit("the bare decoder wrote other tokens than generate")
    if not torch.equal(outs["onednn"], outs["cached"]):
        raise SystemExit("oneDNN's kernels changed the tokens generate wrote")
    floor, bare, onednn = runs.pop("floor"), runs.pop("bare"), runs.pop("onednn")
    onednn_rounds = {
        "speedup": [u / o for u, o in zip(runs["uncached"]["wall"], onednn["wall"])],
        "saving": [1 - c / o for c, o in zip(runs["cached"]["wall"], onednn["wall"])],
    }
    bare_rounds = {
        "speedup": [u / b for u, b in zip(runs["uncached"]["wall"], bare["wall"])],
        "structure_share": [
            1 - b / c for b, c in zip(bare["wall"], runs["cached"]["wall"])
        ],
    }
    ref_runs = {mode[4:]: runs.pop(mode) for mode in refs}  # cached, uncached
    over_floor = {
        m: [t / f for t, f in zip(runs[m]["wall"], floor["wall"])] for m in MODES
    }
    ref_ratios = (
        [
            u / c
            for u, c in zip(ref_runs["uncached"]["wall"], ref_runs["cached"]["wall"])
        ]
        if refs
        else []
    )
    ratios = {
        clock: [u / c for u, c in zip(runs["uncached"][clock], runs["cached"][clock])]
        for clock in ("wall", "cpu")
    }

    steps = {m: [] for m in MODES}  # per repeat, every step's seconds
    for r in range(args.step_repeats):
        for mode in MODES if r % 2 == 0 else MODES[::-1]:
            steps[mode].append(
                step_seconds(model, prompt, args.new_tokens, mode == "cached")
            )
    step_median = {
        m: [statistics.median(s) for s in zip(*per_repeat)]
        for m, per_repeat in steps.items()
    }
    # one GELU per layer in every one-token step (the first step reads the prompt)
    one_token_calls = CONFIG["n_layers"] * (args.new_tokens - 1)
    cached_wall = runs["cached"]["wall"]
    gelu_calls = gelu_call_us(model)
    load_after = os.getloadavg()

    result = {
        "benchmark": "greedy decoding, gpt.GPT with and without the KV cache",
        "config": CONFIG,
        "prompt_tokens": args.prompt,
        "new_tokens": args.new_tokens,
        "parameters": sum(p.numel() for p in model.parameters()),
        "same_tokens": same_tokens,
        "seconds": {
            m: {clock: spread(v) for clock, v in runs[m].items()} for m in MODES
        },
        "speedup": {clock: spread(v) for clock, v in ratios.items()},
        "rounds": {"runs": runs, "speedup": ratios},
        "step_seconds": step_median,
        "reference": None
        if reference is None
        else {
            "what": "Hugging Face transformers' GPT2LMHeadModel in the same shape "
            "(exact GELU), its own greedy generate with and without its cache, in "
            "the same rounds",
            "transformers": sys.modules["transformers"].__version__,
            "parameters": sum(p.numel() for p in reference.parameters()),
            "same_tokens": torch.equal(outs["ref_cached"], outs["ref_uncached"]),
            "seconds": {
                m: {clock: spread(v) for clock, v in ref_runs[m].items()} for m in MODES
            },
            "speedup": spread(ref_ratios),
            "runs": ref_runs,
            "rounds": ref_ratios,
        },
        "bare": beside_cached(
            "the cached run's operations alone (the same products, norms, attention "
            "kernel and cache writes, as plain functions on the model's tensors): no "
            "module calls, argument checks or cache object",
            bare,
            bare_rounds,
        ),
        "onednn": beside_cached(
            "the cached run with oneDNN's kernels kept for the one-token steps "
            "(GPT.one_token_native_kernels = False); saving: 1 - cached / this run, "
            "the share of this run's time that torch's own kernels save",
            onednn,
            onednn_rounds,
        )
        | {
            "one_token_gelu_calls": one_token_calls,
            "extra_us_per_call": 1e6
            * (statistics.median(onednn["wall"]) - statistics.median(cached_wall))
            / one_token_calls,
            "gelu_call_us": gelu_calls,
        },
        "floor": {
            "what": "every nn.Linear weight read once per token (one row by each), "
            "new_tokens times: the least a cached run can take",
            "seconds": {clock: spread(v) for clock, v in floor.items()},
            "ceiling": spread(over_floor["uncached"]),
            "cached_over_floor": spread(over_floor["cached"]),
            "rounds": over_floor,
            "runs": floor,
        },
        "step_repeats": args.step_repeats,
        "threads": args.threads,
        "device": str(device),
        "load_average": {"before": load_before, "after": load_after},
        "note": args.note,
        "machine": benchmark.machine(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
            timespec="seconds"
        ),
        "command": "python benchmarks/kv_cache_speed.py "
        + " ".join(argv if argv is not None else sys.argv[1:]),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    s, w = result["seconds"], result["speedup"]["wall"]
    print(
        f"{args.new_tokens} tokens: cached {s['cached']['wall']['median']:.2f} s, "
        f"uncached {s['uncached']['wall']['median']:.2f} s (medians of "
        f"{args.repeats}); speed-up {w['median']:.1f}x "
        f"[{w['min']:.1f}, {w['max']:.1f}]; reference (transformers' GPT-2) "
        + (f"{statistics.median(ref_ratios):.1f}x; " if refs else "not run; ")
        + f"bare operations {statistics.median(bare_rounds['speedup']):.1f}x; "
        f"with oneDNN for one token "
        f"{statistics.median(onednn_rounds['speedup']):.1f}x; "
        f"ceiling (uncached / weights read "
        f"once per token) {statistics.median(over_floor['uncached']):.1f}x, cached "
        f"{statistics.median(over_floor['cached']):.2f}x the floor; "
        f"load {load_before[0]:.1f} -> "
        f"{load_after[0]:.1f}; written to {out}"
    )
    return result


if __name__ == "__main__":
    main()
