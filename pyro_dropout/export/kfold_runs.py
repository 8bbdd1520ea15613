r"""K-fold's folds trained together: one :class:`~pyro_dropout.nn.MLP` holding K independent
networks (``runs=K``), each seeing every row, with the likelihood of its held-out fold masked out.

Run ``r``'s loss is then :math:`-\sum_{n \notin F_r} \log p(y_n \mid x_n, \omega_r) +
\mathrm{KL}_r`: exactly the loss of a network trained on the other folds, since the runs share
no parameter, Adam's update is elementwise, and a masked row adds nothing to the likelihood or
its gradient. Each step does the work of K fits on all N rows (K / (K - 1) of the looped folds'
rows) in one vectorised pass, so for small networks it runs many times faster than K fits one
after another (docs/analysis.md measures it).
"""

from __future__ import annotations

from typing import Any

import torch
from pyro.nn import PyroModule
from pyro.poutine.messenger import Messenger
from pyro.poutine.runtime import Message

from ..guides import DropoutGuide
from ..nn import MLP

__all__ = ["Folds", "MaskObserved", "fit_and_score", "runs_model", "split_scores"]


class MaskObserved(Messenger):
    """Mask the log-density of every observed site with ``mask`` (latent sites untouched)."""

    def __init__(self, mask: torch.Tensor) -> None:
        super().__init__()
        self.mask = mask

    def _process_message(self, msg: Message) -> None:
        if msg["type"] == "sample" and msg["is_observed"]:
            msg["mask"] = self.mask if msg["mask"] is None else msg["mask"] & self.mask


class Folds(PyroModule):
    """``net`` (an MLP with ``runs=K``) with its rows' likelihood masked by ``mask`` ``[K, N]``
    (True: the row trains run ``r``); ``mask=None`` scores every row under every run."""

    def __init__(self, net: MLP) -> None:
        super().__init__()
        self.net = net

    def forward(
        self, x: torch.Tensor, y: torch.Tensor | None = None, mask: torch.Tensor | None = None
    ) -> Any:
        if mask is None:
            return self.net(x, y)
        with MaskObserved(mask):
            return self.net(x, y)


def runs_model(model: Any, k: int) -> MLP | str:
    """``model`` rebuilt with ``runs=k`` where that is exactly the model the folds would train one
    by one, else the reason it is not (a string)."""
    if type(model) is not MLP:
        return f"the model is a {type(model).__name__}, not pyro_dropout.nn.MLP"
    if model.runs is not None:
        return f"the model already holds runs={model.runs}"
    made = model.with_runs(None)  # what its options build: anything changed since is not replicated

    def layout(m: torch.nn.Module) -> list[tuple[str, tuple[int, ...]]]:
        return [(name, tuple(t.shape)) for name, t in [*m.named_parameters(), *m.named_buffers()]]

    if repr(made) != repr(model) or layout(made) != layout(model) or vars(made).keys() != vars(model).keys():
        return "the model was changed after MLP(...) built it"
    like = next((b for b in model.buffers() if b.is_floating_point()), None)  # its device and dtype
    net = model.with_runs(k)
    return net if like is None else net.to(device=like.device, dtype=like.dtype)


def fit_and_score(
    net: MLP,
    guide: Any,
    x: torch.Tensor,
    y: torch.Tensor,
    folds: torch.Tensor,
    train: Any,
    score: Any,
) -> torch.Tensor | str:
    """``[K, N]``: every row's log predictive density under each run, after ``train(model, guide,
    x, y, mask)`` has fitted run ``r`` on the rows outside fold ``r``; or, where ``guide(model)``
    is not a :class:`DropoutGuide` (whose sites follow the runs plate), the reason it cannot run."""
    k = net.runs
    assert k is not None
    model = Folds(net)
    made = guide(model)
    if not isinstance(made, DropoutGuide):
        return f"guide(model) is a {type(made).__name__}, not a DropoutGuide"
    xs = x.expand(k, *x.shape).contiguous()
    ys = y.expand(k, *y.shape).contiguous()
    folds = folds.to(x.device)  # the mask meets the model's log-densities there
    mask = folds.unsqueeze(0) != torch.arange(k, device=x.device).unsqueeze(1)  # [K, N]: row n trains run r
    train(model, made, xs, ys, mask)
    with torch.no_grad():
        return score(model, made, xs, ys)


def split_scores(scores: torch.Tensor, folds: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """From ``[K, N]`` scores, each row's held-out score (its own fold's run) and its mean score
    under the K - 1 runs that trained on it."""
    k = scores.shape[0]
    held = scores.gather(0, folds.unsqueeze(0)).squeeze(0)
    inside = (scores.sum(0) - held) / (k - 1)
    return held, inside
