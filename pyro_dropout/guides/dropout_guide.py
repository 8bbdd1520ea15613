r"""``DropoutGuide``: an autoguide whose variational family is dropout."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from dataclasses import replace as _replace
from operator import attrgetter
from typing import Any

import pyro
import pyro.distributions as dist
import pyro.distributions.constraints as pyro_constraints
import torch
from pyro.infer.autoguide import AutoGuide
from pyro.infer.autoguide.initialization import InitMessenger
from pyro.infer.autoguide.utils import deep_setattr
from pyro.nn import PyroModule, PyroParam
from pyro.ops.tensor_utils import periodic_repeat
from pyro.poutine.util import site_is_subsample
from torch.distributions import constraints

from ..distributions import BernoulliDropout, ConcreteDropout, NetworkDropout
from ..nn import broadcast_pyro_layers
from ..ops import is_positive_number
from .initialization import base_prior, init_to_fan_in, is_gaussian_prior
from .ownership import check_owner, claim, make_room
from .rates import (
    DropoutSpec,
    Rate,
    check_spec,
    check_weights_outside_data_plates,
    declared_mask_dim,
    network_rate,
    site_rate,
    warn_about_masks,
)
from .summaries import DropoutSummaries
from .usage import ProductWatch, declare_input_rows

__all__ = ["DropoutGuide", "DropoutSpec"]


@dataclass(frozen=True)
class _Role:
    """How the guide treats one latent site."""

    masked: bool  # dropout family (True) or a MAP point estimate (False)
    event_dim: int
    p: float | torch.Tensor = 0.0  # fixed rate (Bernoulli) or initial rate (Concrete)
    learn_p: bool = False
    frames: tuple = ()
    mask_dim: int | None = None  # the event dim whose units are masked (None: the family's default)
    get: Callable = attrgetter("")  # reads the site's parameter from a PyroModule
    prior: Any = None  # a network's own dropout mask (infer["module_dropout"]): its guide is its prior
    network: bool = False  # a converted network's weight whose own dropout draws its masks


def _full_size(init: torch.Tensor, role: _Role) -> torch.Tensor:
    """A site's starting value at the full size of its subsampled plates."""
    for frame in role.frames:
        full_size = frame.full_size or frame.size
        if full_size != frame.size:
            init = periodic_repeat(init, full_size, frame.dim - role.event_dim).contiguous()
    return init


class DropoutGuide(DropoutSummaries, AutoGuide):
    r"""Dropout as a variational family, as a Pyro autoguide.

    Each weight tensor (a latent site with a Gaussian or
    :class:`~pyro_dropout.distributions.QuantisedGaussian` prior and two or more event
    dims) is sampled from the dropout family :math:`W = M\,\mathrm{diag}(z)/(1-p)`
    (paper [1], eq. 5-7), with masks over its input units: Bernoulli masks with fixed
    ``p`` (:class:`~pyro_dropout.distributions.BernoulliDropout`), or Concrete masks with
    ``p`` learned per site (``concrete=True``, paper [2],
    :class:`~pyro_dropout.distributions.ConcreteDropout`). Vector and scalar sites with
    Gaussian priors (biases) get the same family with ``p = 0``, a point mass. Every
    other continuous latent site (a noise precision with a Gamma prior, say) gets a point
    estimate, fitted by MAP. Each model site is sampled directly from its family, so
    :class:`~pyro_dropout.infer.DropoutELBO` and :class:`~pyro_dropout.infer.BBAlpha`
    use the analytic KL of :mod:`pyro_dropout.distributions.kl`.

    Usage:

        guide = DropoutGuide(model, dropout=0.1)       # Bernoulli masks, fixed p
        guide = DropoutGuide(model, concrete=True)     # Concrete masks, p learned per site
        guide.dropout_rates()                          # {"fc1.weight": tensor(0.1), ...}
        guide.median()                                 # expected weights E_q[W] = M

    :param model: a Pyro model.
    :param dropout: fixed drop probabilities (Bernoulli masks): a float (or a tensor) for every
        weight tensor, a dict ``{site: p}`` that must name every weight tensor (and may name
        vector sites, to mask their elements), or a callable ``(name, site) -> p``
        called for each weight tensor. Used only when ``concrete=False``. A rate may be a
        tensor broadcasting to the site's batch shape, e.g. one rate per run ``[R, 1]``
        for a site in a plate of runs (:class:`~pyro_dropout.nn.MLP` with ``runs=R``).
        Not given (``None``): each site's declared rate (``pyro.sample(..., infer={"dropout": p})``,
        or a layer's ``Linear(..., dropout=p)``), else 0.1 for a weight, except a weight with a
        single input unit, which gets 0 (masking a network's only input makes a fraction p of
        the draws constant functions); a rate given here overrides the sites'.
    :param concrete: learn ``p`` per site with Concrete masks.
    :param temperature: Concrete relaxation temperature, > 0 (default 0.1 as in [2]).
    :param init_dropout: initial ``p`` for ``concrete=True``, in the same forms as
        ``dropout``; a site given 0 keeps ``p = 0`` and is not learned.
    :param point_estimates: names of sites to fit by MAP whatever their prior.
    :param init_loc_fn: per-site initialisation of the variational means
        (default :func:`~pyro_dropout.guides.init_to_fan_in`).
    :param create_plates: as for :class:`~pyro.infer.autoguide.AutoGuide`.
    :param name: the prefix of its parameters in Pyro's global param store
        (``"<name>.locs.<site>"``). Guides of the same name share the store's names: a new one
        starts from its own values, and an older one, run again, is refused (or set
        ``pyro.settings.set(module_local_params=True)``); guides of different names keep apart.

    References

    [1] Y. Gal, Z. Ghahramani. *Dropout as a Bayesian Approximation.* ICML 2016.
    [2] Y. Gal, J. Hron, A. Kendall. *Concrete Dropout.* NeurIPS 2017.
    """

    def __init__(
        self,
        model: Callable,
        dropout: DropoutSpec | None = None,
        *,
        concrete: bool = False,
        temperature: float = 0.1,
        init_dropout: DropoutSpec | None = None,
        point_estimates: tuple[str, ...] | list[str] = (),
        init_loc_fn: Callable = init_to_fan_in,
        create_plates: Callable | None = None,
        name: str = "DropoutGuide",
    ) -> None:
        if not (isinstance(name, str) and name and "." not in name):
            raise ValueError(f"DropoutGuide: name must be a non-empty string without dots, got {name!r}")
        if not is_positive_number(temperature):
            raise ValueError(f"DropoutGuide: temperature must be a positive float, got {temperature!r}")
        if concrete and dropout is not None:
            raise ValueError(
                "DropoutGuide: concrete=True learns p; give its starting values with init_dropout= "
                "(dropout= sets the fixed rates of Bernoulli masks)"
            )
        check_spec(dropout, "dropout")
        check_spec(init_dropout, "init_dropout")
        self.concrete = bool(concrete)
        self.temperature = float(temperature)
        bad = isinstance(point_estimates, str) or not isinstance(
            point_estimates, list | tuple | set | frozenset
        )
        if bad or not all(isinstance(n, str) for n in point_estimates):
            raise TypeError(
                f"DropoutGuide: point_estimates must be a list of site names, got {point_estimates!r}"
                + (f" (write [{point_estimates!r}] for one site)" if isinstance(point_estimates, str) else "")
            )
        self.point_estimates = tuple(point_estimates)
        # Pyro's own layers (PyroModule[nn.Linear], [nn.Conv2d]) take batched draws from here on
        self.broadcast_layers = broadcast_pyro_layers(model)
        self.init_loc_fn = init_loc_fn
        self._roles: dict[str, _Role] = {}
        # a converted network with no layer made Bayesian: its own MC dropout, no site to fit
        self.empty_allowed = bool(getattr(model, "own_dropout_only", False))
        super().__init__(InitMessenger(init_loc_fn)(model), create_plates=create_plates)
        self._pyro_name = name  # the prefix of its parameters in Pyro's param store
        self.lineage = uuid.uuid4().hex  # kept by its copies: they may run on its names (ownership.py)
        # set after the module is initialised: a tensor rate is a plain attribute, not a buffer
        self._rates: DropoutSpec | None = init_dropout if concrete else dropout

    # --- set-up ----------------------------------------------------------------------
    @staticmethod
    def _prototype_hide_fn(msg: Any) -> bool:
        # AutoGuide's, but the observed sites stay in the prototype trace for one check
        return msg["type"] != "sample" or site_is_subsample(msg)

    def _rate(self, name: str, site: dict, matrix: bool) -> Rate:
        return site_rate(self._rates, self.concrete, name, site, matrix)

    def _role(self, name: str, site: dict) -> _Role:
        fn = site["fn"]
        frames = tuple(f for f in site["cond_indep_stack"] if f.vectorized)
        prior = type(base_prior(fn)).__name__
        if (site["infer"] or {}).get("module_dropout") is not None:  # q = p: KL 0 (nn.converted)
            return _Role(False, fn.event_dim, frames=frames, prior=fn)
        network = site["infer"].get("network_masks")  # masks the network's own dropout draws
        if network and (rate := network_rate(name, site, self._rates, self.concrete)) is not None:
            mask_dim = declared_mask_dim(name, site)
            learn = self.concrete and rate > 0  # (network_rate refused a rate no module makes)
            return _Role(True, fn.event_dim, rate, learn, frames=frames, mask_dim=mask_dim, network=True)
        if getattr(fn.support, "is_discrete", False):
            raise ValueError(
                f"DropoutGuide: site '{name}' is discrete ({prior}); the guide handles continuous "
                "latent sites only: marginalise it (enumeration, https://pyro.ai/examples/enumeration.html) "
                "or observe it"
            )
        if name in self.point_estimates:
            return _Role(False, fn.event_dim, frames=frames)
        matrix = fn.event_dim >= 2
        named = isinstance(self._rates, Mapping) and name in self._rates
        if is_gaussian_prior(fn):
            p = self._rate(name, site, matrix)
            learn = self.concrete and (isinstance(p, torch.Tensor) or p > 0)
            return _Role(True, fn.event_dim, p, learn, frames, mask_dim=declared_mask_dim(name, site))
        if matrix or named:
            raise ValueError(
                f"DropoutGuide: site '{name}' has a {prior} prior, but the dropout family has an "
                "analytic KL only against QuantisedGaussian or Normal priors; use one of those, or "
                f"fit the site by MAP with point_estimates=['{name}']"
            )
        return _Role(False, fn.event_dim, frames=frames)

    def _setup_prototype(self, *args: Any, **kwargs: Any) -> None:
        with ProductWatch() as watch:  # which dim of each weight its products sum over
            super()._setup_prototype(*args, **kwargs)
        assert self.prototype_trace is not None
        declare_input_rows(self.prototype_trace, watch.contracted)
        self.locs = PyroModule()
        self.rates = PyroModule()
        self._roles = {}
        inits = {}
        for name, site in self.prototype_trace.iter_stochastic_nodes():
            if isinstance(site["fn"].support, type(pyro_constraints.sphere)):
                raise ValueError(
                    f"DropoutGuide: site '{name}' lives on the sphere ({type(site['fn']).__name__}), where "
                    "no point estimate or dropout family applies; reparametrise it first: "
                    f"poutine.reparam(model, config={{'{name}': ProjectedNormalReparam()}}) "
                    "(pyro.infer.reparam), as Pyro's autoguides ask"
                )
            role = self._role(name, site)
            self._roles[name] = role = _replace(role, get=attrgetter(name))
            if role.prior is None:  # a network's own dropout mask has nothing to fit
                inits[name] = _full_size(site["value"].detach(), role)
        if not self._roles and not self.empty_allowed:
            raise ValueError("DropoutGuide: the model has no latent sample sites, so there is nothing to fit")
        # names another live guide holds are freed first: this guide starts from its own values
        make_room(self, self._pyro_name, {f"locs.{n}": tuple(v.shape) for n, v in inits.items()})
        for name, init in inits.items():
            role = self._roles[name]
            site = self.prototype_trace.nodes[name]
            constraint = constraints.real if role.masked else site["fn"].support
            deep_setattr(self.locs, name, PyroParam(init, constraint, role.event_dim))
            if role.learn_p:
                p0 = torch.as_tensor(role.p, dtype=init.dtype, device=init.device)
                deep_setattr(self.rates, name, PyroParam(p0, constraints.unit_interval))
        named = {
            "dropout rates": set(self._rates) if isinstance(self._rates, Mapping) else set(),
            "point_estimates": set(self.point_estimates),
        }
        for what, names in named.items():
            unknown = sorted(names - set(self._roles))
            if unknown:
                raise ValueError(
                    f"DropoutGuide: {what} given for sites not in the model: {unknown} "
                    f"(its latent sites: {sorted(self._roles)})"
                )
        check_weights_outside_data_plates(self.prototype_trace, self._roles)
        observed = [n for n, site in self.prototype_trace.nodes.items() if site.get("is_observed")]
        for name in observed:
            self.prototype_trace.remove_node(name)  # kept only for that check
        self.observed_sites = frozenset(observed)  # the likelihood's sites, not the guide's to draw
        warn_about_masks(self.prototype_trace, self._roles, self.concrete, self._rates is None)

    # --- the guide -------------------------------------------------------------------
    def _loc(self, name: str, role: _Role, plates: dict) -> torch.Tensor:
        """The site's means, for the plates' subsample. Read inside its plates, a parameter with an
        event dim is subsampled by ``pyro.param`` itself: only a mean still at a plate's full size
        is indexed here (indexed twice, it raised "index out of range")."""
        loc = self._roles[name].get(self.locs)
        for frame in role.frames:
            plate = plates[frame.name]
            dim = frame.dim - role.event_dim
            if plate.size != plate.subsample_size and loc.shape[dim] == plate.size:
                loc = loc.index_select(dim, plate.indices)
        return loc

    def _rate_of(self, name: str, role: _Role) -> torch.Tensor | float:
        if role.learn_p:
            return role.get(self.rates)
        if isinstance(role.p, torch.Tensor):
            loc = role.get(self.locs)
            return role.p.to(dtype=loc.dtype, device=loc.device)
        return role.p

    def rate(self, name: str) -> torch.Tensor | float:
        """The drop rate of site ``name``'s family: a tensor with its gradient where ``concrete=True``
        learns it (the front door's dropout modules read it so), else the fixed rate."""
        self._require_setup()
        return self._rate_of(name, self._roles[name])

    def family(self, name: str, plates: dict | None = None) -> dist.TorchDistribution:
        """The variational distribution of site ``name`` (outside any particle plate)."""
        role = self._roles[name]
        if role.prior is not None:
            return role.prior
        loc = self._loc(name, role, plates or {})
        if not role.masked:
            return dist.Delta(loc, event_dim=role.event_dim)
        p = self._rate_of(name, role)
        if role.network:
            return NetworkDropout(loc, p, role.event_dim, validate_args=False, mask_dim=role.mask_dim)
        if role.learn_p:
            return ConcreteDropout(
                loc, p, self.temperature, role.event_dim, validate_args=False, mask_dim=role.mask_dim
            )
        return BernoulliDropout(loc, p, role.event_dim, validate_args=False, mask_dim=role.mask_dim)

    def forward(self, *args: Any, **kwargs: Any) -> dict[str, torch.Tensor]:
        if torch.jit.is_tracing():
            raise NotImplementedError(
                "DropoutGuide cannot run under a TorchScript trace (Pyro's JIT losses JitTrace_ELBO, "
                "JitTraceGraph_ELBO, JitTraceEnum_ELBO; a traced Predictive module): the trace freezes its "
                "draws and parameter transforms, and the fit is wrong without an error. Use Trace_ELBO, "
                "or DropoutELBO(), which replays a "
                "recorded graph only under a guard read at every step"
            )
        if self.prototype_trace is None:
            self._setup_prototype(*args, **kwargs)
            claim(self, self._pyro_name)
        check_owner(self, self._pyro_name)
        plates = self._create_plates(*args, **kwargs)
        result = {}
        for name, role in self._roles.items():
            with ExitStack() as stack:
                for frame in role.frames:
                    stack.enter_context(plates[frame.name])
                result[name] = pyro.sample(name, self.family(name, plates))
        return result
