"""Where and how big a notebook runs: device, profile and seeds.

Every notebook has a papermill ``parameters`` cell with ``device = "auto"`` and
``profile = "auto"``; :func:`setup` turns them into a concrete device (CUDA, else Apple's
MPS, else the CPU) and profile, seeds every random generator and gives matplotlib the
book's look (:func:`transformer_book.plotting.use_book_style`). ``"auto"`` is the
``quick`` profile on every device: it is the one every chapter has been executed with;
``full`` (bigger models, longer runs) is asked for by name.

Seeding makes a run repeat bit for bit on one machine. Another CPU, or another code
path of the same math library, rounds the last bits differently, and training turns
those bits into the third digit of a loss: across machines a chapter's results agree
to the tolerances its cells assert, not bit for bit.
"""

from __future__ import annotations

import contextlib
import os
import random
import warnings
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch

__all__ = [
    "PROFILES",
    "Run",
    "native_cpu_kernels",
    "resolve_device",
    "resolve_profile",
    "seed_everything",
    "setup",
    "thread_count",
]

PROFILES = ("quick", "full")
MPS_FALLBACK_ENV = "PYTORCH_ENABLE_MPS_FALLBACK"


def _mps_available() -> bool:
    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available())


def resolve_device(device: str = "auto") -> torch.device:
    """``"auto"`` means CUDA when available, else Apple silicon's MPS, else the CPU;
    anything else is passed to torch (and must be available)."""
    if device == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        return torch.device("mps" if _mps_available() else "cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"device={device!r} was requested but CUDA is not available; use 'auto' or 'cpu'"
        )
    if dev.type == "mps" and not _mps_available():
        raise ValueError(
            f"device={device!r} was requested but MPS is not available; use 'auto' or 'cpu'"
        )
    return dev


def resolve_profile(profile: str, device: torch.device | None = None) -> str:
    """``"auto"`` means ``quick`` on every device: the profile the edition was executed
    and checked with. ``full`` must be asked for by name (``device`` is not consulted;
    it is accepted so that callers can pass what they resolved)."""
    if profile == "auto":
        return "quick"
    if profile not in PROFILES:
        raise ValueError(
            f"profile must be 'auto' or one of {PROFILES}, got {profile!r}"
        )
    return profile


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (CPU and CUDA): a run repeats exactly on one machine."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


@dataclass(frozen=True)
class Run:
    """The resolved settings of one notebook run."""

    device: torch.device
    profile: str
    seed: int

    def pick(self, quick, full):
        """Choose a value by profile: ``run.pick(quick=200, full=5000)``."""
        return quick if self.profile == "quick" else full

    def __str__(self) -> str:
        version = torch.__version__.split("+")[0]
        return (
            f"device={self.device.type} profile={self.profile} seed={self.seed} "
            f"torch={version}"
        )


# A cap on the CPU threads any chapter or training run asks for. `make test` sets it to 1
# while it runs one notebook per core: a chapter asking for 2 threads there would share
# a core with the other notebook, and OpenMP threads that wait on each other then run
# many times slower (chapter 14's training: 20x).
MAX_THREADS_ENV = "TRANSFORMER_BOOK_MAX_THREADS"


def thread_count(wanted: int) -> int:
    """``wanted`` CPU threads (0: torch's default, all cores), capped by the environment
    variable ``TRANSFORMER_BOOK_MAX_THREADS`` when it is set; 0 stays 0 without a cap."""
    if wanted < 0:
        raise ValueError(
            f"threads must be 0 (torch's default) or positive, got {wanted}"
        )
    cap = os.environ.get(MAX_THREADS_ENV, "").strip()
    if not cap:
        return wanted
    if not cap.isdigit() or int(cap) < 1:
        raise ValueError(f"${MAX_THREADS_ENV} must be a positive integer, got {cap!r}")
    return int(cap) if wanted == 0 else min(wanted, int(cap))


@contextlib.contextmanager
def native_cpu_kernels(active: bool = True) -> Iterator[None]:
    """Inside the block, CPU operations take torch's own kernels, not oneDNN's.

    torch sends some CPU operations to the oneDNN library whenever it may, the exact
    GELU (``F.gelu``) among them. A oneDNN call has a cost that does not grow with its
    input, which a batch of tokens shares and a single token does not: on the 2-core
    Xeon of chapter 09's benchmark, one token's GELU (1,536 values) took about 8 µs
    through oneDNN and 2 µs through torch's kernel, 64 tokens' (98,304 values) 28 µs
    through oneDNN and 34 µs through torch's. So
    :meth:`transformer_book.gpt.GPT.forward` runs a step that reads a single token on
    the CPU inside this block; chapter 09 measures what it saves. The two kernels
    agree to float rounding, not to the last bit (GELU's outputs differ by about
    1e-6). The switch (``torch.backends.mkldnn.enabled``) is process-wide: another
    thread's operations during the block take torch's kernels too, and the block is
    not thread-safe (two threads inside it at once can leave oneDNN off). On leaving,
    the switch is set back to what it was, also after an error. ``active=False``: a
    block that changes nothing.
    """
    before = torch.backends.mkldnn.enabled
    if active:
        torch.backends.mkldnn.enabled = False
    try:
        yield
    finally:
        torch.backends.mkldnn.enabled = before


def setup(
    device: str = "auto",
    profile: str = "auto",
    seed: int = 0,
    cpu_threads: int | None = None,
    style: bool = True,
) -> Run:
    """Resolve the notebook parameters, seed everything and set the book's plot style.

    On MPS, operations Apple's backend lacks fall back to the CPU when
    ``PYTORCH_ENABLE_MPS_FALLBACK=1`` was set before torch was imported (importing
    ``transformer_book`` first sets it); otherwise a warning says so.

    ``cpu_threads``: on a CPU, limit torch to this many threads. Chapters that train
    tiny models pass 1: such models gain nothing from more threads, and lose a lot on a
    busy machine. ``style=False`` leaves matplotlib's settings alone.
    """
    dev = resolve_device(device)
    if dev.type == "mps" and os.environ.get(MPS_FALLBACK_ENV) != "1":
        warnings.warn(
            f"{MPS_FALLBACK_ENV}=1 was not set before torch was imported: an operation "
            "MPS lacks will raise instead of running on the CPU. Import transformer_book "
            "before torch, or set the variable before starting Python.",
            stacklevel=2,
        )
    run = Run(device=dev, profile=resolve_profile(profile, dev), seed=seed)
    if cpu_threads is not None and dev.type == "cpu":
        if cpu_threads < 1:
            raise ValueError(
                f"cpu_threads must be a positive number of threads or None, got {cpu_threads}"
            )
        torch.set_num_threads(thread_count(cpu_threads))
    seed_everything(seed)
    if style:
        from . import plotting

        plotting.use_book_style()
    return run
