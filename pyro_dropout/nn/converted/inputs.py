r"""A network's inputs for one batch, as its ``forward`` takes them: one tensor ``x``, a tuple of
positional inputs (``(x, t)``: a diffusion U-Net, ``(x, edge_index)``: a graph network), or a dict
of keyword inputs (``{"input_ids": ..., "attention_mask": ...}``: a Hugging Face model).

Each tensor is either **per example** (its dim 0 holds the batch's rows: split, repeated for the
draws, sliced for the self-checks) or **shared** by every example (a graph's ``edge_index``, a
timestep given once, any value that is not a tensor): passed to every call as it is. The rows ``N``
are those of the first tensor not declared shared; a tensor whose dim 0 is not ``N``, or that has
no dim, is shared; one whose dim 0 is ``N`` by chance (a dense ``[N, N]`` adjacency) is declared
shared by its argument's name (``shared=``). A wrong guess can only make draws slower, never
different: the rows of several draws share a pass only where the self-check finds the network's
rows apart.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["Inputs", "forward_names", "repeat_rows"]


def repeat_rows(x: torch.Tensor, count: int) -> torch.Tensor:
    """``count`` copies of the rows of ``x``, draw-major: ``[count·N, ...]``."""
    return x.expand(count, *x.shape).reshape(count * x.shape[0], *x.shape[1:])


def forward_names(net: torch.nn.Module) -> tuple[list[str], bool]:
    """The names of ``net.forward``'s parameters, in order (a positional input is named by its), and
    whether it takes any keyword (``**kwargs``, or a forward whose signature cannot be read)."""
    try:
        parameters = inspect.signature(net.forward).parameters.values()
    except (TypeError, ValueError):  # a builtin forward
        return [], True
    names = [p.name for p in parameters if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    return names, any(p.kind == p.VAR_KEYWORD for p in parameters)


@dataclass(frozen=True)
class Inputs:
    """One batch's inputs: ``args`` and ``kwargs`` as the forward takes them, the names of its
    inputs (``names[i]`` of the ``i``-th leaf: positional by the forward's parameter names) and
    which are per example (``batched``), with ``rows`` examples."""

    args: tuple
    kwargs: dict
    names: tuple[str, ...]
    batched: tuple[bool, ...]
    rows: int
    given: Any  # the inputs as the caller gave them: a tensor, a tuple or a dict

    @classmethod
    def of(cls, x: Any, shared: Iterable[str] = (), names: list[str] | None = None) -> Inputs:
        """``x`` (a tensor, a tuple or a dict) as inputs; ``shared``: the names of inputs that are the
        same for every example; ``names``: the forward's parameters (a positional input's name)."""
        if isinstance(x, dict):
            bad = [k for k in x if not isinstance(k, str)]
            if bad:
                raise TypeError(
                    f"from_module: a dict of inputs needs str keys (argument names), got {bad[0]!r}"
                )
            args, kwargs = (), dict(x)
            leaf_names = tuple(kwargs)
        else:
            args, kwargs = (tuple(x) if isinstance(x, tuple) else (x,)), {}
            known = names or []
            leaf_names = tuple(known[i] if i < len(known) else f"input {i}" for i in range(len(args)))
        values = [*args, *kwargs.values()]
        for name, value in zip(leaf_names, values, strict=True):
            if isinstance(value, tuple | list | dict) and any(
                isinstance(v, torch.Tensor) for v in _leaves(value)
            ):
                raise TypeError(
                    f"from_module: the input {name!r} is a {type(value).__name__} of tensors; give the "
                    "network's inputs as one tensor, a flat tuple of positional inputs or a flat dict of "
                    "keyword inputs"
                )
        shared = set(shared)
        rows = _rows(leaf_names, values, shared)
        batched = tuple(
            isinstance(v, torch.Tensor) and v.dim() > 0 and v.shape[0] == rows and n not in shared
            for n, v in zip(leaf_names, values, strict=True)
        )
        return cls(args, kwargs, leaf_names, batched, rows, x)

    # --- what the forward is called with -----------------------------------------------------
    def call(self, forward: Callable[..., Any]) -> Any:
        return forward(*self.args, **self.kwargs)

    @property
    def values(self) -> list[Any]:
        return [*self.args, *self.kwargs.values()]

    def per_example(self) -> list[torch.Tensor]:
        """The tensors that are per example (their dim 0 the rows)."""
        return [v for v, b in zip(self.values, self.batched, strict=True) if b]

    def shared(self) -> dict[str, Any]:
        """The inputs shared by every example, by name."""
        return {n: v for n, v, b in zip(self.names, self.values, self.batched, strict=True) if not b}

    def first(self) -> torch.Tensor:
        """The first per-example tensor (a plain input ``x`` itself)."""
        return self.per_example()[0]

    def _with(self, change: Callable[[torch.Tensor], torch.Tensor], rows: int) -> Inputs:
        values = [change(v) if b else v for v, b in zip(self.values, self.batched, strict=True)]
        args, rest = tuple(values[: len(self.args)]), values[len(self.args) :]
        kwargs = dict(zip(self.kwargs, rest, strict=True))
        given = (
            kwargs if isinstance(self.given, dict) else (args if isinstance(self.given, tuple) else args[0])
        )
        return Inputs(args, kwargs, self.names, self.batched, rows, given)

    # --- the rows ----------------------------------------------------------------------------
    def take(self, start: int, stop: int) -> Inputs:
        """Rows ``start:stop`` of every per-example input (the shared ones as they are)."""
        stop = min(stop, self.rows)
        return self._with(lambda v: v[start:stop], max(0, stop - start))

    def repeat(self, count: int) -> Inputs:
        """``count`` copies of the rows, draw-major: ``[count·N, ...]`` per-example inputs."""
        return self._with(lambda v: repeat_rows(v, count), count * self.rows)

    def join(self, other: Inputs) -> Inputs:
        """These rows, then ``other``'s (the same inputs, the same shared values)."""
        tail = iter(other.per_example())
        return self._with(lambda v: torch.cat([v, next(tail)]), self.rows + other.rows)

    def nudged(self, scale: float, generator: torch.Generator) -> Inputs:
        """A copy whose real-valued per-example inputs are moved by ``scale`` times their mean size in
        Gaussian noise (token ids and masks stay)."""

        def nudge(v: torch.Tensor) -> torch.Tensor:
            if not v.is_floating_point():
                return v
            noise = torch.randn(v.shape, generator=generator, dtype=v.dtype, device=v.device)
            size = float(v.abs().mean()) if v.numel() else 1.0
            return v + scale * (size or 1.0) * noise

        return self._with(nudge, self.rows)

    @property
    def real_valued(self) -> bool:
        return any(v.is_floating_point() for v in self.per_example())

    def key(self) -> tuple:
        """What a decision about these inputs depends on: each input's name, dtype and shape (a
        per-example input's beyond its rows), and whether it is per example."""
        return tuple(
            _describe(n, v, b) for n, v, b in zip(self.names, self.values, self.batched, strict=True)
        )

    def describe(self) -> str:
        """The inputs' shapes, for messages: ``[N, 3, 32, 32] (torch.float32)`` for one tensor, else
        each by name: ``x [N, 3, 32, 32], t [] (shared)``."""
        if isinstance(self.given, torch.Tensor):
            return f"[{', '.join(['N', *map(str, self.given.shape[1:])])}] ({self.given.dtype})"
        parts = []
        for name, value, batched in zip(self.names, self.values, self.batched, strict=True):
            shape = list(value.shape[1:]) if batched else list(getattr(value, "shape", []))
            dims = ", ".join(["N", *map(str, shape)] if batched else map(str, shape))
            shown = f"[{dims}]" if isinstance(value, torch.Tensor) else type(value).__name__
            parts.append(f"{name} {shown}" + ("" if batched else " (shared)"))
        return ", ".join(parts)


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [w for v in value.values() for w in _leaves(v)]
    if isinstance(value, tuple | list):
        return [w for v in value for w in _leaves(v)]
    return [value]


def _rows(names: tuple[str, ...], values: list[Any], shared: set[str]) -> int:
    for name, value in zip(names, values, strict=True):
        if isinstance(value, torch.Tensor) and name not in shared and value.dim() > 0:
            return int(value.shape[0])
    described = ", ".join(names) or "none"
    raise ValueError(
        f"from_module: the inputs ({described}) hold no per-example tensor [N, ...] (one not declared "
        "shared, with a batch dimension)"
    )


def _describe(name: str, value: Any, batched: bool) -> tuple:
    if isinstance(value, torch.Tensor):
        return name, batched, value.dtype, tuple(value.shape[1:] if batched else value.shape), value.device
    plain = isinstance(value, bool | int | float | str | type(None))
    return name, batched, type(value), value if plain else id(value)
