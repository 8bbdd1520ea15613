"""Input checks shared by the metrics: clear errors instead of silent NaNs."""

from __future__ import annotations

import torch

__all__ = ["as_tensor", "check_draws", "check_finite", "check_labels", "check_probs", "labels_for"]


def as_tensor(x: object, what: str) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x
    try:
        return torch.as_tensor(x)
    except (TypeError, ValueError, RuntimeError) as e:
        raise TypeError(f"{what}: expected a tensor or array, got {type(x).__name__}") from e


def check_finite(x: torch.Tensor, what: str) -> torch.Tensor:
    if x.is_floating_point() and not bool(torch.isfinite(x).all()):
        raise ValueError(f"{what} contains NaN or inf")
    return x


def check_probs(probs: object, what: str = "probs", draws: bool = True, min_draws: int = 1) -> torch.Tensor:
    """Class probabilities ``[T, N, C]`` (``draws``, at least ``min_draws`` of them: 2 where a score
    is the draws' disagreement) or ``[N, C]``: finite, in [0, 1], summing to 1."""
    p = check_finite(as_tensor(probs, what), what)
    expected = 3 if draws else 2
    if p.dim() != expected:
        layout = "[T, N, C] (draws, points, classes)" if draws else "[N, C] (points, classes)"
        raise ValueError(f"{what}: expected shape {layout}, got {tuple(p.shape)}")
    if draws and p.shape[0] < min_draws:
        why = "a score of the draws' disagreement needs two" if min_draws > 1 else "a score needs one"
        raise ValueError(f"{what}: {p.shape[0]} draws (shape {tuple(p.shape)}); {why} or more")
    if not p.is_floating_point():
        raise ValueError(f"{what}: expected probabilities (floats), got dtype {p.dtype}")
    if p.shape[-2] == 0 or p.shape[-1] == 0:
        raise ValueError(f"{what}: no points (shape {tuple(p.shape)}): a score of nothing is undefined")
    if bool((p < 0).any()) or bool((p > 1).any()):
        raise ValueError(f"{what}: probabilities must lie in [0, 1]")
    total = p.sum(-1)
    tol = 1e-4 if p.dtype != torch.float16 else 1e-2
    if not bool(torch.allclose(total, torch.ones_like(total), atol=tol)):
        worst = (total - 1).abs().max().item()
        raise ValueError(f"{what}: probabilities must sum to one over classes (off by up to {worst:.3g})")
    return p


def check_labels(
    labels: object, n: int, num_classes: int, what: str = "labels", device: torch.device | None = None
) -> torch.Tensor:
    """Integer class labels ``[N]`` in ``[0, num_classes)``, on ``device`` (the predictions'; labels
    kept on the CPU beside draws on a GPU are moved, as they are few)."""
    y = as_tensor(labels, what)
    if y.is_floating_point() or y.is_complex():
        if not bool((y == y.round()).all()):
            raise ValueError(f"{what}: expected integer class labels; this looks like a regression target")
        y = y.long()
    if y.shape != (n,):
        raise ValueError(f"{what}: expected shape ({n},) to match the predictions, got {tuple(y.shape)}")
    if bool((y < 0).any()) or bool((y >= num_classes).any()):
        raise ValueError(f"{what}: labels must lie in [0, {num_classes}), got range [{y.min()}, {y.max()}]")
    return y if device is None else y.to(device)


def labels_for(labels: object, predictions: torch.Tensor) -> torch.Tensor:
    """:func:`check_labels` against ``predictions`` ``[..., N, C]`` (probabilities or logits): one
    label per point, each a class, on the predictions' device."""
    n, num_classes = predictions.shape[-2], predictions.shape[-1]
    return check_labels(labels, n, num_classes, device=predictions.device)


def check_draws(draws: object, what: str, min_draws: int = 1) -> torch.Tensor:
    """Draws ``[T, N, ...]`` with at least ``min_draws`` draws (2 wherever a variance is taken)."""
    d = check_finite(as_tensor(draws, what), what)
    if d.dim() < 2:
        raise ValueError(f"{what}: expected draws [T, N, ...] (draws first), got shape {tuple(d.shape)}")
    if d.shape[1] == 0:
        raise ValueError(f"{what}: no points (shape {tuple(d.shape)}): a score of nothing is undefined")
    if d.shape[0] < min_draws:
        raise ValueError(f"{what}: needs at least {min_draws} draws to estimate a variance, got {d.shape[0]}")
    return d
