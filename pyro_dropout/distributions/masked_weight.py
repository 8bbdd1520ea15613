r"""Base class of the dropout variational families over weight tensors."""

from __future__ import annotations

from typing import Any

import torch
from pyro.distributions import TorchDistribution
from torch.distributions import constraints

__all__ = ["MaskedWeight", "SampleShape", "check_mask_dim", "mask_dim_for", "validate_dropout_rate"]

SampleShape = torch.Size | list[int] | tuple[int, ...]


def mask_dim_for(event_dim: int) -> int | None:
    """The (negative) dimension over which units are dropped, for a weight of ``event_dim`` dims.

    A Linear weight ``[out, in]`` and a conv weight ``[out, in, *kernel]`` drop *input*
    units: the second event dimension. A vector (``event_dim == 1``) drops elements,
    and a scalar is one unit.
    """
    if event_dim >= 2:
        return -(event_dim - 1)
    if event_dim == 1:
        return -1
    return None


def check_mask_dim(mask_dim: Any, event_dim: int, what: str) -> int | None:
    """``mask_dim`` as a negative index into a weight's ``event_dim`` dims (``None``: the default,
    :func:`mask_dim_for`); a ``ValueError`` names it when it is not one of those dims."""
    if mask_dim is None:
        return mask_dim_for(event_dim)
    if isinstance(mask_dim, bool) or not isinstance(mask_dim, int) or not -event_dim <= mask_dim < event_dim:
        raise ValueError(
            f"{what}: the masked dimension must be one of the weight's {event_dim} event dims "
            f"(an int in [{-event_dim}, {event_dim - 1}]), got {mask_dim!r}"
        )
    return mask_dim - event_dim if mask_dim >= 0 else mask_dim


def validate_dropout_rate(p: Any, what: str, dtype: torch.dtype | None = None) -> None:
    """Raise ``TypeError`` unless ``p`` is a real number or tensor, and ``ValueError`` unless
    every value lies in [0, 1), also once rounded to ``dtype`` (the model's: ``1 - 1e-9`` in
    float64 is 1 in float32)."""
    if isinstance(p, bool) or not isinstance(p, int | float | torch.Tensor):
        raise TypeError(
            f"{what}: a dropout probability must be a number or a tensor, got {type(p).__name__} {p!r}"
        )
    if isinstance(p, torch.Tensor) and (p.is_complex() or p.dtype == torch.bool):
        raise TypeError(f"{what}: a dropout probability tensor must be real, got dtype {p.dtype}")
    values = p.detach() if isinstance(p, torch.Tensor) else torch.as_tensor(p, dtype=torch.float64)
    if values.is_floating_point() and bool(torch.isnan(values).any()):
        raise ValueError(f"{what}: dropout probability is NaN")
    if not bool(((values >= 0) & (values < 1)).all()):
        raise ValueError(f"{what}: dropout probability must lie in [0, 1), got {p!r}")
    if dtype is not None and dtype.is_floating_point and not bool((values.to(dtype) < 1).all()):
        raise ValueError(f"{what}: dropout probability {p!r} rounds to 1 in the model's {dtype}")


class MaskedWeight(TorchDistribution):
    r"""Weights :math:`W = M\,\mathrm{diag}(z)/(1-p)` with a drop probability ``p`` per unit.

    This is the dropout variational family of paper [1] (eq. 5-7), written with the
    *inverted dropout* scaling so that :math:`\mathbb{E}_q[W] = M`: the keep mask
    :math:`z_j` (``1`` keeps unit ``j``) is shared by all weights that read unit ``j``,
    i.e. one mask per input unit along :func:`mask_dim_for` ``(event_dim)``.
    Subclasses choose how ``z`` is drawn (:class:`~pyro_dropout.distributions.BernoulliDropout`,
    :class:`~pyro_dropout.distributions.ConcreteDropout`). ``p = 0`` is a point mass at
    ``M`` (used for biases).

    The value is reparameterised in ``M`` (``has_rsample``), so the family works with
    :class:`~pyro.infer.TraceMeanField_ELBO` and its KL to a Gaussian or quantised
    Gaussian prior is analytic (:mod:`pyro_dropout.distributions.kl`).

    :param loc: the variational mean :math:`M`, of shape ``batch_shape + event_shape``.
    :param p: drop probability in [0, 1): a float, or a tensor broadcastable to ``batch_shape``.
    :param event_dim: how many rightmost dims of ``loc`` form one weight tensor.
    :param mask_dim: the event dimension (a negative index) whose units are masked; default
        :func:`mask_dim_for` ``(event_dim)``, the inputs of an ``[out, in, ...]`` weight. A weight
        stored ``[in, out]`` (used as ``x @ W``) masks its inputs with ``mask_dim=-2``.

    References

    [1] Y. Gal, Z. Ghahramani. *Dropout as a Bayesian Approximation.* ICML 2016.
    """

    arg_constraints = {"loc": constraints.real}
    has_rsample = True

    def __init__(
        self,
        loc: torch.Tensor,
        p: torch.Tensor | float,
        event_dim: int = 2,
        validate_args: bool | None = None,
        *,
        mask_dim: int | None = None,
    ) -> None:
        if not isinstance(loc, torch.Tensor):
            raise TypeError(f"{type(self).__name__}: loc must be a tensor, got {type(loc).__name__}")
        if not 0 <= event_dim <= loc.dim():
            raise ValueError(
                f"{type(self).__name__}: event_dim={event_dim} does not fit loc of shape {tuple(loc.shape)}"
            )
        if validate_args is not False:
            validate_dropout_rate(p, type(self).__name__)
        self.loc = loc
        self.p = p if isinstance(p, torch.Tensor) else float(p)
        self._event_dim = event_dim
        self._mask_dim = check_mask_dim(mask_dim, event_dim, type(self).__name__)
        split = loc.dim() - event_dim
        batch_shape = loc.shape[:split]
        if isinstance(self.p, torch.Tensor):
            batch_shape = torch.broadcast_shapes(batch_shape, self.p.shape)
        super().__init__(batch_shape, loc.shape[split:], validate_args=validate_args)

    # --- structure -------------------------------------------------------------------
    @property
    def support(self) -> Any:
        return constraints.independent(constraints.real, self._event_dim)

    @property
    def mask_dim(self) -> int | None:
        """The dimension (negative index into a value) over which units are masked."""
        return self._mask_dim

    @property
    def num_units(self) -> int:
        """:math:`K`, the number of independently dropped units of one weight tensor."""
        dim = self.mask_dim
        return 1 if dim is None else int(self.event_shape[dim])

    @property
    def is_point_mass(self) -> bool:
        """True when ``p`` is the Python number 0 (no masking, no sampling)."""
        return not isinstance(self.p, torch.Tensor) and self.p == 0.0

    def _p_as_tensor(self) -> torch.Tensor:
        if isinstance(self.p, torch.Tensor):
            return self.p
        return torch.tensor(self.p, dtype=self.loc.dtype, device=self.loc.device)

    def p_broadcast(self) -> torch.Tensor:
        """``p`` reshaped to broadcast against a value (trailing event dims of size 1)."""
        p = self._p_as_tensor()
        return p.reshape(p.shape + (1,) * self._event_dim)

    def _mask_shape(self, sample_shape: SampleShape) -> torch.Size:
        event = [1] * self._event_dim
        dim = self.mask_dim
        if dim is not None:
            event[dim] = self.event_shape[dim]
        return torch.Size(sample_shape) + self.batch_shape + torch.Size(event)

    def expand(self, batch_shape: Any, _instance: Any = None) -> MaskedWeight:
        new = self._get_checked_instance(type(self), _instance)
        batch_shape = torch.Size(batch_shape)
        new.loc = self.loc.expand(batch_shape + self.event_shape)
        new.p = self.p.expand(batch_shape) if isinstance(self.p, torch.Tensor) else self.p
        new._event_dim = self._event_dim
        new._mask_dim = self._mask_dim
        self._copy_extra_state(new)
        super(MaskedWeight, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _copy_extra_state(self, new: MaskedWeight) -> None:
        """Subclasses copy their own extra attributes (e.g. a temperature) in ``expand``."""

    # --- sampling --------------------------------------------------------------------
    def sample_keep_with(self, shape: torch.Size, p: torch.Tensor | float) -> torch.Tensor:
        """Draw keep-masks of ``shape`` (1 keeps a unit) with drop probability ``p`` broadcasting
        against it (one per draw in :meth:`rsample`, one per example in
        :mod:`pyro_dropout.nn.masking`); subclasses implement this."""
        raise NotImplementedError

    def scaled_keep_with(self, shape: torch.Size, p: torch.Tensor | float) -> torch.Tensor:
        """``keep / (1 - p)``: the inverted-dropout factor of :meth:`sample_keep_with` masks.
        Gradients reach ``p`` where the family's masks carry them (Concrete)."""
        keep = self.sample_keep_with(shape, p)
        if isinstance(p, torch.Tensor):
            return keep / (1.0 - p)
        return keep * (1.0 / (1.0 - p))

    def rsample(self, sample_shape: SampleShape = torch.Size()) -> torch.Tensor:  # noqa: B008
        shape = self._extended_shape(sample_shape)
        if self.is_point_mass:
            return self.loc.expand(shape)
        p = self.p if isinstance(self.p, float) else self.p_broadcast()
        return self.loc * self.scaled_keep_with(self._mask_shape(sample_shape), p)

    def sample(self, sample_shape: SampleShape = torch.Size()) -> torch.Tensor:  # noqa: B008
        with torch.no_grad():
            return self.rsample(sample_shape)

    # --- moments ---------------------------------------------------------------------
    @property
    def mean(self) -> torch.Tensor:
        return self.loc.expand(self.batch_shape + self.event_shape)

    @property
    def variance(self) -> torch.Tensor:
        p = self.p_broadcast()
        return (self.loc.pow(2) * p / (1.0 - p)).expand(self.batch_shape + self.event_shape)

    # --- densities -------------------------------------------------------------------
    def keep_from_value(self, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Recover the (relaxed) keep-mask of each unit from a value ``W``.

        Each unit's mask is read off the weight of largest :math:`|M|` that it scales.
        Returns ``(keep, informative)``, both of shape ``value.shape[:-event_dim] + [K]``;
        a unit whose weights are all zero carries no information (``informative`` False).
        """
        dim = self.mask_dim
        loc = self.loc.expand(value.shape)
        lead = value.shape[: value.dim() - self._event_dim]
        if dim is None:
            m, w = loc.reshape(lead + (1,)), value.reshape(lead + (1,))
        else:
            loc_f = loc.movedim(dim, -1).reshape(lead + (-1, loc.shape[dim]))
            val_f = value.movedim(dim, -1).reshape(lead + (-1, value.shape[dim]))
            idx = loc_f.abs().argmax(dim=-2, keepdim=True)
            m = loc_f.gather(-2, idx).squeeze(-2)
            w = val_f.gather(-2, idx).squeeze(-2)
        informative = m != 0
        ratio = w / torch.where(informative, m, torch.ones_like(m))
        keep = ratio * (1.0 - self._p_as_tensor().expand(lead).unsqueeze(-1))
        return keep, informative

    def log_prob_keep(self, keep: torch.Tensor) -> torch.Tensor:
        """Log-probability (or density) of per-unit keep masks ``keep`` of shape ``[..., K]``.

        ``keep`` has the sample and batch dims in front; ``p`` broadcasts against them.
        """
        raise NotImplementedError

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        r"""Log-probability of the mask configuration that produced ``value``.

        For the Bernoulli family this is the log-mass of the atom :math:`W` (a
        discrete distribution); for the Concrete family it is the log-density of the
        relaxed masks. Inference never needs it: the KL to the prior is analytic.
        """
        if self.is_point_mass:
            return torch.zeros(
                value.shape[: value.dim() - self._event_dim], dtype=value.dtype, device=value.device
            )
        keep, informative = self.keep_from_value(value)
        lp = self.log_prob_keep(keep)
        return torch.where(informative, lp, torch.zeros_like(lp)).sum(-1)
