r"""Ready-made Bayesian networks: regression (fixed, learned, varying noise) and classification."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from contextlib import ExitStack
from typing import Any, Literal, cast

import pyro
import pyro.distributions as dist
import torch
from pyro.nn import PyroModule

from ..distributions import FixedNoiseNormal
from ..ops import is_positive_int, is_positive_number
from .layers import Linear, minibatch_scale, sample_site

__all__ = ["MLP"]

Likelihood = Literal["normal", "heteroscedastic", "categorical"]
_ACTIVATIONS = {
    "relu": torch.relu,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "gelu": torch.nn.functional.gelu,
}
# without autograd (prediction) these run in place: no new activations the size of a chunk of
# draws. With autograd they must not, since in-place ops on views make autograd copy the base.
_IN_PLACE = {"relu": torch.relu_, "tanh": torch.tanh_, "sigmoid": torch.sigmoid_}


def _per_layer(
    length_scale: float | torch.Tensor | Sequence[float | torch.Tensor], layers: int, runs: int | None
) -> list[float | torch.Tensor]:
    """One prior length-scale per weight layer: a number, or (with runs) a tensor ``[R, 1]``.

    The layers check each value; a tensor must hold one length-scale per run.
    """
    if isinstance(length_scale, int | float | torch.Tensor):
        scales: list = [length_scale] * layers
    else:
        scales = list(length_scale)
    if len(scales) != layers:
        raise ValueError(
            f"MLP: length_scale needs one value per weight layer ({layers}: hidden layers, then the "
            f"output), got {len(scales)}"
        )
    out: list[float | torch.Tensor] = []
    for value in scales:
        if isinstance(value, torch.Tensor):
            if runs is None or value.shape != (runs,):
                raise ValueError(
                    "MLP: a tensor length_scale holds one value per run: it needs runs=R and shape "
                    f"[R]; got runs={runs} and shape {tuple(value.shape)}"
                )
            value = value.reshape(runs, 1)  # the "runs" plate is dim -2
        out.append(value)
    return out


def _check_sizes(in_features: int, out_features: int, hidden: Sequence[int], runs: int | None) -> None:
    if runs is not None and not is_positive_int(runs):
        raise ValueError(f"MLP: runs must be a positive int, got {runs!r}")
    for name, value in (("in_features", in_features), ("out_features", out_features)):
        if not is_positive_int(value):
            raise ValueError(f"MLP: {name} must be a positive int, got {value!r}")
    if isinstance(hidden, int | str) or any(not is_positive_int(h) for h in hidden):
        raise ValueError(f"MLP: hidden must be a sequence of positive ints (widths), got {hidden!r}")


class MLP(PyroModule):
    r"""A fully connected Bayesian network with a likelihood, ready for :class:`DropoutGuide`.

    ``forward(x, y=None, num_data=None)`` runs the network and observes ``y`` in a plate
    ``"data"`` over the rows of ``x``. With minibatches, pass the full data set size as
    ``num_data``: the likelihood is then scaled by ``num_data / len(x)``.

    Likelihoods (``likelihood=``):

    * ``"normal"``: :math:`y \sim \mathcal{N}(f(x), \tau^{-1})` with a fixed precision
      ``tau`` (a float), or with ``tau="learned"``: a latent site ``"tau"`` with a
      :math:`\mathrm{Gamma}(a, b)` prior (``tau_prior=(a, b)``, default (0.1, 0.01) as in
      Concrete dropout, appendix D), fitted by MAP by :class:`DropoutGuide`.
    * ``"heteroscedastic"``: the network outputs a mean and a log-variance per output.
      Trained with the ELBO the log-variance learns the noise *plus* the spread of the draws
      (the best variance under an expected log-likelihood is the draws' mean squared error),
      so the predictive counts that spread twice and is under-confident; ``BBAlpha(1.0)`` fits
      the predictive itself (docs/tutorials/reading-uncertainty.md measures both).
    * ``"categorical"``: ``out_features`` classes,
      :math:`y \sim \mathrm{Categorical}(\mathrm{softmax} f(x))`.

    The network output is recorded as a deterministic site, ``"mean"`` (regression;
    plus ``"log_var"`` when heteroscedastic) or ``"logits"`` (classification), so that
    predictions can separate epistemic from aleatoric uncertainty.

    **Independent runs in one model.** With ``runs=R`` the model holds ``R`` independent
    networks in a plate ``"runs"`` (dim -2): ``x`` is ``[R, N, in]`` and ``y`` is ``[R, N]``,
    each run with its own data; ``tau`` may be a tensor with one precision per run, and a
    :class:`DropoutGuide` may give each run its own drop probability (a tensor of shape
    ``[R, 1]``). The runs share nothing, so training them together equals training them
    one after another, in one vectorised pass.

    Usage:

        model = MLP(13, hidden=(50,), tau=0.1)
        guide = DropoutGuide(model, dropout=0.05)

    :param length_scale: prior length-scale :math:`l` of every weight (prior std ``1/l``), or
        one per weight layer (hidden layers first, then the output layer), e.g. the
        :math:`l \sqrt{K_\mathrm{in}}` rule of Concrete dropout's UCI experiments (paper 001,
        appendix D): ``[l * math.sqrt(k) for k in (in_features, *hidden)]``. With ``runs=R``
        each value may also be a tensor of shape ``[R]``: one prior length-scale per run.
    :param prior: ``"quantised"`` (:class:`QuantisedGaussian`) or ``"normal"`` weight priors.
    :param runs: the number of independent networks held in the ``"runs"`` plate.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int = 1,
        hidden: Sequence[int] = (50,),
        *,
        likelihood: Likelihood = "normal",
        tau: float | torch.Tensor | Literal["learned"] = 1.0,
        tau_prior: tuple[float, float] = (0.1, 0.01),
        activation: str = "relu",
        length_scale: float | torch.Tensor | Sequence[float | torch.Tensor] = 1.0,
        prior: str = "quantised",
        runs: int | None = None,
    ) -> None:
        options = {k: v for k, v in locals().items() if k not in ("self", "runs", "__class__")}
        super().__init__()
        _check_sizes(in_features, out_features, hidden, runs)
        if likelihood not in ("normal", "heteroscedastic", "categorical"):
            raise ValueError(f"MLP: unknown likelihood {likelihood!r}")
        if activation not in _ACTIVATIONS:
            raise ValueError(f"MLP: unknown activation {activation!r}; choose from {sorted(_ACTIVATIONS)}")
        if likelihood == "categorical" and out_features < 2:
            raise ValueError("MLP: a categorical likelihood needs out_features >= 2 classes")
        self._options = options  # what with_runs rebuilds from
        self.likelihood = likelihood
        self.out_features = out_features
        self.activation = activation
        self.runs = runs
        sizes = [in_features, *hidden]
        n_out = 2 * out_features if likelihood == "heteroscedastic" else out_features
        scales = _per_layer(length_scale, len(sizes), runs)
        self.hidden: Any = cast(Any, PyroModule)[torch.nn.ModuleList](
            [
                Linear(a, b, length_scale=ls, prior=prior)
                for (a, b), ls in zip(itertools.pairwise(sizes), scales, strict=False)
            ]
        )
        self.output = Linear(sizes[-1], n_out, length_scale=scales[-1], prior=prior)
        self.tau_learned = isinstance(tau, str) and tau == "learned"
        if likelihood == "normal":
            if self.tau_learned:
                a, b = tau_prior
                if not (a > 0 and b > 0):
                    raise ValueError(f"MLP: tau_prior must be positive (shape, rate), got {tau_prior}")
                self.register_buffer("tau_prior_rate", torch.tensor(float(b)))
                self.register_buffer("tau_prior_shape", torch.tensor(float(a)))
                self.tau = sample_site(type(self)._tau_prior)
            else:
                self._set_fixed_tau(tau)

    def with_runs(self, runs: int | None) -> MLP:
        """A new, untrained MLP of this one's sizes, likelihood, noise, activation and priors that
        holds ``runs`` independent networks (``x`` ``[runs, N, in]``); e.g. the folds of
        :func:`~pyro_dropout.export.kfold` trained in one pass. Only a single network
        (``runs=None``) can be replicated: a per-run tensor option has no meaning for another
        number of runs."""
        if self.runs is not None:
            raise ValueError(
                f"MLP.with_runs: this MLP already holds runs={self.runs}; build one with runs=None"
            )
        return MLP(**self._options, runs=runs)

    def _set_fixed_tau(self, tau: Any) -> None:
        if isinstance(tau, torch.Tensor):
            if self.runs is None or tau.shape != (self.runs,):
                raise ValueError(f"MLP: a tensor tau needs runs=R and shape [R]; got {tuple(tau.shape)}")
            if not bool(torch.isfinite(tau).all() and (tau > 0).all()):
                raise ValueError("MLP: tau must be positive and finite")
            self.register_buffer("fixed_tau", tau.detach().to(torch.get_default_dtype()).unsqueeze(-1))
            return
        if not is_positive_number(tau):
            raise ValueError(f"MLP: tau must be a positive float, a tensor or 'learned', got {tau!r}")
        self.fixed_tau = float(tau)

    def _tau_prior(self) -> dist.Gamma:
        return dist.Gamma(self.tau_prior_shape, self.tau_prior_rate)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The network output ``f(x)``, shape ``[*S, N, n_out]``."""
        h = x
        for layer in self.hidden:
            h = layer(h)
            act = _IN_PLACE.get(self.activation) if not h.requires_grad else None
            h = act(h) if act is not None else _ACTIVATIONS[self.activation](h)
        return self.output(h)

    def forward(
        self, x: torch.Tensor, y: torch.Tensor | None = None, num_data: int | None = None
    ) -> torch.Tensor:
        expected = 2 if self.runs is None else 3
        if x.dim() != expected or (self.runs is not None and x.shape[0] != self.runs):
            layout = "[N, features]" if self.runs is None else f"[runs={self.runs}, N, features]"
            raise ValueError(f"MLP: x must be {layout}, got shape {tuple(x.shape)}")
        n = x.shape[-2]
        if y is not None:
            self._check_targets(x, y)
        scale = minibatch_scale("MLP", num_data, n)
        with ExitStack() as stack:
            if self.runs is not None:
                stack.enter_context(pyro.plate("runs", self.runs, dim=-2))
            tau = (self.tau if self.tau_learned else None) if self.likelihood == "normal" else None
            f = self.features(x)
            with pyro.plate("data", n, dim=-1), pyro.poutine.scale(scale=scale):
                return self._observe(f, y, tau)

    def _check_targets(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """``y`` is one value per row of ``x`` (one vector of ``out_features`` for a normal likelihood of
        several outputs): a column ``[N, 1]`` would broadcast against the ``N`` means into ``[N, N]``
        log-densities, a wrong likelihood without an error (as under NUTS, which has no loss to check)."""
        several = self.likelihood != "categorical" and self.out_features > 1
        want = tuple(x.shape[:-1]) + ((self.out_features,) if several else ())
        if tuple(y.shape) == want:
            return
        hint = ""
        if tuple(y.shape) == want + (1,):
            hint = "; pass y.squeeze(-1)"
        elif self.likelihood == "categorical" and tuple(y.shape) == want + (self.out_features,):
            hint = "; labels one-hot? the likelihood takes class indices: pass y.argmax(-1)"
        raise ValueError(
            f"MLP, at site 'obs': x has shape {tuple(x.shape)} but y has shape {tuple(y.shape)}: y must be "
            f"{want}, one target per row{hint}"
        )

    def _observe(self, f: torch.Tensor, y: torch.Tensor | None, tau: torch.Tensor | None) -> torch.Tensor:
        single = self.out_features == 1
        if self.likelihood == "categorical":
            logits = pyro.deterministic("logits", f, event_dim=1)
            return pyro.sample("obs", dist.Categorical(logits=logits), obs=y)
        if self.likelihood == "heteroscedastic":
            mean, log_var = f[..., : self.out_features], f[..., self.out_features :]
            mean = pyro.deterministic(
                "mean", mean.squeeze(-1) if single else mean, event_dim=0 if single else 1
            )
            log_var = pyro.deterministic(
                "log_var", log_var.squeeze(-1) if single else log_var, event_dim=0 if single else 1
            )
            noise = dist.Normal(mean, torch.exp(0.5 * log_var))
        else:
            mean = pyro.deterministic("mean", f.squeeze(-1) if single else f, event_dim=0 if single else 1)
            # tau: a float, [] or [(S,) (R,) 1] (data-plate slot); several outputs need one more dim
            precision: float | torch.Tensor = self.fixed_tau if tau is None else tau
            if isinstance(precision, float):
                noise = FixedNoiseNormal(mean, precision**-0.5)
            else:
                noise = dist.Normal(mean, precision.rsqrt() if single else precision.rsqrt().unsqueeze(-1))
        return pyro.sample("obs", noise if single else noise.to_event(1), obs=y)
