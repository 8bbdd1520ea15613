r"""Posterior predictive draws in vectorised chunks: MC dropout prediction at scale."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, cast

import pyro
import torch
from pyro import poutine
from pyro.poutine.trace_struct import Trace
from pyro.poutine.util import prune_subsample_sites, site_is_subsample

from .traces import Site, check_finite_inputs

__all__ = ["Predictions", "predict", "predict_from_samples", "predict_standard"]

_DRAWS = "_pyro_dropout_draws"


@dataclass
class Predictions:
    r"""Draws from the posterior predictive, ``T`` of them, with documented shapes.

    For a site inside a data plate of size ``N`` the shape is ``[T, N, *event]``; a global
    weight ``[out, in]`` comes out as ``[T, out, in]`` (no plate slots). ``T`` is dim 0.

    :ivar samples: every returned site. Likelihood sites hold posterior predictive draws
        :math:`y^{(t)} \sim p(y \mid x, \omega_t)`, also where data was passed.
    :ivar means: per likelihood site, the mean of :math:`p(y \mid x, \omega_t)` per draw
        (the function draw :math:`\hat y_t` for a Gaussian likelihood).
    :ivar variances: per likelihood site, its variance per draw (aleatoric noise, e.g. :math:`\tau^{-1}`).
    :ivar probs: per categorical/Bernoulli likelihood site, class probabilities ``[T, N, C]``.
    :ivar log_likelihood: per likelihood site given data, :math:`\log p(y_n \mid x_n, \omega_t)`,
        shape ``[T, N]``.
    :ivar observed: the data at those sites.
    :ivar distributions: the likelihood's distribution class per site.
    :ivar kinds: ``"latent"``, ``"deterministic"`` or ``"likelihood"`` for each returned site.
    """

    samples: dict[str, torch.Tensor] = field(default_factory=dict)
    means: dict[str, torch.Tensor] = field(default_factory=dict)
    variances: dict[str, torch.Tensor] = field(default_factory=dict)
    probs: dict[str, torch.Tensor] = field(default_factory=dict)
    log_likelihood: dict[str, torch.Tensor] = field(default_factory=dict)
    observed: dict[str, torch.Tensor] = field(default_factory=dict)
    distributions: dict[str, type] = field(default_factory=dict)
    kinds: dict[str, str] = field(default_factory=dict)

    @property
    def num_samples(self) -> int:
        for group in (self.samples, self.means, self.probs, self.log_likelihood):
            for value in group.values():
                return int(value.shape[0])
        return 0

    def __getitem__(self, name: str) -> torch.Tensor:
        return self.samples[name]

    def __contains__(self, name: object) -> bool:
        return name in self.samples

    def likelihood_sites(self) -> list[str]:
        """Names of the likelihood (observation) sites, in model order."""
        return list(self.distributions)

    def points(self, index: torch.Tensor | slice) -> Predictions:
        """The predictions at a subset of the data points (the first plate dim of the
        likelihood sites); latent and deterministic draws are left out."""
        lik = self.likelihood_sites()

        def pick(group: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
            return {k: v[:, index] for k, v in group.items() if k in lik}

        return Predictions(
            samples=pick(self.samples),
            means=pick(self.means),
            variances=pick(self.variances),
            probs=pick(self.probs),
            log_likelihood=pick(self.log_likelihood),
            observed={k: v[index] for k, v in self.observed.items()},
            distributions=dict(self.distributions),
            kinds={k: v for k, v in self.kinds.items() if v == "likelihood"},
        )


# --- helpers -------------------------------------------------------------------------------
def _device_of(*modules: Any) -> torch.device | None:
    for module in modules:
        if isinstance(module, torch.nn.Module):
            for tensor in (*module.parameters(), *module.buffers()):
                return tensor.device
    return None


def _to_device(args: tuple, kwargs: dict, device: torch.device | None) -> tuple[tuple, dict]:
    if device is None:
        return args, kwargs
    move = lambda v: v.to(device) if isinstance(v, torch.Tensor) else v  # noqa: E731
    return tuple(move(a) for a in args), {k: move(v) for k, v in kwargs.items()}


def _max_plate_nesting(trace: Trace) -> int:
    dims = [
        f.dim
        for site in trace.nodes.values()
        if site["type"] == "sample"
        for f in site["cond_indep_stack"]
        if f.vectorized and f.dim is not None and f.name != _DRAWS
    ]
    return -min(dims) if dims else 0


def _tidy(value: torch.Tensor, site: Site, event_dim: int, nesting: int, draws: int) -> torch.Tensor:
    """``[draws, *plate slots, *event]`` -> ``[draws, *enclosing plates, *event]``."""
    batch_dims = nesting + 1
    value = value.reshape((1,) * max(0, batch_dims + event_dim - value.dim()) + value.shape)
    value = value.expand((draws, *value.shape[1:]))
    enclosing = {f.dim for f in site["cond_indep_stack"] if f.vectorized and f.name != _DRAWS}
    keep = [0] + [1 + i for i in range(nesting) if (i - nesting) in enclosing]
    batch = [value.shape[i] for i in keep]
    return value.reshape(batch + list(value.shape[batch_dims:]))


def _chunks(total: int, size: int) -> Iterable[int]:
    while total > 0:
        yield min(size, total)
        total -= size


# --- the engine ----------------------------------------------------------------------------
def _predict(
    model: Callable,
    one_draw: Callable[[tuple, dict], dict[str, torch.Tensor]],
    draw_latents: Callable[[int, int, Trace, tuple, dict], Trace],
    args: tuple,
    kwargs: dict,
    num_samples: int,
    chunk_size: int | None,
    return_sites: Iterable[str] | None,
    device: torch.device | None,
) -> Predictions:
    if not (isinstance(num_samples, int) and num_samples >= 1):
        raise ValueError(f"num_samples must be a positive int, got {num_samples!r}")
    chunk = num_samples if chunk_size is None else chunk_size
    if not (isinstance(chunk, int) and chunk >= 1):
        raise ValueError(f"chunk_size must be a positive int, got {chunk_size!r}")
    args, kwargs = _to_device(args, kwargs, device)
    check_finite_inputs(args, kwargs)
    with torch.no_grad(), poutine.block():
        # the structure (plates, shapes) from one posterior draw, not from the prior, whose
        # draws can overflow (e.g. a log-variance head under a broad prior)
        with pyro.validation_enabled(False):
            prototype = poutine.trace(poutine.condition(model, one_draw(args, kwargs))).get_trace(
                *args, **kwargs
            )
    nesting = _max_plate_nesting(prototype)
    wanted = None if return_sites is None else set(return_sites)
    out = Predictions()
    buffers = _Buffers(num_samples)
    for size in _chunks(num_samples, chunk):
        with torch.no_grad(), poutine.block(), pyro.plate(_DRAWS, size, dim=-(nesting + 1)):
            latents = draw_latents(size, nesting, prototype, args, kwargs)
            trace = poutine.trace(poutine.replay(model, trace=latents)).get_trace(*args, **kwargs)
        trace = prune_subsample_sites(trace)
        for name, site in trace.nodes.items():
            if site["type"] != "sample" or site_is_subsample(site):
                continue
            _collect(name, site, name in latents.nodes, out, buffers, wanted, nesting, size)
        buffers.offset += size
    for (group, name), tensor in buffers.tensors.items():
        getattr(out, group)[name] = tensor
    return out


class _Buffers:
    """Outputs preallocated for all draws and filled chunk by chunk (no concatenation copy)."""

    def __init__(self, num_samples: int) -> None:
        self.num_samples, self.offset = num_samples, 0
        self.tensors: dict[tuple[str, str], torch.Tensor] = {}

    def put(self, group: str, name: str, value: torch.Tensor) -> None:
        key = (group, name)
        if key not in self.tensors:
            self.tensors[key] = value.new_empty((self.num_samples, *value.shape[1:]))
        self.tensors[key][self.offset : self.offset + value.shape[0]] = value


def _collect(
    name: str,
    site: Site,
    is_latent: bool,
    out: Predictions,
    buffers: _Buffers,
    wanted: set[str] | None,
    nesting: int,
    size: int,
) -> None:
    fn = site["fn"]

    def add(group: str, value: torch.Tensor, event_dim: int) -> None:
        buffers.put(group, name, _tidy(value, site, event_dim, nesting, size))

    deterministic = bool(site["infer"].get("_deterministic", False))
    likelihood = not (is_latent or deterministic)  # sampled by the model itself: an observation site
    observed = likelihood and bool(site["is_observed"])
    if wanted is None or name in wanted:
        # observed sites get a fresh posterior predictive draw; the others already hold one
        add("samples", fn.sample() if observed else site["value"], fn.event_dim)
        out.kinds[name] = "likelihood" if likelihood else "deterministic" if deterministic else "latent"
    if not likelihood:
        return
    out.distributions[name] = type(fn.base_dist if hasattr(fn, "base_dist") else fn)
    if observed:
        out.observed[name] = site["value"]
        add("log_likelihood", fn.log_prob(site["value"]), 0)
    probs = getattr(fn, "probs", None) if fn.support.is_discrete else None
    if probs is not None:
        if probs.dim() == len(fn.batch_shape):  # Bernoulli: one probability -> two classes
            probs = torch.stack([1 - probs, probs], dim=-1)
        add("probs", probs, 1)
        return
    try:
        add("means", fn.mean, fn.event_dim)
        add("variances", fn.variance, fn.event_dim)
    except NotImplementedError:
        pass


# --- public entry points -------------------------------------------------------------------
def predict(
    model: Callable,
    guide: Callable,
    *args: Any,
    num_samples: int = 1000,
    chunk_size: int | None = 100,
    return_sites: Iterable[str] | None = None,
    **kwargs: Any,
) -> Predictions:
    r"""MC-dropout prediction: ``num_samples`` draws of the weights, vectorised in chunks.

    Each chunk of ``chunk_size`` draws runs the guide and the model once, vectorised over
    the draws (one mask per draw, shared by all inputs: paper [1], §4), so peak working
    memory is set by ``chunk_size``, not by ``num_samples``. Tensors are moved to the
    device of the model's (or guide's) parameters. Pass observations as the model's
    usual argument to get :math:`\log p(y_n \mid x_n, \omega_t)` as well.

    Usage::

        pred = predict(model, guide, x_test, y_test, num_samples=1000)
        pred["mean"].shape             # [1000, N]: function draws
        pred.log_likelihood["obs"]     # [1000, N]

    :param return_sites: names of the sites whose draws to keep (default: all).
    :returns: :class:`Predictions`.

    References

    [1] Y. Gal, Z. Ghahramani. *Dropout as a Bayesian Approximation.* ICML 2016.
    """

    def draw(size: int, nesting: int, prototype: Trace, a: tuple, k: dict) -> Trace:
        return poutine.trace(guide).get_trace(*a, **k)

    def one_draw(a: tuple, k: dict) -> dict[str, torch.Tensor]:
        trace = poutine.trace(guide).get_trace(*a, **k)
        return {name: cast(torch.Tensor, site["value"]) for name, site in trace.iter_stochastic_nodes()}

    device = _device_of(model, guide)
    return _predict(model, one_draw, draw, args, kwargs, num_samples, chunk_size, return_sites, device)


def predict_from_samples(
    model: Callable,
    samples: dict[str, torch.Tensor],
    *args: Any,
    chunk_size: int | None = 100,
    return_sites: Iterable[str] | None = None,
    **kwargs: Any,
) -> Predictions:
    """Like :func:`predict`, for posterior samples ``{site: [T, *site shape]}`` (e.g. from MCMC)."""
    if not samples:
        raise ValueError("predict_from_samples: no samples given")
    num_samples = int(next(iter(samples.values())).shape[0])
    bad = {k: tuple(v.shape) for k, v in samples.items() if v.shape[0] != num_samples}
    if bad:
        raise ValueError(f"predict_from_samples: all samples need {num_samples} draws; got {bad}")
    device = _device_of(model)
    offset = [0]

    def draw(size: int, nesting: int, prototype: Trace, a: tuple, k: dict) -> Trace:
        start = offset[0]
        offset[0] += size
        trace = Trace()
        for name, value in samples.items():
            if name not in prototype.nodes:
                raise ValueError(f"predict_from_samples: site '{name}' is not in the model")
            node: Site = prototype.nodes[name]
            batch = len(node["fn"].batch_shape)
            value = value[start : start + size].to(device) if device else value[start : start + size]
            value = value.reshape((size,) + (1,) * (nesting - batch) + value.shape[1:])
            trace.add_node(name, type="sample", value=value, is_observed=False, fn=None, infer={})
        return trace

    def one_draw(a: tuple, k: dict) -> dict[str, torch.Tensor]:
        return {name: value[0].to(device) if device else value[0] for name, value in samples.items()}

    return _predict(model, one_draw, draw, args, kwargs, num_samples, chunk_size, return_sites, device)


def predict_standard(model: Callable, guide: Any, *args: Any, **kwargs: Any) -> Predictions:
    r""" "Standard dropout": one pass with the expected weights :math:`\mathbb{E}_q[W] = M`.

    The weight-averaging approximation to the MC-dropout predictive mean (paper [1], §4),
    computed from ``guide.median()``. Shapes are those of :func:`predict` with ``T = 1``.
    """
    medians = guide.median()
    samples = {k: v.unsqueeze(0) for k, v in medians.items()}
    return predict_from_samples(model, samples, *args, chunk_size=None, **kwargs)
