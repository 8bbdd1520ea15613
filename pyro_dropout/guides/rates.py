"""The drop probabilities a ``DropoutGuide`` is given: one for all, a dict per site, or a callable."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any

import torch

from ..distributions import check_mask_dim, validate_dropout_rate
from ..ops import caller_stacklevel

__all__ = [
    "DEFAULT_RATE",
    "DropoutSpec",
    "Rate",
    "check_spec",
    "declared_mask_dim",
    "default_rate",
    "network_rate",
    "site_rate",
    "warn_about_masks",
]

DEFAULT_RATE = 0.1  # a weight's drop probability when neither the guide nor the site gives one

Rate = float | torch.Tensor
DropoutSpec = float | torch.Tensor | Mapping[str, Rate] | Callable[[str, Any], Rate]


def check_spec(spec: DropoutSpec | None, what: str) -> None:
    """Check the rates of a spec that are known before the model runs (a dict's, a number)."""
    if spec is None:
        return
    if isinstance(spec, Mapping):
        for name, p in spec.items():
            validate_dropout_rate(p, f"DropoutGuide: {what} for site '{name}'")
    elif not callable(spec):
        validate_dropout_rate(spec, f"DropoutGuide: {what}")


def declared_mask_dim(name: str, site: dict) -> int | None:
    """The event dim whose units a site's masks drop: ``infer={"dropout_dim": d}`` (``-2`` for a
    weight stored ``[in, out]`` and used as ``x @ W``), else the inputs of ``[out, in, ...]``."""
    fn = site["fn"]
    what = f"site '{name}': infer['dropout_dim']"
    return check_mask_dim(site["infer"].get("dropout_dim"), fn.event_dim, what)


def default_rate(site: dict, matrix: bool, name: str = "") -> Rate:
    """A site's rate when the guide is given none: the site's own (``infer={"dropout": p}``, or a
    layer's ``dropout=``), else :data:`DEFAULT_RATE` for a weight, except a weight with a single
    input unit (a network on 1-d inputs), which gets 0: masking its only input would make a
    fraction p of the draws constant functions. Vectors (biases) get 0."""
    declared = site["infer"].get("dropout")
    if declared is not None:
        return declared
    if not matrix:
        return 0.0
    fn = site["fn"]
    units = fn.event_shape[declared_mask_dim(name, site)]
    return 0.0 if units == 1 else DEFAULT_RATE


def site_rate(spec: DropoutSpec | None, concrete: bool, name: str, site: dict, matrix: bool) -> Rate:
    """The rate of site ``name`` from a ``dropout`` / ``init_dropout`` spec, checked against the
    site (a tensor must broadcast to its batch shape; a rate must be below 1 in its dtype)."""
    what = "init_dropout" if concrete else "dropout"
    if spec is None:
        p = default_rate(site, matrix, name)
        if isinstance(p, int | float) and not isinstance(p, bool) and p == 0:
            return 0.0
    elif isinstance(spec, Mapping):
        if name in spec:
            p = spec[name]
        elif matrix:
            raise ValueError(
                f"DropoutGuide: the {what} dict has no rate for the weight site '{name}' "
                "(give 0.0 for no dropout)"
            )
        else:
            return 0.0
    elif not matrix:
        return 0.0
    else:
        p = spec(name, site) if callable(spec) else spec
    validate_dropout_rate(p, f"DropoutGuide: {what} for site '{name}'", site["value"].dtype)
    if not isinstance(p, torch.Tensor):
        return float(p)
    batch = site["fn"].batch_shape
    try:
        fits = torch.broadcast_shapes(p.shape, batch) == batch
    except RuntimeError:
        fits = False
    if not fits:
        raise ValueError(
            f"DropoutGuide: the {what} tensor for site '{name}' has shape {tuple(p.shape)}; it must "
            f"broadcast to the site's batch shape {tuple(batch)}"
        )
    if concrete and not bool((p > 0).all()):
        raise ValueError(f"DropoutGuide: learned rates for site '{name}' must start above 0")
    return p.detach().clone()


def network_rate(name: str, site: dict, spec: DropoutSpec | None, concrete: bool) -> float | None:
    """The rate of a converted network's weight whose masks its own dropout draws (``masks="own"``,
    ``infer["network_masks"]``): the module's, for the KL (the guide draws no mask of its own);
    ``None`` where the guide's ``spec`` gives a weight no dropout feeds (rate 0) a rate of its own.
    A spec that would change a network dropout's rate is refused, and so is ``concrete`` where the
    rate is not made by dropout modules (``infer["learnable_rate"]``: the front door learns those)."""
    p = float(site["infer"].get("dropout") or 0.0)
    given = spec is not None and not (isinstance(spec, Mapping) and name not in spec)
    if p == 0 and given:
        return None
    if given or (concrete and p > 0 and not site["infer"].get("learnable_rate")):
        what = "init_dropout=" if concrete else "dropout="
        why = f"{what} cannot change that rate" if given else "concrete=True cannot learn it"
        raise ValueError(
            f"DropoutGuide: site '{name}' is a weight of a network converted with masks='own', whose "
            f"own dropout draws its masks (p = {p:g}); {why}: give rates only for the weights no "
            "dropout feeds (a dict), set the module's p before converting, or convert with "
            "from_module(net, masks='shared') for masks the guide draws (and learns, with "
            "concrete=True)"
        )
    return p


def _unplated_dims(site: dict) -> int:
    """Batch dims of a site not made by a plate: dims a weight declared ``.to_event(1)`` leaves."""
    plated = {f.dim for f in site["cond_indep_stack"] if f.vectorized and f.dim is not None}
    batch = site["fn"].batch_shape
    return sum(1 for i in range(-len(batch), 0) if i not in plated and batch[i] > 1)


def warn_about_masks(trace: Any, roles: Mapping[str, Any], concrete: bool, defaults: bool) -> None:
    """Warn, naming them, about weight-like sites the guide leaves unmasked because of how they
    are declared (a matrix with ``.to_event(1)``: its rows look like a batch), and when the
    default rates (``defaults``: none given) mask no site at all (every draw the same function)."""
    for name, site in trace.iter_stochastic_nodes():
        role = roles[name]
        if role.masked and role.event_dim < 2 and _unplated_dims(site):
            warnings.warn(
                f"DropoutGuide: site '{name}' has shape {tuple(site['value'].shape)} with event_dim "
                f"{role.event_dim}: a weight matrix declared .to_event({role.event_dim}) gets no dropout; "
                "declare it .to_event(2) (rows = outputs, columns = inputs) to mask its inputs; a weight "
                "stored [in, out] (used as x @ w) declares its mask axis too, "
                "pyro.sample(..., infer={'dropout_dim': -2}), so that its "
                "masks drop inputs (rows), not outputs",
                stacklevel=3,
            )
    weights = [r for r in roles.values() if r.masked and r.event_dim >= 2]
    # a network's own dropout: its mask sites, or weights whose masks its modules draw
    own_dropout = any(
        getattr(r, "prior", None) is not None or getattr(r, "network", False) for r in roles.values()
    )
    if defaults and not concrete and weights and not own_dropout and all(_is_zero(r.p) for r in weights):
        warnings.warn(
            "DropoutGuide: the default rates mask no site (every weight's declared rate is 0, as in a "
            "converted network without dropout, or it has a single input unit), so every draw is the "
            "same function: give dropout= or declare rates on the weights",
            stacklevel=caller_stacklevel(),
        )


def check_weights_outside_data_plates(trace: Any, roles: Mapping[str, Any]) -> None:
    """Refuse a weight matrix drawn inside the innermost plate of an observed site (the data
    plate): a layer called inside ``with pyro.plate("data", N)`` gets one weight per data point,
    a different model from the network meant, and shapes that break far from the cause."""
    data_plates = {}
    for name, site in trace.nodes.items():
        if site["type"] == "sample" and site["is_observed"]:
            frames = [f for f in site["cond_indep_stack"] if f.vectorized and f.dim is not None]
            if frames:
                data_plates[max(frames, key=lambda f: f.dim).name] = name
    for name, site in trace.iter_stochastic_nodes():
        if not (roles[name].masked and roles[name].event_dim >= 2):
            continue
        inside = [f.name for f in site["cond_indep_stack"] if f.name in data_plates]
        if inside:
            raise ValueError(
                f"DropoutGuide: the weight site '{name}' is drawn inside plate '{inside[0]}', the data plate "
                f"of the observed site '{data_plates[inside[0]]}', so each data point would get weights "
                "of its own (a layer called inside `with pyro.plate(...)`); compute the network's "
                "output before the plate, as Pyro's tutorials do: `logits = self.out(h)`, then "
                "`with pyro.plate(...): pyro.sample(..., obs=y)`"
            )


def _is_zero(p: Rate) -> bool:
    return bool((torch.as_tensor(p) == 0).all())
