r"""A trained ``torch.nn.Module`` as a Bayesian model for :class:`~pyro_dropout.guides.DropoutGuide`.

:func:`from_module` copies the network and replaces its weight layers (``nn.Linear``,
``nn.Conv1d/2d/3d``, ``nn.LSTM``, ``nn.GRU``) by the library's (weights and biases that are sample
sites with ``QuantisedGaussian(0, 1/l)`` priors, the trained values as the guide's starting
means), and its dropouts by exactly what they do: the variational family of the layer they feed
where their mask is a mask of its input units, a mask site where they are anywhere else
(:mod:`~pyro_dropout.nn.converted.placement`). Batch norm runs with its running statistics. The
forward runs as written, on a batch of the shape it expects, also under batched draws
(:mod:`~pyro_dropout.nn.converted.fold`), with a self-check that falls back to one draw at a time
(:mod:`~pyro_dropout.nn.converted.model`). So ``predict_standard`` (the expected weights) gives
``net.eval()(x)``, one MC draw gives the network's own pass with the same masks, and SVI refines
the network. What converts and what is refused: docs/own-model.md.

```python
model = from_module(trained_net, likelihood="categorical")
guide = DropoutGuide(model)                      # the net's dropout rates, its weights as means
guide(x, y)
pred = predict(model, guide, x_test)
```
"""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from pyro.nn.module import to_pyro_module_
from torch import fx, nn

from .converted.dropout_sites import ModuleDropout
from .converted.likelihoods import check_likelihood, check_outputs
from .converted.model import ConvertedModel
from .converted.placement import CHANNEL_DROPOUTS, ELEMENT_DROPOUTS, Placement, dropout_of, place_dropouts
from .converted.rules import (
    WEIGHTED,
    bayesian,
    check_convertible,
    check_hook_norms,
    functional_uses,
    kept_inside,
)

__all__ = ["ConvertedModel", "from_module"]


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


def _trace(net: nn.Module) -> fx.GraphModule | None:
    try:
        return fx.symbolic_trace(net)
    except Exception as error:  # torch.fx raises many kinds on a forward it cannot follow
        warnings.warn(
            "from_module: could not trace the forward of "
            f"{type(net).__name__} ({type(error).__name__}: {error}); "
            "every dropout module stays where it is as a mask site, and "
            "a functional dropout (F.dropout) in the "
            "forward is refused when it runs",
            stacklevel=3,
        )
        return None


def _edit_graph(gm: fx.GraphModule, placement: Placement) -> tuple[bool, list[str]]:
    """Remove the functional dropouts that became a layer's rate and make the others mask sites;
    ``(whether the graph changed, the mask sites added)``."""
    sites, count, edited = [], 0, False
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or dropout_of(gm, node) is None:
            continue
        if node in placement.sites:
            p, channels = placement.sites[node]
            name = f"dropout{count}"
            count += 1
            gm.add_submodule(name, ModuleDropout(p, channels, f"{node.name} in the forward"))
            with gm.graph.inserting_after(node):
                new = gm.graph.call_module(name, (node.args[0],))
            node.replace_all_uses_with(new)
            sites.append(name)
        else:
            node.replace_all_uses_with(node.args[0])
        gm.graph.erase_node(node)
        edited = True
    gm.recompile()
    return edited, sites


def _layers_in_order(gm: fx.GraphModule | None, weighted: list[str]) -> list[str]:
    if gm is None:
        return weighted
    called = [str(n.target) for n in gm.graph.nodes if n.op == "call_module"]
    return [name for name in dict.fromkeys(called) if name in weighted] + [
        w for w in weighted if w not in called
    ]


def _check_arguments(net: Any, likelihood: Any, tau: Any, last_layer: Any, keep: Any, dropouts: Any) -> None:
    if not isinstance(net, nn.Module):
        raise TypeError(f"from_module: net must be a torch.nn.Module, got {type(net).__name__}")
    check_hook_norms(net)
    check_likelihood(likelihood)
    if isinstance(tau, bool) or not (isinstance(tau, int | float) and math.isfinite(tau) and tau > 0):
        raise ValueError(f"from_module: tau must be a positive finite number, got {tau!r}")
    if not isinstance(last_layer, bool):
        raise TypeError(f"from_module: last_layer must be True or False, got {last_layer!r}")
    if isinstance(keep, str) or not all(isinstance(k, str) for k in keep):
        raise TypeError(f"from_module: keep must be a list of module names, got {keep!r}")
    if dropouts not in ("weights", "sites"):
        raise ValueError(f"from_module: dropouts must be 'weights' or 'sites', got {dropouts!r}")


def from_module(
    net: nn.Module,
    likelihood: str | Callable = "normal",
    *,
    tau: float = 1.0,
    prior_length_scale: float = 1e-2,
    last_layer: bool = False,
    keep: Sequence[str] = (),
    dropouts: str = "weights",
) -> ConvertedModel:
    """A Pyro model from a (trained) network; ``net`` itself is left as it is.

    :param likelihood: ``"normal"``, ``"heteroscedastic"`` (mean and log-variance),
        ``"categorical"`` (logits), or a callable ``f -> distribution``
        (:mod:`~pyro_dropout.nn.converted.likelihoods`).
    :param tau: the precision of a normal likelihood.
    :param prior_length_scale: the weights' prior length-scale :math:`l` (prior sd :math:`1/l`);
        small, as a trained network's weights are far from a unit Gaussian.
    :param last_layer: only the last weight layer is Bayesian; the others keep their trained values.
    :param keep: modules to keep deterministic (their trained values, fixed).
    :param dropouts: ``"weights"``: a dropout that masks the inputs of the layer it feeds is that
        layer's variational family (what Concrete dropout learns); ``"sites"``: every dropout is a
        mask site where it is.
    """
    _check_arguments(net, likelihood, tau, last_layer, keep, dropouts)
    copy_ = _copy(net)
    weighted = _weighted(copy_, keep)
    check_convertible(copy_, set(weighted))
    _freeze(copy_)  # what stays deterministic keeps its trained values, fixed (not Pyro parameters)
    gm = _trace(copy_)
    order = _layers_in_order(gm, weighted)
    convertible = set(order[-1:] if last_layer else order)
    placement = Placement()
    if gm is not None:
        functional_uses(gm, convertible)
        placement = place_dropouts(gm, convertible if dropouts == "weights" else set())
    placed = {str(n.target) for n in placement.placed if n.op == "call_module"}
    edited, mask_sites = _edit_graph(gm, placement) if gm is not None else (False, [])
    net_: nn.Module = (
        gm if edited and gm is not None else copy_
    )  # the traced forward only where the graph had to change
    to_pyro_module_(net_)  # containers as PyroModules: the sites are named by their path ("0.weight")
    model = _finish(
        net_, likelihood, tau, prior_length_scale, order, convertible, placement, placed, mask_sites
    )
    _check_output(model, _output_layer(gm), likelihood)
    model.untraced = gm is None
    return model


def _copy(net: nn.Module) -> nn.Module:
    """A copy to convert; a network that is one layer, in a container (its sites "net.0.weight")."""
    copy_ = copy.deepcopy(net)
    return nn.Sequential(copy_) if isinstance(copy_, WEIGHTED) else copy_


def _weighted(net: nn.Module, keep: Sequence[str]) -> list[str]:
    """The weight layers to make Bayesian: all but those kept (and those inside attention)."""
    names = {name for name, _ in net.named_modules()}
    unknown = sorted(set(keep) - names)
    if unknown:
        raise ValueError(f"from_module: keep names modules the network does not have: {unknown}")
    kept = kept_inside(net) | {n for n in names for k in keep if n == k or n.startswith(k + ".")}
    weighted = [n for n, m in net.named_modules() if isinstance(m, WEIGHTED) and n not in kept]
    if not weighted:
        raise ValueError(
            "from_module: the network has no nn.Linear, nn.Conv1d/2d/3d, "
            "nn.LSTM or nn.GRU layer to make Bayesian"
        )
    return weighted


def _output_layer(gm: fx.GraphModule | None) -> str | None:
    """The module whose call is the forward's output, if it is one."""
    if gm is None:
        return None
    out = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    return str(out.target) if isinstance(out, fx.Node) and out.op == "call_module" else None


def _check_output(model: ConvertedModel, output: str | None, likelihood: Any) -> None:
    """Refuse now a network whose last layer's outputs do not fit its likelihood (where the forward
    returns a layer's output; otherwise the first forward checks the outputs)."""
    last: Any = model.net.get_submodule(output) if output is not None else None
    if last is not None and isinstance(getattr(last, "out_features", None), int):
        check_outputs(likelihood, last.out_features, f"its last layer '{output}'")


def _finish(
    net: nn.Module,
    likelihood: Any,
    tau: float,
    length_scale: float,
    order: list[str],
    convertible: set[str],
    placement: Placement,
    placed: set[str],
    mask_sites: list[str],
) -> ConvertedModel:
    """Replace the dropouts and weight layers of ``net`` (in place) and wrap it with the likelihood."""
    rates: dict[str, float] = {}
    for name, module in list(net.named_modules()):
        if isinstance(module, ELEMENT_DROPOUTS + CHANNEL_DROPOUTS):
            site = name not in placed and module.p > 0
            channels = isinstance(module, CHANNEL_DROPOUTS)
            _replace(net, name, ModuleDropout(module.p, channels, name) if site else nn.Identity())
            mask_sites += [name] if site else []
        elif isinstance(module, nn.modules.batchnorm._BatchNorm):
            module.eval()  # the running statistics
        elif isinstance(
            module, nn.TransformerEncoderLayer | nn.TransformerEncoder | nn.TransformerDecoderLayer
        ):
            module.train()  # no fast path, which would skip the converted layers; its dropouts are sites
    for name in order:
        if name in convertible:
            rate = placement.rates.get(name, 0.0)
            rates[f"{name}.weight"] = rate
            _replace(net, name, bayesian(net.get_submodule(name), rate, length_scale))
    return ConvertedModel(net, likelihood, float(tau), rates, mask_sites)
