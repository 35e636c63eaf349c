"""Training throughput of the book's ``gpt.GPT`` next to nanoGPT's own model.

    python benchmarks/nanogpt_throughput.py [--nanogpt ../shared/reference/nanogpt]
        [--threads 2] [--repeats 22] [--steps 20] [--out benchmarks/results/...json]

Both models are built in nanoGPT's CPU configuration for Tiny Shakespeare (4 layers, 4
heads, d_model 128, context 64, batch 12, no dropout, no biases, 65 characters) and
trained with the same step: forward, cross-entropy, backward, gradient clipping, AdamW,
the optimiser as the book's ``training.train`` builds it (multi-tensor,
``foreach=True``, on every device). Both keep the query, key and value projections as
one matrix (``gpt.GPT`` since chapter 14's stacking, nanoGPT's ``c_attn``): 27 parameter
tensors each. An optimiser pays per tensor, so the script also times the step with AdamW
as a Python loop over the tensors (torch's CPU default; ``per_tensor_loop``), and it
counts the operations of one step of each kind (``torch.profiler``). The models take
turns, ``--steps`` steps at a time, ``--repeats`` times, in the same process and with
the same threads, so a busy machine slows both alike; the result is the median of each
model's tokens per second (wall clock, and per CPU second), and their ratio; and, each
round's two turns paired, the median of the rounds' ratios with its 95 % interval
(``paired``; the sign test's, which a stalled round cannot stretch): where the interval
holds 1, the rounds cannot tell the models' speeds apart. A last pass, taking turns
the same way, times the phases of the multi-tensor step apart (forward and backward,
gradient clipping, AdamW; ``phases``), to say where a difference between the models
comes from. nanoGPT's ``model.py`` is imported from the folder given
(it is not part of this project: Karpathy's nanoGPT, MIT licence).
The result is written as JSON with the machine (with the code path torch's kernels
took: ``machine.cpu_capability``), the torch version and the date; chapter 14 shows it.
The committed results are two runs on one chip: as it comes (AVX-512), and held to
another kind of CPU's instructions, AVX2:

    ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 \
        python benchmarks/nanogpt_throughput.py \
        --out benchmarks/results/nanogpt_throughput_avx2.json
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import datetime
import hashlib
import importlib.util
import io
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))  # the book's package, also when not installed

from transformer_book import benchmark, gpt, report  # noqa: E402

DEFAULT_NANOGPT = "../shared/reference/nanogpt"  # relative to the repository root
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "nanogpt_throughput.json"
# nanoGPT's README, CPU recipe for Shakespeare (bias=False as its train.py builds it)
CONFIG = dict(
    vocab_size=65, context=64, n_layers=4, n_heads=4, d_model=128, batch_size=12,
    dropout=0.0, bias=False,
)  # fmt: skip


def load_nanogpt(folder: str | Path):
    """nanoGPT's ``model`` module, imported from ``folder/model.py``."""
    path = Path(folder)
    if not path.is_absolute():
        path = (ROOT / path).resolve()
    source = path / "model.py"
    if not source.is_file():
        raise SystemExit(f"no nanoGPT model.py in {path} (give its folder: --nanogpt)")
    spec = importlib.util.spec_from_file_location("nanogpt_model", source)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, source


def build_models(nanogpt) -> dict[str, torch.nn.Module]:
    c = CONFIG
    torch.manual_seed(0)
    ours = gpt.GPT(
        gpt.GPTConfig(
            vocab_size=c["vocab_size"], max_len=c["context"], d_model=c["d_model"],
            n_layers=c["n_layers"], n_heads=c["n_heads"], dropout=c["dropout"],
            bias=c["bias"], activation="gelu", positions="learned",
        )
    )  # fmt: skip
    torch.manual_seed(0)
    with contextlib.redirect_stdout(io.StringIO()):  # it prints its parameter count
        theirs = nanogpt.GPT(
            nanogpt.GPTConfig(
                block_size=c["context"], vocab_size=c["vocab_size"],
                n_layer=c["n_layers"], n_head=c["n_heads"], n_embd=c["d_model"],
                dropout=c["dropout"], bias=c["bias"],
            )
        )  # fmt: skip
    return {"gpt.GPT": ours, "nanoGPT": theirs}


PHASES = ("forward_backward", "clip", "adamw")


def training_step(
    name: str,
    model: torch.nn.Module,
    device: torch.device,
    foreach: bool = True,
    phases: bool = False,
):
    """One AdamW step on a fixed random batch, the same for both models; ``foreach``:
    the multi-tensor AdamW (as ``training.train`` builds it), else a loop over the
    parameter tensors (torch's CPU default). With ``phases``, the step returns the
    wall seconds of each of ``PHASES``: forward, loss and backward; gradient clipping;
    the AdamW update."""
    model.to(device).train()
    opt = torch.optim.AdamW(
        model.parameters(), lr=1e-3, betas=(0.9, 0.99), foreach=foreach
    )
    gen = torch.Generator().manual_seed(1)
    shape = (CONFIG["batch_size"], CONFIG["context"])
    x = torch.randint(CONFIG["vocab_size"], shape, generator=gen).to(device)
    y = torch.randint(CONFIG["vocab_size"], shape, generator=gen).to(device)

    def step() -> tuple[float, ...] | None:
        marks = [time.perf_counter()] if phases else []
        if name == "nanoGPT":
            _, loss = model(x, y)  # its forward computes the loss from targets
        else:
            loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if phases:
            _sync(device)
            marks.append(time.perf_counter())
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        if phases:
            _sync(device)
            marks.append(time.perf_counter())
        opt.step()
        if phases:
            _sync(device)
            marks.append(time.perf_counter())
            return tuple(b - a for a, b in zip(marks, marks[1:]))
        return None

    return step


def operations(step) -> int:
    """The operations (torch.profiler's events) of one call of ``step``."""
    step()  # the optimiser's state exists from the first step on
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as p:
        step()
    return sum(event.count for event in p.key_averages())


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(steps: dict, n_steps: int, repeats: int, warmup: int, device) -> dict:
    """Tokens per wall second and per CPU second of each step function, per repeat."""
    tokens = n_steps * CONFIG["batch_size"] * CONFIG["context"]
    for step in steps.values():
        for _ in range(warmup):
            step()
    wall = {name: [] for name in steps}
    cpu = {name: [] for name in steps}
    names = list(steps)
    for r in range(repeats):
        for name in names if r % 2 == 0 else names[::-1]:  # alternate who goes first
            _sync(device)
            w0, c0 = time.perf_counter(), time.process_time()
            for _ in range(n_steps):
                steps[name]()
            _sync(device)
            wall[name].append(tokens / (time.perf_counter() - w0))
            cpu[name].append(tokens / (time.process_time() - c0))
    return {"wall": wall, "cpu": cpu}


def measure_phases(steps: dict, n_steps: int, repeats: int, warmup: int) -> dict:
    """Milliseconds of each of ``PHASES`` per step, for each model: the median over all
    ``repeats`` turns of ``n_steps`` steps (the models alternating who goes first,
    after ``warmup`` steps each), and per round, the median of that turn's steps; and
    gpt.GPT's time over nanoGPT's per phase, overall and round by round."""
    for step in steps.values():
        for _ in range(warmup):
            step()
    times = {name: {phase: [] for phase in PHASES} for name in steps}
    rounds = {name: {phase: [] for phase in PHASES} for name in steps}
    names = list(steps)
    for r in range(repeats):
        for name in names if r % 2 == 0 else names[::-1]:
            turn = [steps[name]() for _ in range(n_steps)]  # (n_steps, len(PHASES))
            for phase, seconds in zip(PHASES, zip(*turn)):
                times[name][phase] += seconds
                rounds[name][phase].append(1e3 * statistics.median(seconds))
    ms = {
        name: {phase: 1e3 * statistics.median(v) for phase, v in per.items()}
        for name, per in times.items()
    }
    ours, theirs = rounds["gpt.GPT"], rounds["nanoGPT"]
    return {
        "what": "ms per step of each phase: forward, loss and backward; gradient "
        "clipping; the AdamW update (multi-tensor); medians over all steps, and per "
        "round over that round's steps",
        "ms": ms,
        "ratio": {p: ms["gpt.GPT"][p] / ms["nanoGPT"][p] for p in PHASES},
        "rounds": {
            "ms": rounds,
            "ratio": {p: [a / b for a, b in zip(ours[p], theirs[p])] for p in PHASES},
        },
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nanogpt", default=DEFAULT_NANOGPT, help="nanoGPT's folder")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument(
        "--repeats", type=int, default=22, help="rounds, even: each model goes first "
        "in half of them",
    )  # fmt: skip
    parser.add_argument("--steps", type=int, default=20, help="steps per repeat")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    args = parser.parse_args(argv)
    if args.repeats < 6 or args.repeats % 2:
        raise SystemExit(
            f"--repeats must be even and at least 6, got {args.repeats}: the models "
            "take turns going first, each as often as the other, and a 95 % interval "
            "for the median of the rounds' ratios needs 6 rounds"
        )
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    nanogpt, source = load_nanogpt(args.nanogpt)
    models = build_models(nanogpt)
    n_params = {k: sum(p.numel() for p in m.parameters()) for k, m in models.items()}
    if len(set(n_params.values())) != 1:
        raise SystemExit(f"the two models differ in size: {n_params}")
    copies = {k: copy.deepcopy(m) for k, m in models.items()}  # for the loop
    steps = {k: training_step(k, m, device) for k, m in models.items()}
    steps.update({f"{k} loop": training_step(k, m, device, foreach=False)
                  for k, m in copies.items()})  # fmt: skip
    runs = measure(steps, args.steps, args.repeats, args.warmup, device)
    median = {
        clock: {k: statistics.median(v) for k, v in per_model.items()}
        for clock, per_model in runs.items()
    }
    ops = {k: operations(step) for k, step in steps.items()}
    phased = {k: training_step(k, m, device, phases=True) for k, m in models.items()}
    phases = measure_phases(phased, args.steps, args.repeats, args.warmup)
    loop = {
        "what": "the same step, AdamW as a Python loop over the parameter tensors "
        "(torch's CPU default)",
        "tokens_per_s": {k: median["wall"][f"{k} loop"] for k in models},
        "tokens_per_cpu_s": {k: median["cpu"][f"{k} loop"] for k in models},
        "repeats": {
            clock: {k: per[f"{k} loop"] for k in models} for clock, per in runs.items()
        },
    }
    loop["ratio"] = loop["tokens_per_s"]["gpt.GPT"] / loop["tokens_per_s"]["nanoGPT"]
    loop["ratio_cpu"] = (
        loop["tokens_per_cpu_s"]["gpt.GPT"] / loop["tokens_per_cpu_s"]["nanoGPT"]
    )
    paired = {
        clock: report.median_ratio(per["gpt.GPT"], per["nanoGPT"])
        for clock, per in runs.items()
    }  # clock -> (ratio, low, high) over the rounds, each round's two turns paired
    result = {
        "benchmark": "training tokens/s, gpt.GPT vs nanoGPT's GPT, same configuration",
        "config": CONFIG,
        "parameters": n_params["gpt.GPT"],
        "tokens_per_s": {k: median["wall"][k] for k in models},
        "tokens_per_cpu_s": {k: median["cpu"][k] for k in models},
        "ratio": median["wall"]["gpt.GPT"] / median["wall"]["nanoGPT"],
        "ratio_cpu": median["cpu"]["gpt.GPT"] / median["cpu"]["nanoGPT"],
        "repeats": {
            clock: {k: v for k, v in per.items() if k in models}
            for clock, per in runs.items()
        },
        "paired": {
            "what": "gpt.GPT's tokens/s over nanoGPT's, round by round: the median of "
            "the rounds' ratios and its 95 % interval (the sign test's)",
            **{
                clock: {"ratio": r, "low": lo, "high": hi}
                for clock, (r, lo, hi) in paired.items()
            },
        },
        "per_tensor_loop": loop,
        "phases": phases,
        "parameter_tensors": {k: len(list(m.parameters())) for k, m in models.items()},
        "operations_per_step": {
            k: {"foreach": ops[k], "loop": ops[f"{k} loop"]} for k in models
        },
        "steps_per_repeat": args.steps,
        "threads": args.threads,
        "device": str(device),
        "machine": benchmark.machine(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
            timespec="seconds"
        ),
        "nanogpt_model_sha256": hashlib.sha256(source.read_bytes()).hexdigest(),
        "command": " ".join(  # the code path's settings first, as they were set
            [f"{k}={v}" for k, v in benchmark.machine()["cpu_path_settings"].items()]
            + ["python benchmarks/nanogpt_throughput.py"]
            + (argv if argv is not None else sys.argv[1:])
        ),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(
        f"gpt.GPT {median['wall']['gpt.GPT']:,.0f} tokens/s, nanoGPT "
        f"{median['wall']['nanoGPT']:,.0f} tokens/s: ratio {result['ratio']:.3f} "
        f"(per CPU second {result['ratio_cpu']:.3f}); median of the rounds' ratios "
        f"{paired['wall'][0]:.3f}, 95 % interval {paired['wall'][1]:.3f} to "
        f"{paired['wall'][2]:.3f} over {args.repeats} rounds on "
        f"{result['machine']['cpu_capability']}; AdamW as a loop over the "
        f"tensors: ratio {loop['ratio']:.3f}; time per phase, gpt.GPT / nanoGPT: "
        + ", ".join(f"{k} {v:.3f}" for k, v in phases["ratio"].items())
        + "; operations per step "
        f"{result['operations_per_step']}; written to {out}"
    )
    return result


if __name__ == "__main__":
    main()
