r"""A trained ``torch.nn.Module`` as a Bayesian model for :class:`~pyro_dropout.guides.DropoutGuide`.

:func:`from_module` copies the network and replaces its weight layers (``nn.Linear``,
``nn.Conv1d/2d/3d``, ``nn.LSTM``, ``nn.GRU``) by the library's: weights and biases that are sample
sites with ``QuantisedGaussian(0, 1/l)`` priors, the trained values as the guide's starting means.
Its dropouts draw their masks in one of two ways (``masks=``):

* ``"own"`` (the default): as the network draws them. Every dropout stays where the network has
  it (modules, ``F.dropout``, attention dropout inside ``nn.MultiheadAttention``, a module called
  twice) and draws a new mask for every element of every row at every call; the network runs as
  in MC dropout (training mode, batch norm on its running statistics), the draws folded into its
  batch. Each point's predictive is the network's own MC dropout, and the draws of different
  points are independent. A dropout whose mask is a mask of the next layer's input units gives
  that layer's weight the KL of its rate (:class:`~pyro_dropout.distributions.NetworkDropout`).
* ``"shared"``: one draw is one function, its masks shared by every row it predicts (the same
  draws across chunks and calls: what a joint predictive over points, BatchBALD, needs). A
  dropout becomes the variational family of the layer it feeds where its mask is a mask of that
  layer's input units, a mask site where it is elsewhere
  (:mod:`~pyro_dropout.nn.converted.placement`); where a shared mask cannot have the network's
  distribution for each point (a dropout before a layer that sees tokens, a module called twice,
  attention dropout) the conversion or the first run refuses, naming the module.

Batch norm runs with its running statistics. The forward runs as written, on a batch of the shape
it expects (:mod:`~pyro_dropout.nn.converted.fold`), with a self-check that falls back to one draw
at a time (:mod:`~pyro_dropout.nn.converted.model`). ``predict_standard`` (the expected weights)
gives ``net.eval()(x)``. What converts and what is refused: docs/own-model.md.

```python
model = from_module(trained_net, likelihood="categorical")
guide = DropoutGuide(model)                      # the net's dropout, its weights as means
guide(x, y)
pred = predict(model, guide, x_test)
```
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable, Sequence
from typing import Any, cast

from pyro.nn.module import PyroModule, to_pyro_module_
from torch import fx, nn

from ..ops import is_positive_number
from .converted.dropout_sites import ModuleDropout
from .converted.likelihoods import check_likelihood, check_outputs
from .converted.model import ConvertedModel
from .converted.placement import (
    CHANNEL_DROPOUTS,
    ELEMENT_DROPOUTS,
    Placement,
    dropout_of,
    place_dropouts,
    share_dropouts,
)
from .converted.rules import (
    WEIGHTED,
    bayesian,
    check_convertible,
    check_hook_norms,
    functional_uses,
    keep_parameters_visible,
    kept_inside,
)

__all__ = ["MASKS", "ConvertedModel", "from_module"]

MASKS = ("own", "shared")
_NORMS = (nn.modules.batchnorm._BatchNorm, nn.modules.instancenorm._InstanceNorm)


def _freeze(net: nn.Module) -> None:
    """Every parameter of ``net`` as a buffer: fixed, and not a ``pyro.param`` once a PyroModule
    (their names kept in ``frozen_parameters``, for the converted ``parameters()``)."""
    for module in net.modules():
        names = list(module._parameters)
        for name in names:
            value = module._parameters.pop(name)
            module.register_buffer(name, None if value is None else value.detach().clone())
        object.__setattr__(module, "frozen_parameters", tuple(names))


def _replace(parent: nn.Module, name: str, new: nn.Module) -> None:
    *path, last = name.split(".")
    for part in path:
        parent = getattr(parent, part)
    order = list(parent._modules)
    setattr(parent, last, new)  # a PyroModule names the new layer's sites by its path here
    parent._modules = type(parent._modules)((key, parent._modules[key]) for key in order)  # keep the order


def _trace(net: nn.Module, masks: str) -> fx.GraphModule | None:
    try:
        return fx.symbolic_trace(net)
    except Exception as error:  # torch.fx raises many kinds on a forward it cannot follow
        if masks == "shared":
            warnings.warn(
                "from_module(masks='shared'): could not trace the forward of "
                f"{type(net).__name__} ({type(error).__name__}: {error}); every dropout module stays "
                "where it is as a mask site, and a functional dropout (F.dropout) in the forward is "
                "refused when it runs",
                stacklevel=3,
            )
        return None  # masks="own": the forward runs as written; the weights' KL takes p = 0


def _layers_in_order(gm: fx.GraphModule | None, weighted: list[str]) -> list[str]:
    if gm is None:
        return weighted
    called = [str(n.target) for n in gm.graph.nodes if n.op == "call_module"]
    return [name for name in dict.fromkeys(called) if name in weighted] + [
        w for w in weighted if w not in called
    ]


def _check_arguments(net: Any, likelihood: Any, tau: Any, last_layer: Any, keep: Any, choices: dict) -> None:
    if not isinstance(net, nn.Module):
        raise TypeError(f"from_module: net must be a torch.nn.Module, got {type(net).__name__}")
    check_hook_norms(net)
    check_likelihood(likelihood)
    if not is_positive_number(tau):
        raise ValueError(f"from_module: tau must be a positive finite number, got {tau!r}")
    if not isinstance(last_layer, bool):
        raise TypeError(f"from_module: last_layer must be True or False, got {last_layer!r}")
    if isinstance(keep, str) or not all(isinstance(k, str) for k in keep):
        raise TypeError(f"from_module: keep must be a list of module names, got {keep!r}")
    for option, (value, allowed) in choices.items():
        if not isinstance(value, str) or value not in allowed:
            raise ValueError(
                f"from_module: {option} must be " + " or ".join(repr(a) for a in allowed) + f", got {value!r}"
            )


def from_module(
    net: nn.Module,
    likelihood: str | Callable = "normal",
    *,
    tau: float = 1.0,
    prior_length_scale: float = 1e-2,
    last_layer: bool = False,
    keep: Sequence[str] = (),
    masks: str = "own",
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
    :param keep: modules to keep deterministic (their trained values, fixed); a layer whose parameters
        are frozen (``requires_grad=False``) in a network where others train is kept too (a PEFT
        model's base layers, a frozen backbone).
    :param masks: ``"own"``: every dropout draws its masks as the network does (its own MC
        dropout); ``"shared"``: one mask per draw, shared by the rows it predicts (a draw is one
        function), refused where that changes a point's predictive (the module's docs).
    :param dropouts: ``"weights"``: a dropout that masks the inputs of the layer it feeds is that
        layer's family (with ``masks="shared"``; what Concrete dropout learns); ``"sites"``: every
        dropout is a mask site (with ``masks="own"``: every weight's KL is that of rate 0).
    """
    choices = {"masks": (masks, MASKS), "dropouts": (dropouts, ("weights", "sites"))}
    _check_arguments(net, likelihood, tau, last_layer, keep, choices)
    copy_ = _copy(net)
    weighted = _weighted(copy_, keep, masks)
    check_convertible(copy_, set(weighted), masks)
    copy_.train()  # traced as MC dropout runs it: F.dropout(x, training=self.training) drops
    source = _source(copy_) if masks == "own" else None  # never converted: its own forward runs
    gm = _trace(copy_, masks)  # before the parameters are frozen: fx records them as attributes
    if not weighted and not _has_dropout(copy_, gm):
        raise ValueError(
            "from_module: the network has no nn.Linear, nn.Conv1d/2d/3d, nn.LSTM or nn.GRU layer to make "
            "Bayesian, and no dropout: every MC-dropout draw would be the same function"
        )
    _freeze(copy_)  # what stays deterministic keeps its trained values, fixed (not Pyro parameters)
    order = _layers_in_order(gm, weighted)
    convertible = set(order[-1:] if last_layer else order)
    placement = _placement(gm, convertible, dropouts)
    if masks == "own":
        _lora_rates(copy_, convertible, placement)
    net_, mask_sites, placed = (
        share_dropouts(copy_, gm, placement) if masks == "shared" else (copy_, [], None)
    )
    _allow_pyro_mixins(net_)
    to_pyro_module_(net_)  # containers as PyroModules: the sites are named by their path ("0.weight")
    own = masks == "own" and _has_dropout(copy_, gm)  # its weights' masks are the network's
    model = _finish(
        net_, (likelihood, tau, prior_length_scale, own), order, convertible, placement, placed, source
    )
    model.masks, model.untraced, model.mask_sites = masks, gm is None, model.mask_sites + mask_sites
    model.functional_dropouts = _functional_dropouts(gm)
    if masks == "own":  # the weight sites whose rate its dropout modules make (concrete=True learns it)
        model.rate_sources = {f"net.{k}.weight": v for k, v in placement.sources.items() if k in convertible}
    keep_parameters_visible(net_)
    _check_output(model, _output_layer(gm), likelihood)
    return model


PyroModuleMeta = type(PyroModule)  # Pyro's metaclass of PyroModule (it caches the mixins it makes)
_METAS: dict[type, type] = {}


def _allow_pyro_mixins(net: nn.Module) -> None:
    """Let ``PyroModule[cls]`` be made for every module class of ``net``: Pyro's mixin of a class
    whose metaclass is not ``type`` (PEFT's LoRA layers are ``ABC``s) is refused by Python (a
    metaclass conflict), so it is made here with a metaclass of both, and put where Pyro looks for
    the mixins it made (its cache), the same class Pyro's own would be."""
    for module in net.modules():
        _pyro_mixin(type(module))


def _pyro_mixin(cls: type) -> type:
    cache = PyroModuleMeta._pyro_mixin_cache
    if cls in cache or type(cls) is type or issubclass(cls, PyroModule):
        return PyroModule[cls]  # (nn.Module's is PyroModule itself)
    bases = [_pyro_mixin(b) for b in cls.__bases__ if issubclass(b, nn.Module)]
    meta = _METAS.get(type(cls))
    if meta is None:  # one metaclass of both per metaclass: the mixins of a hierarchy share it
        meta = _METAS[type(cls)] = type(f"Pyro{type(cls).__name__}", (PyroModuleMeta, type(cls)), {})
    mixin = meta(f"Pyro{cls.__name__}", (cls, *bases), {})
    cache[cast(type[nn.Module], cls)] = cast(Any, mixin)
    return mixin


def _source(net: nn.Module) -> nn.Module:
    """A copy of the network as it is, in the modes MC dropout runs it in (training, batch norm on
    its running statistics), its parameters fixed (``requires_grad`` off; the draws' weights are put
    in for the converted layers' by :class:`~.converted.source.SourceForward`; the others keep their
    values). Still parameters: a forward that reads ``next(self.parameters())`` runs as written."""
    source = copy.deepcopy(net)
    source.requires_grad_(False)
    for module in source.modules():
        if isinstance(module, _NORMS):
            module.eval()
    return source


def _placement(gm: fx.GraphModule | None, convertible: set[str], dropouts: str) -> Placement:
    """Where the dropouts go (:mod:`~pyro_dropout.nn.converted.placement`), once the layers' weights
    are known to be used by their modules only."""
    if gm is None:
        return Placement()
    functional_uses(gm, convertible)
    return place_dropouts(gm, convertible if dropouts == "weights" else set())


def _lora_rates(net: nn.Module, convertible: set[str], placement: Placement) -> None:
    """A LoRA adapter's own dropout (PEFT's ``lora_dropout[key]``) masks the inputs of its
    ``lora_A[key]``: that layer's rate, whether or not torch.fx could follow the forward."""
    for name, module in net.named_modules():
        drops, downs = getattr(module, "lora_dropout", None), getattr(module, "lora_A", None)
        if not isinstance(drops, nn.ModuleDict) or not isinstance(downs, nn.ModuleDict):
            continue
        for key, drop in drops.items():
            layer = f"{name}.lora_A.{key}" if name else f"lora_A.{key}"
            rate = float(getattr(drop, "p", 0.0)) if isinstance(drop, nn.Dropout) else 0.0
            if layer in convertible and rate > 0 and layer not in placement.rates:
                placement.rates[layer] = rate
                placement.sources[layer] = [f"{name}.lora_dropout.{key}" if name else f"lora_dropout.{key}"]


def _has_dropout(net: nn.Module, gm: fx.GraphModule | None) -> bool:
    """Whether the network draws dropout masks anywhere: a dropout module, attention or recurrent
    dropout, or a functional dropout in its traced forward (a forward torch.fx cannot follow may
    call one: taken to)."""
    for module in net.modules():
        rate = getattr(module, "p" if isinstance(module, nn.modules.dropout._DropoutNd) else "dropout", 0)
        if isinstance(module, nn.modules.dropout._DropoutNd | nn.MultiheadAttention | nn.RNNBase) and rate:
            return True
    if gm is None:
        return True
    return any((dropout_of(gm, node) or (0.0, False))[0] > 0 for node in gm.graph.nodes)


def _functional_dropouts(gm: fx.GraphModule | None) -> dict[str, float]:
    """The dropout calls of the traced forward that no module makes (``F.dropout(h, 0.5)``), by
    the node's name in the trace, with their rates."""
    found: dict[str, float] = {}
    if gm is None:
        return found
    for node in gm.graph.nodes:
        rate = dropout_of(gm, node) if node.op == "call_function" else None
        if rate is not None and rate[0] > 0:
            found[f"forward: {node.name}"] = rate[0]
    return found


def _copy(net: nn.Module) -> nn.Module:
    """A copy to convert; a network that is one layer, in a container (its sites "net.0.weight")."""
    copy_ = copy.deepcopy(net)
    return nn.Sequential(copy_) if isinstance(copy_, WEIGHTED) else copy_


def _weighted(net: nn.Module, keep: Sequence[str], masks: str) -> list[str]:
    """The weight layers to make Bayesian: all but those kept (and those inside attention). With
    ``masks="own"`` there may be none (a network of layers of its own kind, a graph network's): its
    own MC dropout needs no Bayesian layer, and nothing is refined."""
    names = {name for name, _ in net.named_modules()}
    unknown = sorted(set(keep) - names)
    if unknown:
        raise ValueError(f"from_module: keep names modules the network does not have: {unknown}")
    kept = kept_inside(net, masks) | {n for n in names for k in keep if n == k or n.startswith(k + ".")}
    kept |= _frozen(net)
    weighted = [n for n, m in net.named_modules() if isinstance(m, WEIGHTED) and n not in kept]
    if not weighted and masks != "own":
        raise ValueError(
            "from_module: the network has no nn.Linear, nn.Conv1d/2d/3d, "
            "nn.LSTM or nn.GRU layer to make Bayesian"
        )
    return weighted


def _frozen(net: nn.Module) -> set[str]:
    """The weight layers the user froze (no parameter of theirs trains) in a network where others
    train: a PEFT model's base layers, a frozen backbone under a trained head. They keep their
    values; only what trains is refined. A network frozen whole (for inference) freezes nothing."""
    if not any(p.requires_grad for p in net.parameters()):
        return set()
    return {
        name
        for name, module in net.named_modules()
        if isinstance(module, WEIGHTED)
        and any(True for _ in module.parameters(recurse=False))
        and not any(p.requires_grad for p in module.parameters(recurse=False))
    }


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
    settings: tuple[Any, float, float, bool],
    order: list[str],
    convertible: set[str],
    placement: Placement,
    placed: set[str] | None,
    source: nn.Module | None = None,
) -> ConvertedModel:
    """Replace the weight layers of ``net`` (in place), and with ``masks="shared"`` (``placed``: the
    dropout modules that became a layer's family) its dropouts; set the modes MC dropout runs in;
    wrap it with the likelihood.
    ``settings``: the likelihood, tau, the prior length-scale, and whether the network's dropout
    draws the masks of its weights."""
    likelihood, tau, length_scale, own = settings
    shared = placed is not None
    mask_sites: list[str] = []
    for name, module in list(net.named_modules()):
        if isinstance(module, _NORMS):
            module.eval()  # the running statistics
        elif shared and isinstance(module, ELEMENT_DROPOUTS + CHANNEL_DROPOUTS):
            site = name not in (placed or set()) and module.p > 0
            channels = isinstance(module, CHANNEL_DROPOUTS)
            _replace(net, name, ModuleDropout(module.p, channels, name) if site else nn.Identity())
            mask_sites += [name] if site else []
    rates: dict[str, float] = {}
    for name in order:
        if name in convertible:
            rate = placement.rates.get(name, 0.0)
            rates[f"{name}.weight"] = rate
            _replace(net, name, bayesian(net.get_submodule(name), rate, length_scale, own))
    return ConvertedModel(net, likelihood, float(tau), rates, mask_sites, source)
