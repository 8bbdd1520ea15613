r"""A UCI ``Method``: how a model is fitted (guide, loss, prior, likelihood) on the benchmark's
network and rows.

The UCI protocol supplies the network and the data; a method decides everything about
inference on it. Each method lives in one small file under
`pyro_dropout_experiments.uci.methods` and is named once, in the tuple of
`pyro_dropout_experiments.uci.registry`; the command line lists those names and builds each
method's flags from its options dataclass.

```python
class NoDropout(MCDropout):
    def grid(self, setup):
        return [{"p": 0.0, "tau": t} for t in setup.tau_values]
```
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from ..core import validate

__all__ = [
    "AfterTraining",
    "BuildContext",
    "GridSetup",
    "Method",
    "NoOptions",
]


@dataclass
class NoOptions:
    """A method without options of its own."""


@dataclass
class GridSetup:
    """What a protocol offers a method's grid search: candidate dropout rates, precisions (on
    the original target scale) and the full number of training epochs."""

    dropout_rates: Sequence[float] = ()
    tau_values: Sequence[float] = ()
    epochs: int = 1
    hidden: tuple[int, ...] = ()  # the widths of the protocol's hidden layers


@dataclass
class BuildContext:
    """What a method needs to build ``runs`` networks trained together as one model.

    ``network(**kw)`` makes the protocol's architecture for all runs (keywords as
    :class:`~pyro_dropout.nn.MLP`: ``tau``, ``likelihood``, ``prior``, ``length_scale``...);
    ``hyper`` holds each run's grid values; ``fan_in`` the input units of each weight layer;
    ``target_scale`` each run's target standard deviation (a precision on the original scale
    times its square is the precision of the standardised targets)."""

    network: Callable[..., Any]
    hyper: list[dict[str, Any]]
    fan_in: list[int]
    target_scale: torch.Tensor
    init_loc_fn: Callable
    length_scale: float
    per_example_masks: bool
    device: torch.device
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def runs(self) -> int:
        return len(self.hyper)

    def per_run(self, key: str) -> torch.Tensor:
        """Each run's ``key`` as a tensor ``[R]``; an error if a run lacks it."""
        values = [h.get(key) for h in self.hyper]
        if any(v is None for v in values):
            raise ValueError(f"every run needs its grid value {key!r}")
        return torch.tensor(values, dtype=torch.get_default_dtype(), device=self.device)

    def length_scales(self) -> float | torch.Tensor:
        """The prior length-scale: one for all runs, or (chosen on a grid) one per run."""
        lengths = [h.get("length_scale", self.length_scale) for h in self.hyper]
        return lengths[0] if len(set(lengths)) == 1 else self.per_run_values(lengths)

    def per_run_values(self, values: Sequence[float]) -> torch.Tensor:
        return torch.tensor(list(values), dtype=torch.get_default_dtype(), device=self.device)


@dataclass
class AfterTraining:
    """What :meth:`Method.after_training` sees of ``R`` runs trained together: the standardised
    training rows ``x`` ``[R, n, d]`` and ``y`` ``[R, n]``, each run's target standard deviation
    ``target_scale`` ``[R]``, the draws per prediction chunk, each run's grid values ``hyper``
    (with the values :meth:`Method.carried` brought from the grid stage), and, in the grid
    stage only, the standardised validation rows ``held_out`` (never the test rows)."""

    x: torch.Tensor
    y: torch.Tensor
    target_scale: torch.Tensor
    chunk: int
    hyper: list[dict[str, Any]]
    held_out: tuple[torch.Tensor, torch.Tensor] | None = None


class Method:
    """Base class of a fitting method. Subclasses set ``options_class`` (a dataclass, the one
    source of their settings' defaults), ``prefix`` (of its flags and stored keys) and override
    what differs: :meth:`grid`, :meth:`build`, and the optional hooks."""

    summary: ClassVar[str] = ""
    options_class: ClassVar[type] = NoOptions
    prefix: ClassVar[str] = ""  # of the options' flags (--prefix-field) and stored keys
    masked: ClassVar[bool] = False  # trains with dropout masks: per example or per draw
    layered: ClassVar[bool] = True  # fits a network with hidden layers (a GP does not)

    def __init__(self, options: Any = None, name: str = "", **presets: Any) -> None:
        self.name = name or type(self).__name__
        self.presets = presets  # fixed by the registered name (BB-alpha's alpha)
        self.options = self.options_class() if options is None else options
        if not isinstance(self.options, self.options_class):
            raise TypeError(f"{self.name}: options must be {self.options_class.__name__}")
        validate(self.options, self.prefix)

    def members(self) -> int:
        """Runs that make one fitted model (an ensemble's members, scored as one mixture)."""
        return 1

    fits_splits: ClassVar[bool] = False  # fitted split by split (fit_split), not as a trained network

    def fit_split(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        x_test: torch.Tensor,
        setup: GridSetup,
        seed: int,
        scale: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, Any]]:
        """For a method fitted split by split (a GP, HMC): given standardised ``x`` ``[n, d]`` and
        ``y`` ``[n]``, the predictive's draws at ``x_test``: means and variances ``[T, m]`` on
        the standardised scale, and values to record (on the original scale: ``scale`` is the
        targets' standard deviation)."""
        raise NotImplementedError(f"{self.name} trains a network; it is not fitted split by split")

    def draws(self, num_samples: int) -> int:
        """Prediction draws worth making of ``num_samples`` (1 where every draw is the same)."""
        return num_samples

    def grid(self, setup: GridSetup) -> list[dict[str, Any]]:
        """The hyper-parameters chosen on the validation rows; ``[]``: nothing to choose."""
        return []

    def particles(self) -> int:
        """Draws per training step (sizes the training memory)."""
        return 1

    def build(self, ctx: BuildContext) -> tuple[Any, Any, Any]:
        """``(model, guide, loss)`` for ``ctx.runs`` runs trained together."""
        raise NotImplementedError(f"{self.name} does not train a network")

    def after_training(self, model: Any, guide: Any, rows: AfterTraining) -> dict[str, Any]:
        """Runs after training (see :class:`AfterTraining`); returns values to record, per run
        (lists of length R) or shared."""
        return {}

    def carried(self) -> tuple[str, ...]:
        """Keys of the values learned in the grid stage (returned by :meth:`after_training` or
        :meth:`learned`) that go with the chosen grid point into the final fit's ``hyper``."""
        return ()

    def learned(self, model: Any, guide: Any, target_scale: torch.Tensor) -> dict[str, Any]:
        """What training learned, per run (lists of length R) or shared, for the results."""
        return {}
