"""Traces and per-site terms shared by :class:`DropoutELBO` and :class:`BBAlpha`."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any, cast

import pyro
import torch
from pyro import poutine
from pyro.distributions.util import scale_and_mask
from pyro.infer.util import is_validation_enabled, torch_item
from pyro.poutine.trace_struct import Trace
from pyro.poutine.util import prune_subsample_sites
from pyro.util import check_model_guide_match, warn_if_nan
from torch.distributions import kl_divergence

from ..distributions import MaskedWeight, base_prior
from ..guards import signature
from .batched_errors import explain_batched_failure
from .batching_check import describe_mismatch, particles_mismatch
from .divergence import backward_checked
from .input_checks import check_finite_inputs, checking_inside, has_non_finite
from .likelihood_checks import PARTICLE_PLATE, check_likelihood_site, check_targets
from .penalty import closed_form_kl
from .per_example import MeanWeights, replay_per_example
from .recorded.graph import GraphLoss

MAX_GRAPH_LOSSES = 4  # the (model, guide) pairs whose recorded losses one loss object keeps

__all__ = [
    "PARTICLE_PLATE",
    "UNSEEN_SITE",
    "DropoutTraceMixin",
    "check_finite_inputs",
    "importance_trace",
    "latent_penalty",
    "likelihood_sites",
]

Site = Any  # a node of a Pyro trace (``pyro.poutine.runtime.Message``)


def _is_likelihood(name: str, site: Site) -> bool:
    return bool(site["is_observed"]) and not site["infer"].get("_deterministic", False)


def _parameters(model: Callable, guide: Callable) -> Iterator[tuple[str, torch.Tensor]]:
    """The parameters a step updates, by name, read only when a check needs them: Pyro's
    global param store, or, with ``pyro.settings`` ``module_local_params=True`` (the store then
    holds none), the model's and the guide's own module parameters."""
    if not pyro.settings.get("module_local_params"):
        yield from pyro.get_param_store().named_parameters()
        return
    for part in (model, guide):
        if isinstance(part, torch.nn.Module):
            yield from part.named_parameters()


def likelihood_sites(trace: Trace) -> Iterator[tuple[str, Site]]:
    """Observed sample sites of a trace, excluding ``pyro.deterministic`` records."""
    for name, site in trace.nodes.items():
        if site["type"] == "sample" and _is_likelihood(name, site):
            yield name, site


def importance_trace(
    model: Callable,
    guide: Callable,
    args: tuple,
    kwargs: dict,
    max_plate_nesting: float,
    check_finite: bool = True,
    per_example: bool = False,
) -> tuple[Trace, Trace]:
    """Run the guide, replay the model against it, and score only the likelihood sites.

    Unlike Pyro's ``get_importance_trace`` this computes no guide log-densities and no
    prior log-densities of latent sites: those enter through :func:`latent_penalty`.
    With ``per_example=True`` every masked weight (a dropout site over input units) is
    replayed as its mean and masked per example where the model uses it
    (:mod:`pyro_dropout.nn.masking`).
    """
    guide_trace = poutine.trace(MeanWeights()(guide) if per_example else guide).get_trace(*args, **kwargs)
    if per_example:
        model_trace = replay_per_example(model, guide_trace, args, kwargs)
    else:
        model_trace = poutine.trace(poutine.replay(model, trace=guide_trace)).get_trace(*args, **kwargs)
    if is_validation_enabled():
        check_model_guide_match(model_trace, guide_trace, max_plate_nesting)
    guide_trace = prune_subsample_sites(guide_trace)
    model_trace = prune_subsample_sites(model_trace)
    if check_finite and checking_inside():
        for name, site in likelihood_sites(model_trace):
            if has_non_finite(site["value"]):
                raise ValueError(f"observed data at site '{name}' contains NaN or inf")
    for name, site in likelihood_sites(model_trace):
        check_targets(name, site)
    model_trace.compute_log_prob(site_filter=_is_likelihood)
    for name, site in likelihood_sites(model_trace):
        check_likelihood_site(name, site, max_plate_nesting)
    return model_trace, guide_trace


def _summed(term: Any, site: Site) -> torch.Tensor:
    term = scale_and_mask(term, scale=site["scale"], mask=site["mask"])
    if isinstance(term, torch.Tensor):
        return term if term.dim() == 0 else term.sum()
    return torch.as_tensor(term * math.prod(site["fn"].batch_shape))


def _site_penalty(name: str, model_site: Site, guide_site: Site) -> torch.Tensor:
    q, p = guide_site["fn"], model_site["fn"]
    try:
        return _summed(kl_divergence(q, p), guide_site)
    except NotImplementedError as e:
        if isinstance(q, MaskedWeight):
            raise ValueError(
                f"site '{name}': no analytic KL between the dropout family {type(q).__name__} and "
                f"the prior {type(base_prior(p)).__name__} ({e}); dropout sites never fall back to "
                "Monte Carlo: give the site a QuantisedGaussian or Normal prior"
            ) from e
        if not getattr(q, "has_rsample", False):
            raise ValueError(f"site '{name}': the guide's {type(q).__name__} is not reparameterised") from e
    value = guide_site["value"]
    return _summed(q.log_prob(value), guide_site) - _summed(p.log_prob(value), model_site)


# why an autoguide lacks a site the model has, and the remedy (the losses' and predict's errors)
UNSEEN_SITE = (
    "An autoguide (DropoutGuide) knows the sites of the run of the model it was set up on, its "
    "first call; if a branch of the forward (on the data, say) skipped this site then, sample "
    "every weight on every run (call each layer, or read its weights, before the branch)"
)


def latent_penalty(model_trace: Trace, guide_trace: Trace) -> torch.Tensor:
    r""":math:`\sum_{\text{latent sites}} \mathrm{KL}(q\,\|\,p)`, summed over vectorised particles.

    Dropout sites use their analytic KL (an error if none is registered); other sites
    (point estimates) use :math:`\log q(v) - \log p(v)`, i.e. the negative log prior of
    a MAP estimate.
    """
    sites = []
    for name, model_site in model_trace.nodes.items():
        if model_site["type"] != "sample" or model_site["is_observed"]:
            continue
        guide_site = guide_trace.nodes.get(name)
        if guide_site is None:
            raise ValueError(f"latent site '{name}' of the model is not sampled by the guide. {UNSEEN_SITE}")
        sites.append((name, model_site, guide_site))
    # the dropout family's KL of the weights and biases in one expression (infer/penalty.py)
    closed, left = closed_form_kl([(g["fn"], m["fn"], g) for _, m, g in sites])
    terms: list[Any] = [] if closed is None else [closed]
    terms += [_site_penalty(*sites[i]) for i in left]
    for name, node in guide_trace.nodes.items():
        aux: Site = node
        if aux["type"] == "sample" and name not in model_trace.nodes:
            if not (aux["infer"] or {}).get("is_auxiliary"):
                raise ValueError(f"guide site '{name}' is not in the model")
            terms.append(_summed(aux["fn"].log_prob(aux["value"]), aux))
    return sum_terms(terms)


def sum_terms(terms: Iterable[Any]) -> torch.Tensor:
    """The sum of ``terms`` as a tensor (0. for none), with no addition of a zero and no copy:
    each is an operation of a traced loss's every step."""
    total: Any = None
    for term in terms:
        total = term if total is None else total + term
    if isinstance(total, torch.Tensor):
        return total
    return torch.as_tensor(0.0 if total is None else total)


class DropoutTraceMixin:
    """Trace handling shared by the dropout losses (mixed into Pyro ``ELBO`` subclasses).

    Uses :func:`importance_trace`, and guesses ``max_plate_nesting`` from one run of
    the guide and model without scoring any site (Pyro's own guess scores every site
    under validation, which would report bad data less clearly). Subclasses define
    ``differentiable_loss``; ``loss`` (a float) and ``loss_and_grads`` (which also
    back-propagates) follow from it, as in Pyro's ``ELBO`` contract.
    """

    max_plate_nesting: float
    num_particles: int
    vectorize_particles: bool
    check_finite: bool
    per_example_masks: bool = False
    graph: str = "eager"
    retain_graph: bool | None

    def differentiable_loss(
        self, model: Callable, guide: Callable, *args: Any, **kwargs: Any
    ) -> torch.Tensor:
        raise NotImplementedError

    def loss(self, model: Callable, guide: Callable, *args: Any, **kwargs: Any) -> float:
        """The loss estimate, a float."""
        with torch.no_grad():
            value = torch_item(self.differentiable_loss(model, guide, *args, **kwargs))
        warn_if_nan(value, "loss")
        return value

    def loss_and_grads(self, model: Callable, guide: Callable, *args: Any, **kwargs: Any) -> float:
        """The loss estimate; also back-propagates it into the parameters. A loss that is not
        finite raises (with ``check_finite``) before any gradient reaches the parameters.
        With ``graph`` the loss is recorded once per input shape (:mod:`~pyro_dropout.infer.recorded`)."""
        if self.graph != "eager":
            losses = self.__dict__.setdefault("graph_losses", {})
            if (model, guide) not in losses:
                while len(losses) >= MAX_GRAPH_LOSSES:  # one loss object reused for many models
                    losses.pop(next(iter(losses)))  # keeps only the latest ones (and their graphs)
                losses[(model, guide)] = GraphLoss(self, model, guide, self.graph, owned=True)
            loss = losses[(model, guide)](args, kwargs)
        else:
            loss = self.differentiable_loss(model, guide, *args, **kwargs)
        where, params = type(self).__name__, lambda: _parameters(model, guide)
        value = backward_checked(loss, where, args, kwargs, params, self.check_finite, self.retain_graph)
        warn_if_nan(cast(Any, value), "loss")
        return value

    def __getstate__(self) -> dict:
        """The loss's settings, without its traces (copies and pickles trace anew)."""
        return {k: v for k, v in self.__dict__.items() if k != "graph_losses"}

    def explain(self) -> str:
        """How this loss's calls run, by model and guide and call signature, and why: recorded
        graphs replayed under their guards, or eager (:mod:`pyro_dropout.infer.recorded`)."""
        losses = self.__dict__.get("graph_losses", {})
        if self.graph == "eager":
            return f"{type(self).__name__}(graph='eager'): every call eager"
        return "\n".join(loss.explain() for loss in losses.values()) or f"{type(self).__name__}: no call yet"

    def check_particles(self, model: Callable, guide: Callable, args: tuple, kwargs: dict) -> None:
        """Before vectorised particles are trusted, once per model and input shape: the batching
        self-check (:mod:`~pyro_dropout.infer.batching_check`); where the model's batched pass
        differs from one particle at a time, warn and loop over the particles from then on."""
        if not (self.vectorize_particles and self.num_particles > 1):
            return
        if getattr(model, "checks_its_batching", False):  # a converted network decides for itself,
            return  # as it does in predict: one batching decision for the losses and prediction
        checked = self.__dict__.setdefault("particle_checks", {})
        key = (id(model), signature(args, kwargs))
        if key in checked:
            return
        if self.max_plate_nesting == math.inf:
            self._guess_max_plate_nesting(model, guide, args, kwargs)
        found = particles_mismatch(model, guide, args, kwargs, int(self.max_plate_nesting) - 1)
        checked[key] = found is None
        if found is not None:
            warnings.warn(
                f"{type(self).__name__}: the model's vectorised particles do not match one particle "
                f"at a time {describe_mismatch(found)}. The particles run one at a time from now on "
                "(vectorize_particles=False)",
                stacklevel=4,
            )
            self.vectorize_particles = False
            self.max_plate_nesting -= 1

    def _get_vectorized_trace(
        self, model: Callable, guide: Callable, args: tuple, kwargs: dict
    ) -> tuple[Trace, Trace]:
        with explain_batched_failure(type(self).__name__, "vectorize_particles=False"):
            return super()._get_vectorized_trace(model, guide, args, kwargs)  # type: ignore[misc]

    def _get_trace(self, model: Callable, guide: Callable, args: tuple, kwargs: dict) -> tuple[Trace, Trace]:
        return importance_trace(
            model, guide, args, kwargs, self.max_plate_nesting, self.check_finite, self.per_example_masks
        )

    def _guess_max_plate_nesting(self, model: Callable, guide: Callable, args: tuple, kwargs: dict) -> None:
        with poutine.block():
            guide_trace = poutine.trace(guide).get_trace(*args, **kwargs)
            model_trace = poutine.trace(poutine.replay(model, trace=guide_trace)).get_trace(*args, **kwargs)
        dims = [
            frame.dim
            for trace in (model_trace, guide_trace)
            for site in trace.nodes.values()
            if site["type"] == "sample"
            for frame in site["cond_indep_stack"]
            if frame.vectorized and frame.dim is not None
        ]
        self.max_plate_nesting = -min(dims) if dims else 0
        if self.vectorize_particles and self.num_particles > 1:
            self.max_plate_nesting += 1
