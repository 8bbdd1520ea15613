r"""``ConvertedModel``: a converted network and its likelihood, run on the draws the way the
network's forward was written.

With ``masks="own"`` the draws are the network's own MC dropout (:mod:`.own`). With
``masks="shared"``, without draws (one set of weights) the forward runs as written; under ``S``
draws it runs on the draws folded into the batch (:mod:`~pyro_dropout.nn.converted.fold`). Before a
folded result is trusted, once per input shape, the model checks it: with the same two draws, one
folded pass and two passes of one draw each (:mod:`~pyro_dropout.nn.converted.loop`) on the first
rows must agree. Where they do not (a forward that mixes the rows of a batch, or moves the batch
axis) the draws run one at a time from then on, with a warning that names the output and the
difference. A shared mask is never drawn where the network draws its own: a dropout call left in
the forward (inside a module torch.fx does not enter) is refused when it runs.
"""

from __future__ import annotations

import math
import warnings
from functools import partial
from typing import Any

import pyro
import torch
from pyro.nn import PyroModule

from ...guards import Guard
from ..functional import strip_plate_slots
from ..layers import BayesianLayer, minibatch_scale
from ..masking import per_example_active
from .dropout_calls import RefuseDropout
from .fold import Fold, FoldError, folding
from .inputs import Inputs, forward_names
from .likelihoods import check_targets, observe
from .loop import Draw, current_rows, one_draw
from .own import CHECK_ROWS, evaluating, network_output, own_pass
from .source import SourceForward

__all__ = ["ConvertedModel"]


def _plate_draws() -> torch.Size:
    """The draw dims of the plates around the model (its data plate at dim -1 is not yet entered):
    a plate of ``S`` at dim -2 is ``(S,)``."""
    frames = [(f.dim, f.size) for f in pyro.poutine.runtime.get_plates() if f.dim is not None and f.dim <= -2]
    if not frames:
        return torch.Size()
    shape = [1] * (-min(dim for dim, _ in frames) - 1)
    for dim, size in frames:
        shape[len(shape) + dim + 1] = size
    return torch.Size(shape)


_SHARED_ROUTES = {
    "fold": "the draws folded into the batch at the first layer whose weights differ between draws "
    "(the layers before it run once)",
    "eager": "the draws folded into the batch at the input",
    "loop": "one pass per draw (the forward mixes the rows of a batch, or per_draw=True)",
}


class ConvertedModel(PyroModule):
    """The model :func:`~pyro_dropout.nn.from_module` returns: ``forward(x, y=None, num_data=None)``
    runs the converted network and observes ``y`` in a plate ``"data"`` (scaled by
    ``num_data / N`` for minibatches). ``x`` is what the network's forward takes: one tensor
    ``[N, ...]``, a tuple of positional inputs or a dict of keyword inputs
    (:mod:`~pyro_dropout.nn.converted.inputs`; ``shared``: the names of inputs that are the same
    for every example, where their shape cannot tell). ``rates``: the drop probability each weight site
    declares; ``mask_sites``: the dropouts kept as mask sites (see
    :mod:`~pyro_dropout.nn.converted.dropout_sites`); ``per_draw``: ``True`` runs the draws one at
    a time always, ``None`` (the default) decides by the self-check."""

    checks_its_batching = True  # prediction's own self-check is not needed (pyro_dropout.prediction.batching)

    @property
    def sizes_its_passes(self) -> bool:
        """With ``masks="own"`` its draws' pass is split into cache-sized pieces on a CPU (own.py),
        so prediction need not size its chunks by a draw's memory."""
        return self.masks == "own"

    def __init__(
        self,
        net: torch.nn.Module,
        likelihood: Any,
        tau: float,
        rates: dict[str, float],
        mask_sites: list[str],
        source: torch.nn.Module | None = None,
    ) -> None:
        super().__init__()
        self.net, self.likelihood, self.tau = net, likelihood, tau
        # while tau is learned (MCDropout.fit): the param in Pyro's store that holds log(tau) / its
        # scale (the scale sets log tau's step under the optimiser's learning rate)
        self.tau_param: str | None = None
        self.tau_scale = 1.0
        # masks="own": the network never converted, whose own forward the draws run (.source); a
        # child module (it moves with .to()), read only through ``self.source``: PyroModule's
        # __getattr__ would register a plain module's parameters in Pyro's param store
        self.source_net = source
        self.source = None if source is None else SourceForward(source, net)
        self._state = Guard([("the network", partial(getattr, self.source, "source"))])
        self._state_version: tuple[Any, int] = (None, 0)
        self.rates, self.mask_sites = rates, mask_sites
        # no layer made Bayesian (masks="own"): the network's own MC dropout, nothing to refine
        self.own_dropout_only = not rates and source is not None
        self.per_draw: bool | None = None
        self.masks = "own"  # how the dropouts draw their masks (from_module's masks=)
        self.untraced = False  # torch.fx could not trace the forward
        self.functional_dropouts: dict[str, float] = {}  # F.dropout calls of the traced forward: rates
        self.rate_sources: dict[str, list[str]] = {}  # weight site -> the dropout modules making its rate
        self.verdicts: dict[tuple, str] = {}  # input signature -> "fold", "eager" or "loop"
        self.row_verdicts: dict[tuple, tuple[bool, int]] = {}  # masks="own": (rows apart, widest per row)
        self.row_reasons: dict[tuple, str | None] = {}  # masks="own": why the rows may not share a pass
        self.routes: dict[tuple, tuple[str, str]] = {}  # inputs -> (their shapes, how their draws ran)
        self.shared: frozenset[str] = frozenset()  # inputs declared the same for every example
        self.input_names, self.any_keyword = forward_names(source if source is not None else net)

    def inputs(self, x: Any) -> Inputs:
        """``x`` (a tensor, a tuple or a dict of the forward's inputs) as :class:`~.inputs.Inputs`."""
        if isinstance(x, dict) and not self.any_keyword:
            unknown = [k for k in x if k not in self.input_names]
            if unknown:
                net = type(self.source_net or self.net).__name__
                raise ValueError(
                    f"from_module: the inputs {unknown} are not arguments of {net}.forward (its inputs: "
                    f"{', '.join(self.input_names) or 'none'}); a dict batch's targets are its 'labels'"
                )
        return Inputs.of(x, self.shared, self.input_names)

    def note_route(self, inputs: Inputs, route: str) -> None:
        """Keep how the draws at inputs like these ran (:meth:`explain`)."""
        key = inputs.key()
        if key not in self.routes and len(self.routes) >= 32:
            self.routes.clear()
        self.routes[key] = (inputs.describe(), route)

    def explain(self) -> str:
        """How the draws ran, by input shape: the network's own forward on all the draws' rows
        together, one pass per draw (and why), or, with ``masks="shared"``, folded into the batch."""
        lines = [f"converted network ({type(self.source_net or self.net).__name__}, masks={self.masks!r}):"]
        for shapes, route in self.routes.values():
            lines.append(f"  inputs {shapes}: {route}")
        return "\n".join(lines if self.routes else [*lines, "  no draws yet"])

    def state_key(self) -> int:
        """A number that changes whenever the network's modes, settings or tensors do (a guard's
        fingerprint of it, read quickly): the verdicts of the row check are kept per state."""
        now = self._state.now()
        last, version = self._state_version
        if now is not last and now != last:
            self._state_version = (now, version + 1)
        return self._state_version[1]

    def train(self, mode: bool = True) -> ConvertedModel:
        """The model's own flag only: the network keeps the modes MC dropout runs it in (its dropout
        on, batch norm on its running statistics), as ``model.eval()`` (Lightning's validation)
        would otherwise switch its dropout off and make every draw the same function."""
        self.training = mode
        return self

    # --- the weights -------------------------------------------------------------------------
    def _sample_weights(self) -> dict[str, int]:
        """Sample every Bayesian weight and bias now (the module cache keeps them for this call);
        ``{site: event dims}``."""
        sites: dict[str, int] = {}
        for module in self.net.modules():
            if isinstance(module, BayesianLayer):
                module.declared_weight()
                sites[module._pyro_get_fullname("weight")] = len(module.weight_shape)
                if module.has_bias:
                    module.declared_bias()
                    sites[module._pyro_get_fullname("bias")] = 1
        return sites

    def _draws(self, sites: dict[str, int]) -> torch.Size:
        """The draw dims ``D`` of the sampled weights (plate slots dropped), broadcast together; with
        no weight sampled (no layer made Bayesian), those of the plates the model runs in."""
        cache, batch = self._pyro_context.cache, []
        for name, core in sites.items():
            if name in cache:
                value = strip_plate_slots(cache[name], core)
                batch.append(value.shape[: value.dim() - core])
        if not batch and self.own_dropout_only:
            return _plate_draws()
        return torch.broadcast_shapes(*batch) if batch else torch.Size()

    # --- the passes --------------------------------------------------------------------------
    def _folded(self, x: Inputs, draws: torch.Size, eager: bool = False) -> torch.Tensor:
        """The draws folded into the batch: at the first layer whose weights differ between draws
        (the layers before it run once), or, ``eager``, at the input."""
        fold = Fold(draws, x.rows)
        with folding(fold):
            out = network_output((x.repeat(fold.size) if eager else x).call(self.net))
        rows = (fold.rows, fold.size * fold.rows)
        if not isinstance(out, torch.Tensor) or out.dim() == 0 or out.shape[0] not in rows:
            got = f"{type(out).__name__} {tuple(getattr(out, 'shape', ()))}"
            raise FoldError(f"the network returned {got}, not the folded batch")
        return fold.repeat(out).reshape(*draws, x.rows, *out.shape[1:])

    def _looped(
        self, x: Inputs, draws: torch.Size, sites: dict[str, int], count: int | None = None
    ) -> torch.Tensor:
        if per_example_active() and self.masks == "shared":
            raise ValueError(
                "from_module: this network's draws run one at a time (its forward mixes the rows of a "
                "batch, or per_draw=True), and per-example masks need them folded: train it with "
                "per_example_masks=False"
            )
        outs = []
        for index in range(math.prod(draws) if count is None else count):
            with one_draw(self._pyro_context.cache, sites, Draw(index, draws)), current_rows(x.rows):
                outs.append(network_output(x.call(self.net)))
        if not all(isinstance(o, torch.Tensor) for o in outs):
            return outs[0]
        out = torch.stack(outs)
        return out if count is not None else out.reshape(*draws, *out.shape[1:])

    def _verdict(self, x: Inputs, draws: torch.Size, sites: dict[str, int]) -> str:
        """``"fold"``, ``"eager"`` or ``"loop"`` for inputs like ``x``: the self-check, once per input
        shape (with ``masks="own"``, with the network's dropout off, and the fold made at the input:
        a dropout before the first Bayesian layer draws for every draw's rows)."""
        if self.per_draw:
            return "loop"
        own = self.masks == "own"
        key = x.key()
        if own and math.prod(draws) < 2:
            return "loop"  # one draw: its one pass, exactly
        if key in self.verdicts or math.prod(draws) < 2 or (per_example_active() and not own):
            return self.verdicts.get(key, "eager" if own else "fold")
        rows, why = x.take(0, CHECK_ROWS), ""
        with torch.no_grad(), evaluating(self.net, off=own):
            looped = self._looped(rows, draws, sites, count=2)
            for mode in ("eager",) if own else ("fold", "eager"):
                try:
                    folded = self._folded(rows, draws, eager=mode == "eager")
                    folded = folded.reshape(math.prod(draws), -1)[:2]
                except Exception as e:  # the forward cannot take the folded batch: the next way
                    why = f"the batched pass failed ({type(e).__name__}: {e})"
                    continue
                gap = float((folded - looped.reshape(folded.shape)).abs().max()) if folded.numel() else 0.0
                scale = float(looped.abs().max()) if looped.numel() else 0.0
                if math.isfinite(gap) and gap <= 1e-4 * max(1.0, scale):
                    return self._decide(key, mode, "")
                why = f"with the same two draws they differ by up to {gap:.3g}"
        return self._decide(key, "loop", why)

    def _decide(self, key: tuple, verdict: str, why: str) -> str:
        self.verdicts[key] = verdict
        if verdict == "loop":
            warnings.warn(
                f"from_module: the network's output (site 'obs') under batched draws does not match one "
                f"pass per draw: {why}. Its forward treats the rows of a batch together (batch statistics, "
                f"a reduction over dim 0, a moved batch axis); its draws run one at a time from now on "
                f"(exact, slower)",
                stacklevel=5,
            )
        return verdict

    def folded_draws(self, x: Inputs, draws: torch.Size, sites: dict[str, int]) -> torch.Tensor:
        """The draws of weights that differ between draws, folded into the batch where the
        self-check allows it, else one at a time."""
        verdict = self._verdict(x, draws, sites)
        self.note_route(x, _SHARED_ROUTES[verdict])
        if verdict == "loop":
            return self._looped(x, draws, sites)
        return self._folded(x, draws, eager=verdict == "eager")

    # --- the model ---------------------------------------------------------------------------
    def _check_input(self, x: Any) -> Inputs:
        if isinstance(x, list) and x and all(isinstance(t, torch.Tensor) for t in x):
            raise TypeError(
                f"from_module: x is a list of {len(x)} tensors; give a network of several inputs a tuple "
                "(positional inputs) or a dict (keyword inputs)"
            )
        if not isinstance(x, torch.Tensor | tuple | dict):
            raise TypeError(
                "from_module: x must be a tensor [N, ...], a tuple of the forward's positional inputs or a "
                f"dict of its keyword inputs, got {type(x).__name__}"
            )
        if isinstance(x, torch.Tensor) and (x.dim() == 0 or x.shape[0] == 0):
            raise ValueError(
                f"from_module: x must be a tensor [N, ...] with N >= 1 rows, got {tuple(x.shape)!r}"
            )
        inputs = self.inputs(x)
        if inputs.rows == 0:
            raise ValueError(f"from_module: the inputs ({inputs.describe()}) have no rows")
        ref = next((t for t in [*self.net.parameters(), *self.net.buffers()] if t.is_floating_point()), None)
        for name, value in zip(inputs.names, inputs.values, strict=True):
            if (
                ref is not None
                and isinstance(value, torch.Tensor)
                and value.is_floating_point()
                and value.dtype != ref.dtype
            ):
                shown, fix = ("x", "x") if isinstance(x, torch.Tensor) else (f"the input {name!r}", name)
                raise TypeError(
                    f"from_module: {shown} is {value.dtype} but the network is {ref.dtype}: pass "
                    f"{fix}.to({ref.dtype}) (or convert the network with .to({value.dtype}) before "
                    "from_module)"
                )
        return inputs

    def _outputs(self, x: Inputs, draws: torch.Size, sites: dict[str, int]) -> Any:
        """The network's outputs under the draws ``draws``: ``[*draws, N, ...]``."""
        if self.masks == "own":
            return own_pass(self, x, draws, sites)
        with RefuseDropout(type(self.net).__name__):
            if not draws:
                with current_rows(x.rows):
                    return network_output(x.call(self.net))
            return self.folded_draws(x, draws, sites)

    def forward(self, x: Any, y: torch.Tensor | None = None, num_data: int | None = None) -> torch.Tensor:
        inputs = self._check_input(x)
        n = inputs.rows
        if num_data is not None and (
            isinstance(num_data, bool) or not isinstance(num_data, int) or num_data < n
        ):
            raise ValueError(
                f"from_module: num_data must be a whole number >= the {n} rows of x, got {num_data!r}"
            )
        sites = self._sample_weights()
        draws = self._draws(sites)
        f = self._outputs(inputs, draws, sites)
        if not isinstance(f, torch.Tensor):
            raise TypeError(
                f"from_module: the network's forward returned a {type(f).__name__}, not a tensor (nor a "
                "model output with .logits); the likelihood needs its outputs as one tensor [N, outputs]: "
                "wrap the network in a module whose forward returns that tensor (for an nn.LSTM, say, "
                "its last step's output)"
            )
        check_targets(self.likelihood, y, n)
        event = f.dim() - len(draws) - 1
        scale = minibatch_scale("from_module", num_data, n)
        with pyro.plate("data", n, dim=-1), pyro.poutine.scale(scale=scale):
            tau = (
                self.tau if self.tau_param is None else torch.exp(self.tau_scale * pyro.param(self.tau_param))
            )
            return observe(self.likelihood, f, y, tau, event)
