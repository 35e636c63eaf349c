"""Shared machinery of the exercise checks: call the reader's function, compare, explain."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

__all__ = ["ExerciseError", "call", "expect_close", "passed"]


class ExerciseError(AssertionError):
    """Raised when an exercise answer is wrong; the message says what is wrong and what to try."""


def call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run the reader's function, turning 'not written yet' into a friendly message."""
    try:
        return fn(*args, **kwargs)
    except NotImplementedError:
        raise ExerciseError(
            f"{getattr(fn, '__name__', 'your function')} is not written yet: "
            "replace the `raise NotImplementedError` with your code."
        ) from None


def expect_close(
    got: Any,
    expected: Tensor,
    what: str,
    hint: str = "",
    atol: float = 1e-5,
    rtol: float = 1e-4,
) -> None:
    """Compare a result with the reference: type, shape, then values, each with its own message."""
    if not isinstance(got, Tensor):
        raise ExerciseError(
            f"{what}: expected a torch.Tensor, got {type(got).__name__}."
        )
    if got.shape != expected.shape:
        raise ExerciseError(
            f"{what}: shape {tuple(got.shape)}, expected {tuple(expected.shape)}. {hint}".strip()
        )
    if got.dtype == torch.bool or expected.dtype == torch.bool:
        if got.dtype != expected.dtype or not torch.equal(got, expected):
            wrong = (
                (got != expected).nonzero()[:3].tolist()
                if got.dtype == expected.dtype
                else "dtype"
            )
            raise ExerciseError(
                (
                    f"{what}: wrong entries (first few at {wrong}); "
                    f"expected dtype {expected.dtype}. {hint}"
                ).strip()
            )
        return
    got = got.to(expected.dtype)
    if not torch.allclose(got, expected, atol=atol, rtol=rtol):
        err = (got - expected).abs().max().item()
        raise ExerciseError(
            f"{what}: values differ from the reference (max abs error {err:.3g}). {hint}".strip()
        )


def passed(message: str) -> None:
    """Print the line a check shows when the answer is right."""
    print(f"Correct: {message}")
