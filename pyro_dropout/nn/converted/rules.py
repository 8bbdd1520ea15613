r"""What each module of a network becomes when it is converted, and what is refused.

* ``nn.Linear`` and ``nn.Conv1d/2d/3d``: the library's layer (weight and bias sample sites,
  :class:`~pyro_dropout.nn.converted.fold.FoldedLinear`...), the trained values as the guide's
  starting means, the module's forward hooks kept.
* ``nn.LSTM`` and ``nn.GRU``: the library's recurrent layer. Its inter-layer ``dropout`` is
  torch's with ``masks="own"``: a new mask for every element of layer k's outputs at every step
  before layer k + 1. With ``masks="shared"`` it masks the input units of layers 2 and up, one
  mask per draw, tied over time (the variational RNN of paper 004, not the network's own).
* Refused, naming the module: a subclass of a weight layer with a forward of its own, a weight
  shared by two layers, a weight used outside its module (``F.linear(x, self.a.weight)``), a
  ``padding_mode`` other than zeros, ``nn.RNN`` with dropout,
  a weight computed by ``weight_norm`` or ``spectral_norm`` (a sample site is the weight itself),
  and, with ``masks="shared"``, ``nn.MultiheadAttention`` with dropout, a bidirectional or
  projected LSTM or GRU and a dropout module called more than once (with ``masks="own"`` such a
  recurrent layer stays deterministic, run by the network's own forward with torch's dropout).
  ``keep=[name]`` keeps a module deterministic (its trained values, fixed), which is exact.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from typing import Any

import torch
from torch import fx, nn

from .fold import FoldedConv1d, FoldedConv2d, FoldedConv3d, FoldedGRU, FoldedLinear, FoldedLSTM

__all__ = [
    "WEIGHTED",
    "bayesian",
    "check_convertible",
    "check_hook_norms",
    "functional_uses",
    "keep_parameters_visible",
    "kept_inside",
    "refuse_reused_dropouts",
]

WEIGHTED = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.LSTM, nn.GRU)
_CONVS = {nn.Conv1d: FoldedConv1d, nn.Conv2d: FoldedConv2d, nn.Conv3d: FoldedConv3d}
_BASE_FORWARD = {kind: kind.forward for kind in WEIGHTED}
_DROPOUT_MODULES = (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d)


def kept_inside(net: nn.Module, masks: str = "own") -> set[str]:
    """Modules that stay deterministic whatever is asked: those inside an ``nn.MultiheadAttention``
    (its projections are used as tensors by ``F.multi_head_attention_forward``) and, with
    ``masks="own"``, a bidirectional or projected LSTM or GRU (the library's recurrent layer is
    neither: the network's own runs, its trained weights and torch's dropout as they are)."""
    inside: set[str] = set()
    for name, module in net.named_modules():
        if isinstance(module, nn.MultiheadAttention):
            inside.update(f"{name}.{sub}" if name else sub for sub, _ in module.named_modules() if sub)
        if masks == "own" and _unconvertible_recurrent(module):
            inside.add(name)
    return inside


def _unconvertible_recurrent(module: nn.Module) -> bool:
    return isinstance(module, nn.LSTM | nn.GRU) and (
        module.bidirectional or bool(getattr(module, "proj_size", 0))
    )


def check_convertible(net: nn.Module, convertible: set[str], masks: str = "own") -> None:
    """Refuse, naming it, a module that cannot be converted exactly (see the module's docs)."""
    owners: dict[int, str] = {}
    refused: list[tuple[str, str]] = []
    for name, module in net.named_modules():
        if masks == "shared" and isinstance(module, nn.MultiheadAttention) and module.dropout > 0:
            raise ValueError(
                f"from_module(masks='shared'): '{name}' (nn.MultiheadAttention) drops attention "
                f"weights (dropout={module.dropout}) inside F.multi_head_attention_forward, a new mask "
                "for every row, which a mask shared by the rows of a draw cannot be: convert with "
                "masks='own' (the default), which keeps that dropout as the module draws it"
            )
        plain_rnn = isinstance(module, nn.RNN) and not isinstance(module, nn.LSTM | nn.GRU)
        if masks == "shared" and plain_rnn and module.dropout > 0:  # "own": torch's, as it draws
            raise ValueError(
                f"from_module(masks='shared'): '{name}' is an nn.RNN with dropout={module.dropout}; only "
                "LSTM and GRU convert: convert with masks='own' (the default), where it draws as torch's"
            )
        if name not in convertible:
            continue
        why = _unconvertible(name, module)
        if why:
            refused.append((name, why))
            continue
        for param in module.parameters(recurse=False):
            other = owners.setdefault(id(param), name)
            if other != name:
                raise ValueError(
                    f"from_module: '{other}' and '{name}' share a weight "
                    "(tied weights); one sample site cannot "
                    f"serve both layers' masks: keep them deterministic with keep=['{other}', '{name}']"
                )
    if refused:  # every such layer at once, and the one keep= that converts the rest
        names = ", ".join(f"'{n}'" for n, _ in refused)
        raise ValueError(
            "from_module: "
            + "; ".join(why for _, why in refused)
            + f"; keep them deterministic with keep=[{names}]"
            if len(refused) > 1
            else f"from_module: {refused[0][1]}; keep it deterministic with keep=[{names}]"
        )


def _unconvertible(name: str, module: nn.Module) -> str:
    """Why a weight layer cannot become the library's layer, or "" where it can."""
    kind = next(k for k in WEIGHTED if isinstance(module, k))
    norms = _padding_and_norms(name, module)
    if norms:
        return norms
    if type(module).forward is not _BASE_FORWARD[kind]:
        return (
            f"'{name}' is a {type(module).__name__}, a subclass of nn.{kind.__name__} with its own "
            "forward, which the Bayesian layer would replace"
        )
    if _unconvertible_recurrent(module):  # masks="shared" only (kept_inside keeps it otherwise)
        return f"'{name}' is bidirectional or projected; the library's {kind.__name__} is neither"
    if module._backward_hooks or module._backward_pre_hooks:
        return f"'{name}' has backward hooks, which the Bayesian layer would lose"
    return ""


def check_hook_norms(net: nn.Module) -> None:
    """Refuse the hook-based ``torch.nn.utils.weight_norm`` / ``spectral_norm`` (deprecated by
    torch): the weight they recompute before each call is not a leaf, and the network cannot be
    copied (torch refuses to deep-copy it)."""
    from torch.nn.utils.spectral_norm import SpectralNorm
    from torch.nn.utils.weight_norm import WeightNorm

    for name, module in net.named_modules():
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, WeightNorm | SpectralNorm):
                kind = "weight_norm" if isinstance(hook, WeightNorm) else "spectral_norm"
                raise ValueError(
                    f"from_module: '{name or type(net).__name__}' has torch.nn.utils.{kind} on its "
                    f"'{hook.name}', which recomputes it before each call, and the network cannot be "
                    f"copied: bake the present value in with torch.nn.utils.remove_{kind}(module) "
                    "(prediction is then exact), or use torch.nn.utils.parametrizations."
                    f"{kind} with keep=['{name}']"
                )


def _padding_and_norms(name: str, module: nn.Module) -> str:
    """Why a layer whose padding is not zeros, or whose weight a parametrization computes
    (``weight_norm``, ``spectral_norm``), cannot convert ("" where it can): a sample site is the
    weight itself, so the parametrization would be lost."""
    if getattr(module, "padding_mode", "zeros") != "zeros":
        return f"'{name}' has padding_mode={module.padding_mode!r}; only 'zeros' is supported"
    parametrized = sorted(getattr(module, "parametrizations", {}) or {})
    if not parametrized:
        return ""
    tensor = parametrized[0]
    return (
        f"'{name}' computes its {', '.join(parametrized)} by a parametrization "
        "(weight_norm, spectral_norm, ...), which a sample site, the weight itself, cannot keep: "
        "bake the present value in with torch.nn.utils.parametrize.remove_parametrizations("
        f"net.get_submodule('{name}'), '{tensor}') on a copy of the network (prediction is then exact; "
        "training learns the weight itself)"
    )


def functional_uses(gm: fx.GraphModule, convertible: set[str]) -> None:
    """Refuse a convertible layer's parameter read as a tensor in the forward (``self.a.weight``)."""
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            owner = str(node.target).rpartition(".")[0]
            if owner in convertible:
                raise ValueError(
                    f"from_module: '{node.target}' is used outside its module's forward (e.g. F.linear(x, "
                    f"self.{node.target})); it cannot be a sample site there: call the module, or keep it "
                    f"deterministic with keep=['{owner}']"
                )


def refuse_reused_dropouts(gm: fx.GraphModule) -> None:
    """With ``masks="shared"``: refuse a dropout module called more than once in the forward (each
    call draws its own masks; one mask site per module would share them, or drop one call)."""
    calls: dict[str, int] = {}
    for node in gm.graph.nodes:
        if node.op == "call_module" and isinstance(gm.get_submodule(str(node.target)), _DROPOUT_MODULES):
            calls[str(node.target)] = calls.get(str(node.target), 0) + 1
    reused = {name: count for name, count in calls.items() if count > 1}
    if reused:
        name, count = next(iter(reused.items()))
        raise ValueError(
            f"from_module(masks='shared'): the dropout '{name}' is called {count} times in the forward; "
            "each call draws masks of its own, which one mask site per module cannot give: convert "
            "with masks='own' (the default), or use a dropout module per call"
        )


class _VisibleParameters:
    """``module.parameters()`` of a converted network: the trained tensors, now fixed buffers or
    a Bayesian layer's starting means, in the order the module's parameters had. User code such as
    ``weight = next(self.parameters())`` (to make a hidden state of the right dtype and device)
    runs as written."""

    def __init__(self, module: nn.Module) -> None:
        self.module = weakref.ref(module)

    def __call__(self, recurse: bool = True) -> Iterator[torch.Tensor]:
        module = self.module()
        if module is None:
            return
        for part in module.modules() if recurse else (module,):
            yield from (t for t in part._parameters.values() if t is not None)
            for name in (*getattr(part, "frozen_parameters", ()), "start_weight", "start_bias"):
                value = part._buffers.get(name)
                if value is not None:
                    yield value

    def __deepcopy__(self, memo: dict) -> _VisibleParameters:
        module = self.module()
        return _VisibleParameters(memo.get(id(module), module))  # type: ignore[arg-type]

    def __reduce__(self) -> tuple:
        return (_VisibleParameters, (self.module(),))


def keep_parameters_visible(net: nn.Module) -> None:
    """Give every module of a converted network :class:`_VisibleParameters` as its ``parameters``."""
    for module in net.modules():
        object.__setattr__(module, "parameters", _VisibleParameters(module))


def _start(new: nn.Module, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
    new.register_buffer("start_weight", weight.detach().clone())  # the trained values: the start
    if bias is not None:
        new.register_buffer("start_bias", bias.detach().clone())


def _copy_hooks(old: nn.Module, new: nn.Module) -> None:
    for attribute in ("_forward_pre_hooks", "_forward_hooks", "_forward_pre_hooks_with_kwargs"):
        getattr(new, attribute).update(getattr(old, attribute))
    new._forward_hooks_with_kwargs.update(old._forward_hooks_with_kwargs)
    new._forward_hooks_always_called.update(old._forward_hooks_always_called)


def _recurrent(layer: nn.LSTM | nn.GRU, length_scale: float, network: bool) -> nn.Module:
    kind = FoldedLSTM if isinstance(layer, nn.LSTM) else FoldedGRU
    new = kind(
        layer.input_size,
        layer.hidden_size,
        layer.num_layers,
        bias=layer.bias,
        batch_first=layer.batch_first,
        length_scale=length_scale,
    )
    cells: Any = new.layers
    for k, cell in enumerate(cells):
        w_ih, w_hh = getattr(layer, f"weight_ih_l{k}"), getattr(layer, f"weight_hh_l{k}")
        b_ih, b_hh = (
            (getattr(layer, f"bias_ih_l{k}"), getattr(layer, f"bias_hh_l{k}")) if layer.bias else (None, None)
        )
        lstm = isinstance(layer, nn.LSTM)  # the library's LSTM has one bias per gate: b_ih + b_hh
        _start(cell.ih, w_ih, None if b_ih is None else (b_ih + b_hh if lstm else b_ih))
        _start(cell.hh, w_hh, None if lstm else b_hh)
        cell.ih.dropout = float(layer.dropout) if k > 0 else 0.0  # inter-layer dropout
        cell.hh.dropout = 0.0
        cell.ih.network_masks = cell.hh.network_masks = network
    new.step_dropout = float(layer.dropout) if network else 0.0  # torch's: a mask per step; else tied
    return new


def bayesian(layer: Any, rate: float, length_scale: float, network: bool = False) -> nn.Module:
    """The Bayesian layer for a trained ``layer`` (its values as the starting means); ``network``:
    the network's own dropout draws its masks (``masks="own"``)."""
    if isinstance(layer, nn.LSTM | nn.GRU):
        new: Any = _recurrent(layer, length_scale, network)
    elif isinstance(layer, nn.Linear):
        new = FoldedLinear(
            layer.in_features,
            layer.out_features,
            layer.bias is not None,
            length_scale=length_scale,
            dropout=rate,
        )
        _start(new, layer.weight, layer.bias)
    else:
        kind = next(k for t, k in _CONVS.items() if isinstance(layer, t))
        sizes = (layer.kernel_size, layer.stride, layer.padding, layer.dilation, layer.groups)
        new = kind(
            layer.in_channels,
            layer.out_channels,
            *sizes,
            layer.bias is not None,
            length_scale=length_scale,
            dropout=rate,
        )
        _start(new, layer.weight, layer.bias)
    new.network_masks = network
    _copy_hooks(layer, new)
    dtype = next((t.dtype for t in layer.parameters()), None) or next(
        (t.dtype for t in layer.buffers()), torch.get_default_dtype()
    )
    return new.to(dtype)
