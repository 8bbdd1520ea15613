r"""A trained ``torch.nn.Module`` as a Bayesian model for :class:`~pyro_dropout.guides.DropoutGuide`.

:func:`from_module` copies the network and replaces each ``nn.Linear`` / ``nn.Conv2d`` by the
library's layer (a weight and a bias that are sample sites with ``QuantisedGaussian(0, 1/l)``
priors), whose trained weights become the guide's starting means. An ``nn.Dropout`` (or
``Dropout1d/2d``) becomes the identity, and its p the declared rate of the next weight layer in the
module's order (the layer it feeds in an ``nn.Sequential``); other layers get p = 0. Batch norm
runs with its running statistics (no batch statistics shared between test points), and pooling,
flattening and batch norm take the leading draw dimensions of batched weights. So
``predict_standard`` (the expected weights) gives exactly ``net.eval()(x)``, and MC dropout
predictions come at once, before any training; SVI then refines the network.

Usage::

    model = from_module(trained_net, likelihood="categorical")
    guide = DropoutGuide(model)                      # the net's dropout rates, its weights as means
    guide(x, y)
    pred = predict(model, guide, x_test)
"""

from __future__ import annotations

import copy
import math
from typing import Any

import pyro
import pyro.distributions as dist
import torch
from pyro.nn import PyroModule
from pyro.nn.module import to_pyro_module_
from torch import nn

from .conv import Conv1d, Conv2d, Conv3d
from .functional import over_draws
from .layers import Linear
from .trace_order import Step, run_order

__all__ = ["ConvertedModel", "from_module"]

_DROPOUT = (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d)
_WEIGHTED = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d)
_CONVS = {nn.Conv1d: Conv1d, nn.Conv2d: Conv2d, nn.Conv3d: Conv3d}
# modules that act on the last `core` dims of an input (a draw dimension may lead them), with
# the core an input of theirs has when the layers before do not tell
_CORE_DIMS = {
    nn.BatchNorm1d: 1,
    nn.BatchNorm2d: 3,
    nn.BatchNorm3d: 4,
    nn.MaxPool1d: 2,
    nn.MaxPool2d: 3,
    nn.MaxPool3d: 4,
    nn.AvgPool1d: 2,
    nn.AvgPool2d: 3,
    nn.AvgPool3d: 4,
    nn.AdaptiveAvgPool1d: 2,
    nn.AdaptiveAvgPool2d: 3,
    nn.AdaptiveAvgPool3d: 4,
    nn.AdaptiveMaxPool2d: 3,
    nn.Flatten: 3,
}


def _core_after(module: nn.Module, core: int | None) -> int | None:
    """The core dims (besides the batch) of ``module``'s output, given its input's."""
    if isinstance(module, nn.Linear | nn.Flatten):
        return 1
    if isinstance(module, nn.Conv1d | nn.Conv2d | nn.Conv3d):
        return len(module.kernel_size) + 1
    return core


class LeadingDims(nn.Module):
    """Runs ``module`` on inputs with extra leading (draw) dimensions: they are folded into the
    batch, and unfolded after. ``core``: the dims the module acts on besides the batch."""

    def __init__(self, module: nn.Module, core: int) -> None:
        super().__init__()
        self.module, self.core = module, core

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return over_draws(self.module, x, self.core)


def _core_dims(module: nn.Module) -> int:
    return next((core for kind, core in _CORE_DIMS.items() if isinstance(module, kind)), 0)


def _bayesian(layer: Any, rate: float, length_scale: float, name: str) -> nn.Module:
    kwargs: dict[str, Any] = {"length_scale": length_scale, "dropout": rate}
    if isinstance(layer, nn.Linear):
        new: Any = Linear(layer.in_features, layer.out_features, layer.bias is not None, **kwargs)
    else:
        if layer.padding_mode != "zeros":
            raise ValueError(
                f"from_module: layer '{name}' has padding_mode={layer.padding_mode!r}; only 'zeros' is "
                "supported for Bayesian convolutions (make it deterministic with last_layer=True)"
            )
        kind = next(k for t, k in _CONVS.items() if isinstance(layer, t))
        sizes = (layer.kernel_size, layer.stride, layer.padding, layer.dilation, layer.groups)
        new = kind(layer.in_channels, layer.out_channels, *sizes, layer.bias is not None, **kwargs)
    new.register_buffer("start_weight", layer.weight.detach().clone())  # the trained weights: the start
    if layer.bias is not None:
        new.register_buffer("start_bias", layer.bias.detach().clone())
    return new


def _then_drop(pending: float, p: float) -> float:
    """The rate of two dropouts in a row: a unit is kept with the product of their keeps."""
    return 1.0 - (1.0 - pending) * (1.0 - p)


def _freeze(net: nn.Module) -> None:
    """Every parameter of ``net`` as a buffer: fixed, and not a ``pyro.param`` once a PyroModule."""
    for module in net.modules():
        for name in list(module._parameters):
            value = module._parameters.pop(name)
            module.register_buffer(name, None if value is None else value.detach().clone())


def _replace(parent: nn.Module, name: str, new: nn.Module) -> None:
    *path, last = name.split(".")
    for part in path:
        parent = getattr(parent, part)
    order = list(parent._modules)
    setattr(parent, last, new)  # a PyroModule names the new layer's sites by its path here
    parent._modules = type(parent._modules)((key, parent._modules[key]) for key in order)  # keep the order


def _convert(net: nn.Module, order: list[Step], length_scale: float, last_layer: bool) -> dict[str, float]:
    """Replace the layers of ``net`` in place, visiting them in ``order``; returns each weight
    site's rate (the dropouts since the layer before it)."""
    layers = [n for kind, n in order if kind == "module" and isinstance(net.get_submodule(n), _WEIGHTED)]
    if not layers:
        raise ValueError(
            "from_module: the network has no nn.Linear or nn.Conv1d/2d/3d layer to make Bayesian"
        )
    bayesian = set(layers[-1:] if last_layer else layers)
    rates: dict[str, float] = {}
    pending, core = 0.0, None  # the dropouts since the last weight layer; the tensor's core dims
    for kind, item in order:
        if kind == "dropout":
            pending = _then_drop(pending, float(item))
            continue
        module = net.get_submodule(item)
        core_in, core = core, _core_after(module, core)
        if isinstance(module, _DROPOUT):
            pending = _then_drop(pending, float(module.p))
            _replace(net, item, nn.Identity())
        elif item in bayesian and item not in rates:
            rates[f"{item}.weight"] = pending
            _replace(net, item, _bayesian(module, pending, length_scale, item))
            pending = 0.0
        elif _core_dims(module):
            module.eval()  # batch norm: the running statistics
            _replace(net, item, LeadingDims(module, core_in or _core_dims(module)))
        elif item in layers:  # a layer kept deterministic (last_layer=True)
            pending = 0.0
    return rates


class ConvertedModel(PyroModule):
    """The model :func:`from_module` returns: ``forward(x, y=None, num_data=None)`` runs the converted
    network and observes ``y`` in a plate ``"data"`` (scaled by ``num_data / len(x)`` for minibatches).
    ``rates``: the drop probability each weight site declares."""

    def __init__(self, net: nn.Module, likelihood: str, tau: float, rates: dict[str, float]) -> None:
        super().__init__()
        self.net, self.likelihood, self.tau, self.rates = net, likelihood, tau, rates

    def forward(
        self, x: torch.Tensor, y: torch.Tensor | None = None, num_data: int | None = None
    ) -> torch.Tensor:
        f = self.net(x)
        n = f.shape[-2] if self.likelihood == "categorical" or f.dim() >= 2 else f.shape[-1]
        scale = 1.0 if num_data is None else num_data / n
        with pyro.plate("data", n, dim=-1), pyro.poutine.scale(scale=scale):
            if self.likelihood == "categorical":
                logits = pyro.deterministic("logits", f, event_dim=1)
                return pyro.sample("obs", dist.Categorical(logits=logits), obs=y)
            mean = pyro.deterministic("mean", f.squeeze(-1) if f.shape[-1] == 1 else f, event_dim=0)
            return pyro.sample("obs", dist.Normal(mean, self.tau**-0.5), obs=y)


def from_module(
    net: nn.Module,
    likelihood: str = "normal",
    *,
    tau: float = 1.0,
    prior_length_scale: float = 1e-2,
    last_layer: bool = False,
) -> ConvertedModel:
    """A Pyro model from a (trained) network; ``net`` itself is left as it is.

    :param likelihood: ``"normal"`` (one output: :math:`y \\sim \\mathcal N(f(x), \\tau^{-1})`) or
        ``"categorical"`` (the outputs are logits).
    :param tau: the precision of a normal likelihood.
    :param prior_length_scale: the weights' prior length-scale :math:`l` (prior sd :math:`1/l`);
        small, as a trained network's weights are far from a unit Gaussian.
    :param last_layer: only the last ``nn.Linear`` / ``nn.Conv2d`` is Bayesian; the others keep
        their trained weights as fixed parameters.
    """
    if likelihood not in ("normal", "categorical"):
        raise ValueError(f"from_module: likelihood must be 'normal' or 'categorical', got {likelihood!r}")
    if isinstance(tau, bool) or not (isinstance(tau, int | float) and math.isfinite(tau) and tau > 0):
        raise ValueError(f"from_module: tau must be a positive finite number, got {tau!r}")
    if not isinstance(net, nn.Module):
        raise TypeError(f"from_module: net must be a torch.nn.Module, got {type(net).__name__}")
    copy_ = copy.deepcopy(net)
    _freeze(copy_)  # what stays deterministic keeps its trained values, fixed (not Pyro parameters)
    net, order = run_order(copy_)  # functional dropouts in its forward become the identity too
    to_pyro_module_(net)  # containers as PyroModules: the sites are named by their path ("0.weight")
    rates = _convert(net, order, prior_length_scale, last_layer)
    return ConvertedModel(net, likelihood, float(tau), rates)
