r"""Filling :class:`Predictions` from the trace of a chunk of draws: each site's draws, means,
variances, class probabilities and log-likelihoods, tidied to ``[T, N, *event]``."""

from __future__ import annotations

import os

import pyro.distributions as dist
import torch
from pyro.poutine.trace_struct import Trace
from pyro.poutine.util import site_is_subsample

from ..infer.loss_terms import Site
from .draws import Predictions

__all__ = [
    "DRAWS_PLATE",
    "Buffers",
    "Outputs",
    "check_batch_dims",
    "chunk_outputs",
    "collect_site",
    "plate_nesting",
    "tidy",
]

DRAWS_PLATE = "_pyro_dropout_draws"  # the plate of the draws of a chunk
Outputs = dict[tuple[str, str], torch.Tensor]  # (group of Predictions, site) -> the chunk's draws


def plate_nesting(trace: Trace) -> int:
    """How many vectorised plates the sample sites of ``trace`` nest (the draws' plate not counted)."""
    dims = [
        f.dim
        for site in trace.nodes.values()
        if site["type"] == "sample"
        for f in site["cond_indep_stack"]
        if f.vectorized and f.dim is not None and f.name != DRAWS_PLATE
    ]
    return -min(dims) if dims else 0


def check_batch_dims(name: str, site: Site, nesting: int) -> None:
    """A likelihood with more batch dims than the draws and the model's plates came from a weight
    that kept its plate slot and broadcast against the data: its draws would come out
    ``[S, S, N]`` (every draw's weights paired with every other's), silently. Say so instead."""
    shape = site["fn"].batch_shape
    if len(shape) > nesting + 1:
        raise ValueError(
            f"at site '{name}', the likelihood has batch shape {tuple(shape)} under {nesting + 1} plates "
            "(the draws and the model's): a weight sampled outside the data plate kept its plate slot and "
            "broadcast against the data. Use pyro_dropout.nn.Linear, or pyro_dropout.nn.functional.linear "
            "(x @ W.T that drops the slot) or matmul (x @ W, for W stored [in, out]), for the layers of "
            "the model; or predict one draw at a time with parallel=False"
        )


def tidy(value: torch.Tensor, site: Site, event_dim: int, nesting: int, draws: int) -> torch.Tensor:
    """``[draws, *plate slots, *event]`` -> ``[draws, *enclosing plates, *event]``."""
    batch_dims = nesting + 1
    value = value.reshape((1,) * max(0, batch_dims + event_dim - value.dim()) + value.shape)
    value = value.expand((draws, *value.shape[1:]))
    enclosing = {f.dim for f in site["cond_indep_stack"] if f.vectorized and f.name != DRAWS_PLATE}
    keep = [0] + [1 + i for i in range(nesting) if (i - nesting) in enclosing]
    stray = [i - nesting for i in range(nesting) if 1 + i not in keep and value.shape[1 + i] > 1]
    if stray:
        raise ValueError(
            f"at site '{site['name']}', the value has batch shape {tuple(value.shape[1:batch_dims])} "
            f"(event_dim {event_dim}) with dims {stray} in no plate: put the site inside the plate "
            "of those dims, or count them in its event_dim"
        )
    batch = [value.shape[i] for i in keep]
    return value.reshape(batch + list(value.shape[batch_dims:]))


class Buffers:
    """Outputs preallocated for all draws and filled chunk by chunk (no concatenation copy)."""

    def __init__(self, num_samples: int) -> None:
        self.num_samples, self.offset = num_samples, 0
        self.tensors: dict[tuple[str, str], torch.Tensor] = {}

    def put(self, outputs: Outputs, size: int) -> None:
        """Store a chunk of ``size`` draws after the ones stored so far (a chunk of all the draws
        is kept as it is: no copy)."""
        if self.offset == 0 and size < self.num_samples:
            self._check_fits(outputs, size)
        for key, value in outputs.items():
            if self.offset == 0 and size == self.num_samples and value.is_contiguous():
                self.tensors[key] = value
                continue
            if key not in self.tensors:
                self.tensors[key] = value.new_empty((self.num_samples, *value.shape[1:]))
            self.tensors[key][self.offset : self.offset + size] = value
        self.offset += size

    def _check_fits(self, outputs: Outputs, size: int) -> None:
        """Refuse, before allocating, draws whose outputs cannot fit in the device's memory."""
        per_draw = sum(v.numel() // max(size, 1) * v.element_size() for v in outputs.values())
        need = per_draw * self.num_samples
        device = next(iter(outputs.values())).device if outputs else torch.device("cpu")
        have = device_memory(device)
        if have is not None and need > have:
            raise ValueError(
                f"predict: num_samples={self.num_samples} draws of these outputs take "
                f"{need / 2**30:,.1f} GiB, more than the {device.type} memory ({have / 2**30:,.1f} GiB): "
                "ask for fewer draws, fewer points at a time, or fewer return_sites"
            )


def device_memory(device: torch.device) -> int | None:
    """The bytes of ``device``'s memory (the machine's RAM on the CPU), None where unknown."""
    if device.type == "cuda" and torch.cuda.is_available():
        return int(torch.cuda.get_device_properties(device).total_memory)
    if device.type == "cpu" and hasattr(os, "sysconf"):
        try:
            return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
        except (ValueError, OSError):
            return None
    return None


def collect_site(
    name: str,
    site: Site,
    is_latent: bool,
    out: Predictions,
    outputs: Outputs,
    wanted: set[str] | None,
    nesting: int,
    size: int,
    batched: bool = True,
) -> None:
    """Add the draws of one site to ``outputs``, and what it is (kind, distribution, data) to ``out``
    (``batched=False``: one draw, run as the model is written, with no plate of draws: its values
    get a leading draw dim, whatever their batch shape)."""
    fn = site["fn"]

    def add(group: str, value: torch.Tensor, event_dim: int) -> None:
        # detached: a point-mass site's value can be its parameter itself, which requires grad
        value = value.detach()
        outputs[(group, name)] = (
            tidy(value, site, event_dim, nesting, size) if batched else value.unsqueeze(0)
        )

    deterministic = bool(site["infer"].get("_deterministic", False))
    likelihood = not (is_latent or deterministic)  # sampled by the model itself: an observation site
    if likelihood and batched:
        check_batch_dims(name, site, nesting)
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
    base = fn
    while isinstance(base, dist.Independent):  # a class per position: Categorical(...).to_event(k)
        base = base.base_dist
    probs = getattr(base, "probs", None) if fn.support.is_discrete else None
    if probs is not None:
        if probs.dim() == len(base.batch_shape):  # Bernoulli: one probability -> two classes
            probs = torch.stack([1 - probs, probs], dim=-1)
        add("probs", probs, 1 + fn.event_dim)  # [..., N, *positions, C]
        return
    try:
        add("means", fn.mean, fn.event_dim)
        add("variances", fn.variance, fn.event_dim)
    except NotImplementedError:
        pass


def chunk_outputs(
    out: Predictions,
    trace: Trace,
    latents: Trace,
    wanted: set[str] | None,
    nesting: int,
    size: int,
    batched: bool = True,
) -> Outputs:
    """The draws of a chunk's trace, tidied, by (group, site); what each site is goes to ``out``
    (``batched=False``: one draw's trace, without a plate of draws)."""
    outputs: Outputs = {}
    for name, site in trace.nodes.items():
        if site["type"] == "sample" and not site_is_subsample(site):
            latent = name in latents.nodes
            collect_site(name, site, latent, out, outputs, wanted, nesting, size, batched)
    return outputs
