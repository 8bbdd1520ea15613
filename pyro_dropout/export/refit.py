"""Refitting a model on part of the data and scoring it on the rest: what K-fold
cross-validation (:func:`~pyro_dropout.export.kfold`) and exact leave-one-out for ArviZ's
``az.reloo`` (:func:`~pyro_dropout.export.reloo`) share."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from pyro.optim import PyroOptim

from ..infer import CompiledSVI, DropoutELBO
from ..ops import check_seed, is_positive_int, is_positive_number
from ..prediction.predictive import predict
from ..runtime import progress_bar

__all__ = ["Refit", "check_factory", "check_rows", "draws_log_likelihood", "fit_svi"]


def check_rows(who: str, x: Any, y: Any) -> None:
    """``x`` and ``y`` as the refitting functions take them: finite tensors with one row per point."""
    if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor) or len(x) != len(y):
        raise ValueError(f"{who}: x and y must be tensors with one row per point (the same length)")
    for name, t in (("x", x), ("y", y)):
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            raise ValueError(f"{who}: {name} holds {int((~torch.isfinite(t)).sum())} NaN or infinite values")


def fit_svi(model: Any, guide: Any, args: tuple, steps: int, loss: Any, lr: float) -> None:
    optim = PyroOptim(torch.optim.Adam, {"lr": lr})  # pyro.optim.Adam, spelt out for the type checker
    # a copy for each fit: a loss keeps what it learnt of a model (its plate depth, its checks)
    svi = CompiledSVI(model, guide, optim, copy.deepcopy(loss) if loss is not None else DropoutELBO())
    with progress_bar(None, steps, "refit") as bar:  # a terminal only; none under CI
        for _ in range(steps):
            svi.step(*args)
            bar.update()


def draws_log_likelihood(
    model: Any,
    guide: Any,
    x: torch.Tensor,
    y: torch.Tensor,
    draws: int,
    site: str | None,
    rows: tuple[int, ...],
) -> torch.Tensor:
    r"""``[T, *rows]`` (``rows`` ``[N]``, or ``[K, N]`` for runs): :math:`\log p(y_n \mid x_n,
    \omega_t)` at the likelihood site, a point's outputs summed."""
    pred = predict(model, guide, x, y, num_samples=draws)
    names = list(pred.log_likelihood)
    name = site if site is not None else (names[0] if len(names) == 1 else None)
    if name is None or name not in pred.log_likelihood:
        raise ValueError(f"choose the likelihood site with site= (the model observes {names})")
    return pred.log_likelihood[name].reshape(draws, *rows, -1).sum(-1)


def check_factory(model_factory: Any, who: str) -> None:
    """A clear error where ``model_factory`` is a model, not a function that makes one (each refit
    needs a fresh model)."""
    if isinstance(model_factory, torch.nn.Module) or not callable(model_factory):
        raise TypeError(
            f"{who}: model_factory must make a fresh model for each refit (a function, such as "
            f"lambda: MLP(...)), got a {type(model_factory).__name__} instance"
        )


@dataclass(frozen=True)
class Refit:
    """How a model is refitted on part of the data and scored on the rest (the arguments of
    :func:`~pyro_dropout.export.kfold` and :func:`~pyro_dropout.export.reloo`).

    ``train(model, guide, *args)`` runs ``fit(model, guide, *args)`` or, without ``fit``,
    ``steps`` full-batch steps of :class:`CompiledSVI` with a copy of ``loss`` (default
    :class:`DropoutELBO`) and Adam at ``lr``; ``score`` is each point's log predictive density
    under ``draws`` MC-dropout draws."""

    guide: Callable[[Any], Any]
    fit: Callable[[Any, Any, torch.Tensor, torch.Tensor], None] | None
    steps: int
    loss: Any
    lr: float
    draws: int
    site: str | None
    seed: int
    who: str = "kfold"

    def __post_init__(self) -> None:
        """Each setting checked where it enters, by name (before, ``lr=-1`` trained uphill to an
        elpd of -460,376 and ``steps=0`` scored untrained fits)."""
        check_seed(self.seed, self.who)
        if isinstance(self.guide, torch.nn.Module) or not callable(self.guide):
            raise TypeError(
                f"{self.who}: guide must make a guide for each refit's model (a class such as "
                f"DropoutGuide, or a function of the model), got a {type(self.guide).__name__} instance"
            )
        for name, value in (("steps", self.steps), ("num_samples", self.draws)):
            if not is_positive_int(value):
                raise ValueError(f"{self.who}: {name} must be a positive int, got {value!r}")
        lr = self.lr
        if not is_positive_number(lr):
            raise ValueError(f"{self.who}: lr must be a positive finite number, got {lr!r}")
        if isinstance(self.loss, type):
            raise TypeError(
                f"{self.who}: loss is the class {self.loss.__name__}; give an instance, "
                f"loss={self.loss.__name__}()"
            )
        if not callable(self.guide) or (self.fit is not None and not callable(self.fit)):
            raise TypeError(f"{self.who}: guide and fit must be callables")

    def train(self, model: Any, guide: Any, *args: torch.Tensor) -> None:
        if self.fit is not None:
            self.fit(model, guide, *args)
        else:
            fit_svi(model, guide, args, self.steps, self.loss, self.lr)

    def score(
        self, model: Any, guide: Any, x: torch.Tensor, y: torch.Tensor, rows: tuple[int, ...]
    ) -> torch.Tensor:
        ll = draws_log_likelihood(model, guide, x, y, self.draws, self.site, rows)
        return (ll.logsumexp(0) - math.log(self.draws)).double()
