"""Recorded losses (``graph="record"`` and ``CompiledSVI``) on models whose Python a graph cannot
see: each probe trains a few steps, changes what the model reads, and compares the recorded loss
with the eager one under the same seed. A stale graph gives a loss far from the eager one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyro
import pyro.distributions as dist
import torch
from pyro.infer import SVI
from pyro.nn import PyroModule

from pyro_dropout import BBAlpha, CompiledSVI, DropoutELBO, DropoutGuide
from pyro_dropout.nn import Linear

from .base import Probe

X = torch.linspace(0.1, 2.0, 32).unsqueeze(-1)
Y = torch.zeros(32)


class Reader(PyroModule):
    """A regression that reads something in Python: ``how`` names what."""

    def __init__(self, how: str) -> None:
        super().__init__()
        self.hidden, self.out = Linear(1, 16), Linear(16, 1)
        self.how, self.noise, self.jump = how, 1.0, False

    def forward(self, x: torch.Tensor, y: torch.Tensor | None = None) -> torch.Tensor:
        mean = self.out(torch.relu(self.hidden(x))).squeeze(-1)
        if self.how == "data" and x.mean() > 0:
            mean = mean + 10.0
        if self.how == "item":
            mean = mean + 10.0 * float(x.max().item() > 1.0)
        if self.how == "observed" and y is not None and bool(y.abs().max() > 5):
            mean = mean + 10.0
        if self.jump:
            mean = mean + 10.0
        with pyro.plate("data", x.shape[0]):
            pyro.sample("obs", dist.Normal(mean, self.noise), obs=y)
        return mean


# what changes after the first steps: (inputs, labels) of the compared step, and the change
CHANGES: dict[str, tuple[str, Callable[[Reader], Any], torch.Tensor, torch.Tensor]] = {
    "a branch on the inputs' mean": ("data", lambda m: None, -X, Y),
    "a branch on x.max().item()": ("item", lambda m: None, X / 4, Y),
    "a branch on the observations": ("observed", lambda m: None, X, Y + 10),
    "model.noise changed": ("none", lambda m: setattr(m, "noise", 0.1), X, Y),
    "a model flag changed": ("none", lambda m: setattr(m, "jump", True), X, Y),
    "another batch size": ("none", lambda m: None, X[:7], Y[:7]),
}
LOSSES: dict[str, tuple[Callable[[], Any], bool, Callable[[], Any]]] = {
    "DropoutELBO(graph='record')": (lambda: DropoutELBO(graph="record"), False, DropoutELBO),
    "BBAlpha(0.5, graph='record')": (lambda: BBAlpha(0.5, graph="record"), False, lambda: BBAlpha(0.5)),
    "CompiledSVI(graph='record')": (DropoutELBO, True, DropoutELBO),
}


@pyro.settings.context(module_local_params=False)  # plain SVI's graph reads the global param store
def _recorded_and_eager(loss: str, change: str) -> tuple[float, float]:
    make, compiled, eager_loss = LOSSES[loss]
    how, act, x, y = CHANGES[change]
    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    model = Reader(how)
    guide = DropoutGuide(model, dropout=0.1)
    optim, loss = pyro.optim.Adam({"lr": 0.0}), make()
    svi = (
        CompiledSVI(model, guide, optim, loss, graph="record") if compiled else SVI(model, guide, optim, loss)
    )
    for _ in range(3):
        svi.step(X, Y)
    act(model)
    pyro.set_rng_seed(3)
    recorded = svi.step(x, y)
    eager = eager_loss()
    eager.loss(model, guide, x, y)  # its first call guesses the plates, drawing once
    pyro.set_rng_seed(3)
    return recorded, eager.loss(model, guide, x, y)


def _close(pair: tuple[float, float]) -> bool:
    """Within 0.1% of the eager loss under the same seed (a stale graph is off by a factor of 3
    or more in every case here)."""
    recorded, eager = pair
    return abs(recorded - eager) <= 1e-3 * abs(eager)


def graph_probes() -> list[Probe]:
    return [
        Probe("graphs", f"{loss}: {change}", lambda lo=loss, c=change: _recorded_and_eager(lo, c), (), _close)
        for loss in LOSSES
        for change in CHANGES
    ]
