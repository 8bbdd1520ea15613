r"""The draws of a posterior predictive, with documented shapes (:class:`Predictions`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

__all__ = ["Predictions"]


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

    @classmethod
    def of_points(cls, parts: list[Predictions], deterministic: tuple[str, ...] = ()) -> Predictions:
        """The predictions of the points of ``parts`` in order (the batches of a data set), for
        their likelihood sites and the ``deterministic`` sites with a point dim (dim 1); the
        latent draws are left out, each part having drawn its own."""
        if not parts:
            raise ValueError("Predictions.of_points: no parts")
        first = parts[0]
        kept = set(first.likelihood_sites()) | set(deterministic)

        def cat(group: str, dim: int = 1) -> dict[str, torch.Tensor]:
            names = [k for k in getattr(first, group) if k in kept]
            return {k: torch.cat([getattr(p, group)[k] for p in parts], dim=dim) for k in names}

        return cls(
            samples=cat("samples"),
            means=cat("means"),
            variances=cat("variances"),
            probs=cat("probs"),
            log_likelihood=cat("log_likelihood"),
            observed=cat("observed", 0),
            distributions=dict(first.distributions),
            kinds={k: v for k, v in first.kinds.items() if k in kept},
        )
