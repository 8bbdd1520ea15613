r"""Training a model + :class:`~pyro_dropout.guides.DropoutGuide` under ``lightning.Trainer``:
any accelerator, any number of devices or nodes (``strategy="ddp"``), Lightning's checkpoints.

``lightning`` is an optional extra (``pip install 'pyro-dropout[lightning]'``), imported when
:class:`SVIModule` is first built.

**The minibatch scale across ranks.** Each of ``R`` ranks holds its own ``b_r`` rows of a global
batch of ``B = Σ b_r`` rows. DDP averages the ranks' gradients, so each rank's loss is

$$
-\frac{N R}{B} \sum_{n \in b_r} \mathbb{E}_q \log p(y_n \mid x_n, \omega) + \mathrm{KL},
$$

whose average over ranks is the ELBO of the global batch: the per-point terms scaled by
:math:`N/B`, the KL counted once. ``B`` is summed across ranks each step (one small
all-reduce), so unequal shares are scaled right too.

Usage:

    from pyro_dropout.lightning import SVIModule
    module = SVIModule(model, DropoutGuide(model), DropoutELBO(), lr=1e-3, num_data=len(train_set))
    lightning.Trainer(max_epochs=20, strategy="ddp", devices=4).fit(module, train_loader)

The model is called as ``model(x, y, num_data=N)`` with the batches ``(x, y)`` of any
``DataLoader``, and must scale its likelihood with ``pyro.plate(..., num_data, subsample=...)``
as the library's models do (:class:`~pyro_dropout.nn.MLP`). Parameters are the modules' own
(``pyro.settings.set(module_local_params=True)`` before building the model), as Lightning needs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import torch
from pyro.poutine.messenger import Message, Messenger

from .metrics import evaluate
from .ops import is_positive_int, is_positive_number
from .prediction import predict

try:
    import lightning
except ImportError as e:  # an optional extra: only this module needs it
    raise ImportError("pyro_dropout.lightning needs lightning: pip install 'pyro-dropout[lightning]'") from e

__all__ = ["SVIModule", "ScaleObserved"]

# the reports' fields logged after each validation epoch
_LOGGED = ("rmse", "test_ll", "crps", "coverage", "accuracy", "nll", "brier", "ece")


class ScaleObserved(Messenger):
    """Multiply the log-density of every observed site by ``factor`` (latent sites untouched)."""

    def __init__(self, factor: float) -> None:
        super().__init__()
        self.factor = factor

    def _process_message(self, msg: Message) -> None:
        if msg["type"] == "sample" and msg["is_observed"]:
            msg["scale"] = msg["scale"] * self.factor


def _check_loss(loss: Any) -> None:
    if isinstance(loss, type):
        raise TypeError(
            f"SVIModule: loss must be a loss object, e.g. {loss.__name__}(), not the class {loss.__name__}"
        )
    if not callable(getattr(loss, "differentiable_loss", None)):
        raise TypeError(
            "SVIModule: loss must be a Pyro loss with differentiable_loss, such as DropoutELBO() or "
            f"BBAlpha(0.5); got {loss!r:.60}"
        )


def _check_optimizer(optimizer: Any) -> None:
    """A ``torch.optim`` optimizer class, or a function of ``(params, lr=...)`` making one; not
    Pyro's ``pyro.optim`` wrappers, which take a dict of settings."""
    pyro_wrapper = str(getattr(optimizer, "__module__", "")).startswith("pyro.")
    if isinstance(optimizer, type):
        ok = issubclass(optimizer, torch.optim.Optimizer)
    else:
        ok = callable(optimizer) and not pyro_wrapper
    if not ok:
        name = getattr(optimizer, "__name__", repr(optimizer)[:60])
        raise TypeError(
            "SVIModule: optimizer must be a torch.optim optimizer class (such as torch.optim.Adam, "
            f"given the parameters and lr), not {name}"
            + ("; pyro.optim is for pyro.infer.SVI" if pyro_wrapper else "")
        )


def _pair(batch: Any, step: str) -> tuple[torch.Tensor, torch.Tensor]:
    if isinstance(batch, dict):
        raise TypeError(
            f"SVIModule.{step}: a batch is a dict (keys {sorted(map(str, batch))}); give (x, y) batches "
            "(a collate_fn that returns (batch['input_ids'], batch['labels']), say)"
        )
    if not (isinstance(batch, tuple | list) and len(batch) == 2):
        what = f"a {type(batch).__name__}" + (f" of {len(batch)}" if isinstance(batch, tuple | list) else "")
        raise ValueError(f"SVIModule.{step}: a batch must be an (x, y) pair, got {what}")
    return batch[0], batch[1]


class SVIModule(lightning.LightningModule):
    """A model + guide trained with a dropout loss (``DropoutELBO``, ``BBAlpha``) by Lightning.

    :param model: a Pyro model called as ``model(x, y, num_data=N)``.
    :param guide: its :class:`~pyro_dropout.guides.DropoutGuide`.
    :param loss: the loss (``differentiable_loss`` is called each step).
    :param lr: the learning rate.
    :param optimizer: a ``torch.optim`` optimizer class, given the parameters and ``lr``.
    :param num_data: ``N``, the rows of the whole training set.
    :param example: one batch ``(x, y)`` to create the guide's parameters with, if no step has
        created them yet (the optimizer needs them before training starts).
    :param num_samples: MC draws for validation metrics and :meth:`predict_step`.
    """

    def __init__(
        self,
        model: Callable,
        guide: Any,
        loss: Any,
        lr: float = 1e-3,
        num_data: int | None = None,
        example: tuple | None = None,
        num_samples: int = 100,
        optimizer: Callable[..., torch.optim.Optimizer] = torch.optim.Adam,
    ) -> None:
        super().__init__()
        if not is_positive_int(num_data):
            raise ValueError(
                f"SVIModule: num_data must be the training set's rows, a positive int; got {num_data!r}"
            )
        if not is_positive_number(lr):
            raise ValueError(f"SVIModule: lr must be a positive number, got {lr!r}")
        _check_loss(loss)
        _check_optimizer(optimizer)
        if not is_positive_int(num_samples):
            raise ValueError(f"SVIModule: num_samples must be a positive int, got {num_samples!r}")
        self.model, self.guide, self.loss = model, guide, loss
        self.lr, self.num_data, self.num_samples = float(lr), num_data, num_samples
        self.optimizer = optimizer
        if example is not None and getattr(guide, "prototype_trace", None) is None:
            x, y = _pair(example, "__init__ (example)")
            guide(x, y, num_data=num_data)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        params = list(self.parameters())
        if not params:
            raise RuntimeError(
                "SVIModule: the guide has no parameters yet; give example=(x, y), one batch, "
                "or call guide(x, y) once before training"
            )
        return self.optimizer(params, lr=self.lr)

    def _global_rows(self, rows: int) -> tuple[float, int]:
        """``(B, R)``: the rows of the global batch, and the number of ranks."""
        ranks = self.trainer.world_size if self._trainer is not None else 1
        if ranks == 1:
            return float(rows), 1
        each = cast(torch.Tensor, self.all_gather(torch.tensor(float(rows), device=self.device)))
        return float(each.sum()), ranks

    def training_step(self, batch: tuple, batch_idx: int) -> torch.Tensor:
        x, y = _pair(batch, "training_step")
        if len(x) > self.num_data:
            raise ValueError(
                f"SVIModule: a batch of {len(x)} rows is larger than num_data={self.num_data}, the rows of "
                "the whole training set: give num_data=len(the training set)"
            )
        total, ranks = self._global_rows(len(x))
        scaled = ScaleObserved(ranks * len(x) / total)(self.model)  # N R / B per point, the KL once
        loss = self.loss.differentiable_loss(scaled, self.guide, x, y, num_data=self.num_data)
        self.log("train_loss", loss.detach(), prog_bar=True, batch_size=len(x))
        return loss

    def validation_step(self, batch: tuple, batch_idx: int) -> None:
        x, y = _pair(batch, "validation_step")
        with torch.no_grad():
            report = evaluate(self.model, self.guide, x, y, num_samples=self.num_samples)
        for name in _LOGGED:
            value = getattr(report, name, None)
            if isinstance(value, int | float):
                self.log(f"val_{name}", float(value), sync_dist=True, batch_size=len(x))

    def predict_step(self, batch: Any, batch_idx: int) -> dict[str, torch.Tensor]:
        """MC-dropout draws of every site for this rank's batch (``trainer.predict`` shards the
        data across ranks): ``{site: [num_samples, rows, ...]}``."""
        x = batch[0] if isinstance(batch, list | tuple) else batch
        with torch.no_grad():
            draws = predict(self.model, self.guide, x, num_samples=self.num_samples)
        return dict(draws.samples)
