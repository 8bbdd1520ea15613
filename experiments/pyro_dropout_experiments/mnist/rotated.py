"""``pyro-dropout mnist rotated``: paper 000 Fig. 4. A LeNet with dropout before its last layer,
trained on MNIST, sees a test digit 1 rotated step by step; T stochastic passes give the scatter
of the softmax input and output per class, and the variation ratio per rotation. Writes
``results.json`` and ``rotated.png`` to ``out``."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from pyro_dropout.export import plot_softmax_scatter, pyplot
from pyro_dropout.metrics import mutual_information, predictive_entropy, variation_ratio
from pyro_dropout.prediction import predict

from ..core import open_results, save_figure, save_results
from .data import load_splits
from .settings import MnistSettings
from .training import train_lenet

__all__ = ["rotate", "run_rotated"]


def rotate(image: torch.Tensor, degrees: list[float]) -> torch.Tensor:
    """``image`` ``[1, H, W]`` rotated anticlockwise by each angle: ``[len(degrees), 1, H, W]``."""
    angles = torch.tensor([math.radians(d) for d in degrees], dtype=image.dtype)
    cos, sin = angles.cos(), angles.sin()
    zeros = torch.zeros_like(cos)
    theta = torch.stack([torch.stack([cos, -sin, zeros], -1), torch.stack([sin, cos, zeros], -1)], 1)
    images = image.expand(len(degrees), *image.shape)
    grid = F.affine_grid(theta, list(images.shape), align_corners=False)
    return F.grid_sample(images, grid, align_corners=False)


def _figure(logits: torch.Tensor, images: torch.Tensor, degrees: list[float], path: Path) -> None:
    fig = plot_softmax_scatter(logits, top_k=3, input_labels=[f"{d:.0f}°" for d in degrees])
    strip = fig.add_axes((0.06, 0.9, 0.88, 0.09))
    strip.imshow(torch.cat(list(images[:, 0]), dim=1).cpu().numpy(), cmap="gray_r")
    strip.axis("off")
    fig.subplots_adjust(top=0.82)
    save_figure(fig, path, dpi=110)
    pyplot().close(fig)


def run_rotated(
    settings: MnistSettings,
    out: str | Path,
    *,
    steps: int = 12,
    step_degrees: float = 15.0,
    data_dir: str | Path | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    out = Path(out)
    open_results(out, vars(settings))  # another run's results are refused before any work
    splits = load_splits(
        data_dir, validation=settings.validation, train_size=settings.train_size, seed=settings.seed
    )
    x_test, y_test = splits.test
    ones = (y_test == 1).nonzero()
    if len(ones) == 0:
        raise ValueError(
            f"the MNIST test images {'in ' + str(data_dir) + ' ' if data_dir else ''}hold no digit 1 "
            f"to rotate (their labels: {sorted(set(y_test.tolist()))})"
        )
    one = x_test[int(ones[0])]
    out.mkdir(parents=True, exist_ok=True)  # once the data is there: a bad folder leaves nothing
    model, guide = train_lenet(splits.train, settings, progress=progress, desc="LeNet, MC dropout")
    degrees = [i * step_degrees for i in range(steps)]
    images = rotate(one, degrees)
    pred = predict(model, guide, images, num_samples=settings.num_samples)
    logits, probs = pred.samples["logits"], pred.probs["obs"]
    results = {
        "degrees": degrees,
        "mean_softmax": probs.mean(0).tolist(),
        "variation_ratio": variation_ratio(probs).tolist(),
        "predictive_entropy": predictive_entropy(probs).tolist(),
        "mutual_information": mutual_information(probs).tolist(),
        "settings": vars(settings),
    }
    save_results(out, results)
    _figure(logits, images, degrees, out / "rotated.png")
    return results
