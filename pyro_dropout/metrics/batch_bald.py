r"""BatchBALD (Kirsch, van Amersfoort & Gal 2019): a batch of points to label, scored jointly.

The top k of BALD picks near-duplicates: each is informative alone, together they say the same
thing. BatchBALD scores a batch :math:`S` by the mutual information between its labels jointly
and the weights,

$$
a(S) = \mathcal H[y_S] - \sum_{i \in S} \tfrac1T \textstyle\sum_t \mathcal H[p_t(y_i)],
\qquad p(y_S) = \tfrac1T \textstyle\sum_t \prod_{i \in S} p_t(y_i),
$$

and builds it greedily (the function is submodular: the greedy batch is within :math:`1 - 1/e`
of the best). The joint predictive needs every draw to be *one* function applied to every point
of the pool, which is how this library draws: a draw's masks are shared by every row it
predicts (:func:`~pyro_dropout.prediction.predict`), so ``probs[t]`` is one network's output.

**Cost.** The chosen points' product probabilities are kept per draw and configuration,
``[T, M]``: exactly (:math:`M = C^{|S|}`) while that is at most ``num_configurations``, else
``num_configurations`` configurations sampled from the joint predictive (ancestral sampling:
a draw, then each chosen label from that draw), the estimator of the paper. Each greedy step
costs :math:`O(N\,T\,M\,C)` time and, in pieces of ``piece`` candidates, :math:`O(piece\,M\,C)`
memory beyond the ``[T, M]`` table.
"""

from __future__ import annotations

import torch

from ..ops import is_positive_int
from ._checks import check_probs
from .classification import entropy

__all__ = ["MAX_CONFIGURATIONS", "batch_bald", "joint_entropy"]

MAX_CONFIGURATIONS = 2**24  # the table joint_entropy enumerates: draws x configurations (128 MiB in float64)


def joint_entropy(probs: torch.Tensor) -> torch.Tensor:
    r"""The exact entropy of the joint predictive of all N points of ``probs`` ``[T, N, C]``,
    :math:`\mathcal H[y_1, ..., y_N]` under :math:`p(y) = \frac1T \sum_t \prod_n p_t(y_n)`, by
    enumerating the :math:`C^N` configurations (small cases: tests and checks; at most
    :data:`MAX_CONFIGURATIONS` of them, for each draw)."""
    p = check_probs(probs, "joint_entropy: probs")
    configurations = p.shape[2] ** p.shape[1]
    if configurations * p.shape[0] > MAX_CONFIGURATIONS:
        raise ValueError(
            f"joint_entropy: {p.shape[2]} classes on {p.shape[1]} points are {p.shape[2]}^{p.shape[1]} "
            f"configurations for each of {p.shape[0]} draws, more than the {MAX_CONFIGURATIONS:,} it "
            "enumerates; batch_bald(probs, k, num_configurations=...) estimates it by sampling"
        )
    table = torch.ones(p.shape[0], 1, dtype=p.dtype)
    for n in range(p.shape[1]):
        table = (table.unsqueeze(-1) * p[:, n].unsqueeze(1)).reshape(p.shape[0], -1)
    joint = table.mean(0)
    return -torch.special.xlogy(joint, joint).sum()


def _sample(table: torch.Tensor, m: int, g: torch.Generator | None) -> torch.Tensor:
    """``m`` configurations of the exact table's, drawn from the joint predictive they enumerate."""
    picked = torch.multinomial(table.mean(0), m, replacement=True, generator=g)
    return table[:, picked]


def _extend(table: torch.Tensor, p: torch.Tensor, exact: bool, g: torch.Generator | None) -> torch.Tensor:
    """The chosen set's table ``[T, M]`` with one more point ``p`` ``[T, C]``: every configuration
    times each of its labels (exact), or each sampled configuration with a label drawn for it."""
    if exact:
        return (table.unsqueeze(-1) * p.unsqueeze(1)).reshape(table.shape[0], -1)
    weights = table / table.sum(0, keepdim=True)  # each configuration's draw, given its labels so far
    draw = torch.multinomial(weights.T, 1, generator=g).squeeze(-1)  # [M]
    labels = torch.multinomial(p[draw], 1, generator=g).squeeze(-1)  # [M]
    return table * p[:, labels]


def _gains(table: torch.Tensor, probs: torch.Tensor, exact: bool, piece: int) -> torch.Tensor:
    """:math:`\\mathcal H[y_S, y_c]` for every candidate ``c`` ``[N]`` (exactly, or estimated from
    the sampled configurations as the paper does)."""
    t = table.shape[0]
    out = torch.empty(probs.shape[1], dtype=probs.dtype)
    weight = table.sum(0) / t  # p(y_S) of each configuration [M]
    for start in range(0, probs.shape[1], piece):
        chunk = probs[:, start : start + piece]  # [T, n, C]
        joint = torch.einsum("tm,tnc->nmc", table, chunk) / t  # p(y_S = m, y_c)
        if exact:
            out[start : start + piece] = -torch.special.xlogy(joint, joint).sum((1, 2))
        else:  # E over sampled y_S of -sum_c p(y_c | y_S) log p(y_S, y_c)
            tiny = torch.finfo(probs.dtype).tiny  # 1e-300 is 0 in float32: log(0) made NaN scores
            conditional = joint / weight.clamp_min(tiny)[:, None]
            out[start : start + piece] = -(conditional * joint.clamp_min(tiny).log()).sum(-1).mean(-1)
    return out


def batch_bald(
    probs: object,
    k: int,
    *,
    num_configurations: int = 10_000,
    piece: int = 256,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The greedy BatchBALD batch of ``k`` points of the pool ``probs`` ``[T, N, C]`` (one draw's
    probabilities per row of ``probs``: the same function for every point): ``(indices [k],
    scores [k])``, each score the batch's joint mutual information after that point was added.
    With ``k = 1`` it is the point of highest BALD."""
    p = check_probs(probs, "batch_bald: probs", min_draws=2)
    n = p.shape[1]
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= n:
        raise ValueError(f"batch_bald: k must be an int in [1, {n}] (the pool's points), got {k!r}")
    if not is_positive_int(piece):
        raise ValueError(
            f"batch_bald: piece (candidates scored at once) must be a positive int, got {piece!r}"
        )
    if (
        isinstance(num_configurations, bool)
        or not isinstance(num_configurations, int)
        or num_configurations < 1
    ):
        raise ValueError(f"batch_bald: num_configurations must be a positive int, got {num_configurations!r}")
    conditional = entropy(p).mean(0)  # E_w H[y_i | w], [N]
    table = torch.ones(p.shape[0], 1, dtype=p.dtype)
    chosen: list[int] = []
    scores: list[float] = []
    exact = True
    for _ in range(k):
        if exact and table.shape[1] > num_configurations:  # from here on, sampled configurations
            table, exact = _sample(table, num_configurations, generator), False
        joint = _gains(table, p, exact, piece)
        gain = joint - conditional - (conditional[chosen].sum() if chosen else 0.0)
        if chosen:
            gain[chosen] = -torch.inf
        best = int(gain.argmax())
        chosen.append(best)
        scores.append(float(gain[best]))
        table = _extend(table, p[:, best], exact, generator)
    return torch.tensor(chosen), torch.tensor(scores, dtype=p.dtype)
