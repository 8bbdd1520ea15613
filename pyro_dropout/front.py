r"""``MCDropout``: the front door for a trained network with dropout.

Three lines from a trained ``torch.nn.Module`` to MC-dropout predictions and their uncertainty,
built on :func:`~pyro_dropout.nn.from_module`, :class:`~pyro_dropout.guides.DropoutGuide` and
:func:`~pyro_dropout.prediction.predict` (each reachable as ``bnn.model``, ``bnn.guide``):

```python
bnn = MCDropout(trained_net, "classification")        # the net's own dropout, its trained weights
report = bnn.evaluate(x_test, y_test)                  # accuracy, NLL, ECE, misclassification AUROC
ood = bnn.ood(x_test, x_other)                         # AUROC of entropy, mutual information ...
bnn.fit(train_loader, epochs=1)                        # optional: refine by SVI (a DataLoader)
```
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from typing import Any, cast

import pyro
import torch
from pyro import poutine
from pyro.infer import SVI
from pyro.infer.autoguide.initialization import InitMessenger

from .batches import batches
from .guides import DropoutGuide, init_to_fan_in
from .guides.ownership import forget_on_collection
from .infer import DropoutELBO
from .metrics import aupr, auroc, evaluate, merge_reports, uncertainty_scores
from .nn import dropout_off, from_module
from .ops import is_positive_int, is_positive_number
from .prediction import Predictions, explain_chunks, predict

__all__ = ["MCDropout"]

_INSTANCES = itertools.count()
_OUTPUT_SITES = ("logits", "mean", "log_var", "output")  # a converted network's outputs (per point)
_TASKS = {
    "classification": "categorical",
    "segmentation": "segmentation",
    "regression": "normal",
    "heteroscedastic": "heteroscedastic",
}


def _check_fit(epochs: Any, lr: Any) -> None:
    if not is_positive_int(epochs):
        raise ValueError(f"MCDropout.fit: epochs must be a positive int, got {epochs!r}")
    if not is_positive_number(lr):
        raise ValueError(f"MCDropout.fit: lr must be a positive finite number, got {lr!r}")


def _data_size(loader: Any) -> int | None:
    """The examples in one pass of ``loader``: a DataLoader's ``len(dataset)``, a list's rows."""
    dataset = getattr(loader, "dataset", None)
    if dataset is not None:
        try:
            return len(dataset)
        except TypeError:  # an IterableDataset
            return None
    if isinstance(loader, list | tuple) and all(isinstance(b, list | tuple) and b for b in loader):
        return sum(len(b[0]) for b in loader)
    return None


class MCDropout:
    """A trained network with dropout as an MC-dropout posterior.

    :param net: the trained ``nn.Module`` (left as it is; a copy is converted).
    :param task: ``"classification"`` (the outputs are logits, ``[N, C]`` or a class per position
        ``[N, T, C]``), ``"segmentation"`` (a class per pixel, ``[N, C, H, W]``), ``"regression"``
        (one output, noise precision ``tau``), ``"heteroscedastic"`` (a mean and a log-variance),
        or a callable ``f -> distribution`` (:func:`~pyro_dropout.nn.from_module`'s likelihoods).
    :param num_samples: the draws of each prediction (T).
    :param kwargs: passed to :func:`~pyro_dropout.nn.from_module` (``tau``, ``keep``, ``last_layer``...).
    """

    def __init__(
        self,
        net: torch.nn.Module,
        task: str | Callable = "classification",
        *,
        num_samples: int = 100,
        **kwargs: Any,
    ) -> None:
        if not callable(task) and task not in _TASKS:
            raise ValueError(
                f"MCDropout: task must be one of {', '.join(_TASKS)} or a callable, got {task!r}"
            )
        if not is_positive_int(num_samples):
            raise ValueError(f"MCDropout: num_samples must be a positive int, got {num_samples!r}")
        self.task, self.num_samples = task, num_samples
        self.model = from_module(net, task if callable(task) else _TASKS[task], **kwargs)
        # a name of its own in Pyro's param store: several can live side by side, and the
        # store forgets its values once its guide is collected
        name = f"MCDropout{next(_INSTANCES)}"
        self.guide = DropoutGuide(self.model, name=name)
        forget_on_collection(self.guide, name)

    def _targets_like(self, x: torch.Tensor) -> torch.Tensor:
        """Targets of the shape the network's outputs ask for (a class per token or pixel, say),
        from one pass of the network with its trained weights and its dropout off."""
        with torch.no_grad(), poutine.block(), pyro.validation_enabled(False), dropout_off():
            trace = poutine.trace(InitMessenger(init_to_fan_in)(self.model)).get_trace(x)
        return torch.zeros_like(cast(torch.Tensor, trace.nodes["obs"]["value"]))

    def _draws(self, num_samples: int | None) -> int:
        """The number of draws asked for (``None``: the default); ``0`` is refused by ``predict``,
        not taken as the default."""
        return self.num_samples if num_samples is None else num_samples

    def _ready(self, x: torch.Tensor, y: torch.Tensor | None = None) -> None:
        """Each batch checked (finite inputs and targets: a NaN would reach Pyro as "Expected
        parameter logits"), and the guide set up at the first."""
        for name, t in (("x", x), ("y", y)):
            if t is not None and t.is_floating_point() and not bool(torch.isfinite(t).all()):
                bad = int((~torch.isfinite(t)).sum())
                raise ValueError(f"MCDropout: {name} holds {bad} NaN or infinite values (of {t.numel()})")
        if self.guide.prototype_trace is None:  # set up with the data's structure (targets as observed)
            self.guide(x[:2], y[:2] if y is not None else self._targets_like(x[:2]))

    def fit(
        self,
        loader: Iterable,
        epochs: int = 1,
        lr: float = 1e-3,
        loss: Any = None,
        num_data: int | None = None,
    ) -> list[float]:
        """Refine the network by SVI on a DataLoader of ``(x, y)`` batches (``loss``: default
        ``DropoutELBO()``), the likelihood scaled to the whole data set (``num_data``: its size,
        by default the loader's ``len(dataset)`` or a list's rows); returns each epoch's loss per
        example (each step's loss over ``num_data``, averaged over the epoch's examples: the
        same whatever the batch size)."""
        _check_fit(epochs, lr)
        n = _data_size(loader) if num_data is None else num_data
        if not is_positive_int(n):
            raise ValueError(
                "MCDropout.fit: the data set's size is not known (a generator or an IterableDataset) "
                f"or not a positive int ({n!r}): give num_data=, the examples in one epoch"
            )
        svi, history = None, []
        for epoch in range(epochs):
            total, seen = 0.0, 0
            for x, y in batches(loader, f"MCDropout.fit (epoch {epoch + 1})"):
                if y is None:
                    raise ValueError(
                        "MCDropout.fit: the batches need targets: a DataLoader of (x, y) batches"
                    )
                self._ready(x, y)
                optim = cast(Any, pyro.optim).Adam({"lr": lr})
                svi = svi or SVI(self.model, self.guide, optim, loss or DropoutELBO())
                total += svi.step(x, y, num_data=n) * len(x) / n
                seen += len(x)
            history.append(total / seen)
        return history

    def predict(self, x: Any, num_samples: int | None = None) -> Predictions:
        """MC-dropout draws at ``x`` (a tensor, or a DataLoader, streamed a batch at a time):
        ``pred.probs["obs"]`` ``[T, N, C]`` (classification; ``[T, N, *positions, C]`` with a class
        per token or pixel), ``pred.means["obs"]`` ``[T, N]`` (regression). A DataLoader's
        predictions hold the per-point sites (the likelihood's and the network's outputs)."""
        parts = []
        for xb, _ in batches(x, "MCDropout.predict"):
            self._ready(xb)
            parts.append(predict(self.model, self.guide, xb, num_samples=self._draws(num_samples)))
        return parts[0] if isinstance(x, torch.Tensor) else Predictions.of_points(parts, _OUTPUT_SITES)

    def explain(self) -> str:
        """How the draws run and why: the network's route at each input shape (its own forward on
        all the draws' rows together, or one pass per draw), each site of the guide (its rate, or why
        it is a point estimate), and prediction's chunks (recorded under a guard, or eager)."""
        parts = [self.model.explain()]
        if self.guide.prototype_trace is not None:
            parts.append(self.guide.explain())
        parts.append(explain_chunks(self.model, self.guide))
        return "\n".join(parts)

    def probs(self, x: Any, num_samples: int | None = None) -> torch.Tensor:
        """The class probabilities of each draw, ``[T, N, C]`` (``[T, N, *positions, C]``)."""
        pred = self.predict(x, num_samples)
        if "obs" not in pred.probs:
            raise ValueError(
                f"MCDropout.probs: the task is {self.task!r}, whose predictions have no class "
                "probabilities: use predict(x).means['obs'] (and .variances)"
            )
        return pred.probs["obs"]

    def evaluate(self, x: Any, y: torch.Tensor | None = None, num_samples: int | None = None) -> Any:
        """The report of :func:`~pyro_dropout.metrics.evaluate` on ``(x, y)``, or on a DataLoader of
        ``(x, y)`` batches, scored a batch at a time (:func:`~pyro_dropout.metrics.merge_reports`)."""
        data = [(x, y)] if y is not None else batches(x, "MCDropout.evaluate")
        reports, targets = [], []
        for xb, yb in data:
            if yb is None:
                raise ValueError("MCDropout.evaluate: give the targets (y) or a DataLoader of (x, y) batches")
            self._ready(xb, yb)
            reports.append(evaluate(self.model, self.guide, xb, yb, num_samples=self._draws(num_samples)))
            targets.append(yb)
        return reports[0] if len(reports) == 1 else merge_reports(reports, torch.cat(targets))

    def ood(self, x_in: Any, x_out: Any, num_samples: int | None = None) -> dict[str, dict[str, float]]:
        """AUROC and AUPR of each uncertainty score (entropy, mutual information, variation ratio,
        1 - max probability) at telling ``x_out`` (out of distribution) from ``x_in``; each a tensor
        or a DataLoader, streamed (a point's scores are kept, not its draws). With a class per
        position, each point's scores are its positions' mean."""
        scores = [self._scores(x, num_samples, "MCDropout.ood") for x in (x_in, x_out)]
        s_in, s_out = scores
        return {k: {"auroc": auroc(s_out[k], s_in[k]), "aupr": aupr(s_out[k], s_in[k])} for k in s_in}

    def _scores(self, x: Any, num_samples: int | None, where: str) -> dict[str, torch.Tensor]:
        parts = []
        for xb, _ in batches(x, where):
            parts.append(uncertainty_scores(self.probs(xb, num_samples)))
        return {k: torch.cat([p[k] for p in parts]) for k in parts[0]}
