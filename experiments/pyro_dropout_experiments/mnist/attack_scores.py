"""The two attacks of paper 003 §5.3 run on one trained network, scored as they go: accuracy,
predictive entropy and mutual information of the MC-dropout predictive on the attacked images,
and how well each score tells attacked from clean images (AUROC)."""

from __future__ import annotations

from typing import Any

import torch

from pyro_dropout.attacks import fgs
from pyro_dropout.metrics import auroc, mutual_information, predictive_entropy

from .probs import mc_probs

__all__ = ["targeted_attack", "untargeted_attack"]

_BATCH = 1000  # images per attack pass


def _scores(probs: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per image: the predicted class, the predictive entropy and the mutual information."""
    return {
        "predicted": probs.mean(0).argmax(-1),
        "entropy": predictive_entropy(probs),
        "mutual_information": mutual_information(probs),
    }


def _summary(scores: dict[str, torch.Tensor], clean: dict[str, torch.Tensor], labels: torch.Tensor) -> dict:
    return {
        "accuracy": float((scores["predicted"] == labels).double().mean()),
        "entropy": float(scores["entropy"].mean()),
        "mutual_information": float(scores["mutual_information"].mean()),
        "auroc_entropy": auroc(scores["entropy"], clean["entropy"]),
        "auroc_mutual_information": auroc(scores["mutual_information"], clean["mutual_information"]),
    }


def _append(record: dict[str, list], summary: dict[str, float]) -> None:
    for k, v in summary.items():
        record.setdefault(k, []).append(v)


def _image(x: torch.Tensor) -> list:
    """One image as 28x28 bytes (0-255), for the figures."""
    return (x.reshape(28, 28) * 255).round().clamp(0, 255).to(torch.uint8).tolist()


def _attacked(model: Any, guide: Any, x: torch.Tensor, **step: Any) -> torch.Tensor:
    """:func:`~pyro_dropout.attacks.fgs` on ``x``, ``_BATCH`` images at a time."""
    return torch.cat([fgs(model, guide, x[i : i + _BATCH], **step) for i in range(0, len(x), _BATCH)])


def untargeted_attack(
    model: Any,
    guide: Any,
    x: torch.Tensor,
    y: torch.Tensor,
    etas: tuple[float, ...],
    draws: int,
    *,
    attack_draws: int | None = None,
) -> dict[str, Any]:
    """One fast-gradient-sign step of each size in ``etas`` on every image, the gradient taken
    through the mean of ``attack_draws`` (default ``draws``) passes; scored with ``draws`` passes."""
    clean = _scores(mc_probs(model, guide, x, draws))
    record: dict[str, Any] = {"eta": list(etas), "example": []}
    for eta in etas:
        attacked = _attacked(model, guide, x, eta=eta, num_samples=attack_draws or draws)
        _append(record, _summary(_scores(mc_probs(model, guide, attacked, draws)), clean, y))
        record["example"].append(_image(attacked[0]))
    record["example_at"] = list(etas)
    return record


def targeted_attack(
    model: Any,
    guide: Any,
    x: torch.Tensor,
    y: torch.Tensor,
    target: int,
    eta: float,
    steps: int,
    draws: int,
) -> dict[str, Any]:
    """``steps`` targeted gradient-sign steps toward ``target`` on the images not of that class,
    scored after every step; ``target_accuracy``: the share classified as the target."""
    keep = y != target
    x, y = x[keep], y[keep]
    clean = _scores(mc_probs(model, guide, x, draws))
    shown = sorted({s for s in (1, 2, 5, 10, 20, 40, steps) if s <= steps})
    record: dict[str, Any] = {
        "step": list(range(1, steps + 1)),
        "example": [_image(x[0])],
        "example_at": [0, *shown],
    }
    current = x
    for step in range(1, steps + 1):
        current = _attacked(model, guide, current, eta=eta, target=target, num_samples=draws)
        scores = _scores(mc_probs(model, guide, current, draws))
        summary = _summary(scores, clean, y)
        summary["target_accuracy"] = float((scores["predicted"] == target).double().mean())
        _append(record, summary)
        if step in shown:
            record["example"].append(_image(current[0]))
    return record
