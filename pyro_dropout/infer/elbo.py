r"""``DropoutELBO``: the evidence lower bound of dropout inference, with the analytic KL."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from pyro.infer import TraceMeanField_ELBO
from pyro.poutine.trace_struct import Trace

from ..ops import is_positive_int
from .input_checks import check_finite_inputs, check_graph, check_not_empty, refuse_jit
from .loss_terms import DropoutTraceMixin, latent_penalty, likelihood_sites, sum_terms

__all__ = ["DropoutELBO", "log_likelihood_sum"]


def log_likelihood_sum(model_trace: Trace) -> torch.Tensor:
    """The scaled log-likelihood of all observed sites of a scored trace."""
    return sum_terms(site["log_prob_sum"] for _, site in likelihood_sites(model_trace))


class DropoutELBO(DropoutTraceMixin, TraceMeanField_ELBO):
    r"""The ELBO of dropout variational inference (paper [1], eq. 8; paper [2], eq. 1).

    $$
    \mathcal{L} = \sum_{n} \mathbb{E}_{q}\log p(y_n \mid x_n, \omega)
    - \mathrm{KL}(q(\omega)\,\|\,p(\omega)),
    $$

    estimated with ``num_particles`` draws of the masks and the analytic KL of
    :mod:`pyro_dropout.distributions.kl`. By default one mask per draw is shared by the
    minibatch; ``per_example_masks=True`` draws one mask per data point instead (as Keras
    and PyTorch dropout layers do), an unbiased estimator of the same ELBO with
    independent terms (:mod:`pyro_dropout.nn.masking`; the weights must enter the model
    through :mod:`pyro_dropout.nn` layers or functions).
    Minibatches are scaled by :math:`N/|B|` through ``pyro.plate(..., subsample_size=)``
    or ``poutine.scale``. ``loss`` returns :math:`-\mathcal{L}`.

    Unlike :class:`~pyro.infer.TraceMeanField_ELBO`, a dropout site whose prior has no
    registered KL is an error, never a silent Monte Carlo fallback; point estimates
    (e.g. a noise precision) contribute their negative log prior (MAP). Inputs and
    observations holding NaN or inf are rejected (``check_finite=False`` skips that).

    ``graph`` says how a step runs: ``"record"`` (the default) runs each call signature (input
    shapes, other arguments, which parameters are trained) eagerly for its first 7 calls and records
    it at its 8th as a graph of ATen operations (``torch.fx``), which later calls replay: plain
    ``SVI`` then skips Pyro's per-site Python. A graph replays a call only where its guard, read at
    *every* call, finds everything the recording read as it was: the model's and guide's modules
    (modes, settings, parameters and buffers), the loss's settings, PyTorch's and Pyro's modes, and
    the globals, closure variables and modules the model's code read. What no guard can cover runs
    eagerly, exactly: a tensor's value read into Python, a shape made from values, a call of the
    clock or of Python's random numbers, a write to a global (``explain()`` says which, and where).
    ``graph="compile"`` also compiles the graph with :func:`torch.compile` (fused kernels; a first
    compile of seconds, cached on disk); ``graph="eager"`` records nothing.

    Usage:

        svi = SVI(model, DropoutGuide(model), pyro.optim.Adam({"lr": 1e-2}), DropoutELBO())
        svi = SVI(model, guide, pyro.optim.Adam({"lr": 1e-2}), DropoutELBO(graph="eager"))
        svi = SVI(model, guide, pyro.optim.Adam({"lr": 1e-2}), DropoutELBO(graph="compile"))

    References

    [1] Y. Gal, Z. Ghahramani. *Dropout as a Bayesian Approximation.* ICML 2016.
    [2] Y. Gal, J. Hron, A. Kendall. *Concrete Dropout.* NeurIPS 2017.
    """

    def __init__(
        self,
        num_particles: int = 1,
        vectorize_particles: bool = True,
        max_plate_nesting: float = float("inf"),
        check_finite: bool = True,
        per_example_masks: bool = False,
        graph: str = "record",
        **kwargs: Any,
    ) -> None:
        refuse_jit(kwargs, "DropoutELBO")
        if not is_positive_int(num_particles):
            raise ValueError(f"DropoutELBO: num_particles must be a positive int, got {num_particles!r}")
        super().__init__(
            num_particles=num_particles,
            vectorize_particles=vectorize_particles,
            max_plate_nesting=max_plate_nesting,
            **kwargs,
        )
        self.check_finite = check_finite
        self.per_example_masks = bool(per_example_masks)
        self.graph = check_graph("DropoutELBO", graph)

    def _penalised_log_likelihood(
        self, model: Callable, guide: Callable, args: tuple, kwargs: dict
    ) -> torch.Tensor:
        """The ELBO estimate as a tensor, averaged over particles (no host synchronisation)."""
        total = sum_terms(
            log_likelihood_sum(model_trace) - latent_penalty(model_trace, guide_trace)
            for model_trace, guide_trace in self._get_traces(model, guide, args, kwargs)
        )
        return total if self.num_particles == 1 else total / self.num_particles

    def differentiable_loss(
        self, model: Callable, guide: Callable, *args: Any, **kwargs: Any
    ) -> torch.Tensor:
        """The negative ELBO as a differentiable tensor."""
        check_not_empty(args, kwargs)
        if self.check_finite:
            check_finite_inputs(args, kwargs)
        self.check_particles(model, guide, args, kwargs)
        return -self._penalised_log_likelihood(model, guide, args, kwargs)
