r"""Dropout masks held from one pass of a network to the next: what a draw of a language model's own
MC dropout is while it generates, and while its continuations are scored.

A network's own MC dropout draws a new mask for every element at every pass. Generating a sequence
one token at a time with a key-value cache draws each position's masks once: the positions already
seen are not computed again. Without a cache the whole prefix is computed again at every step, and
:class:`HeldMasks` makes that the same draw: the ``i``-th dropout call of every pass gets the
``i``-th mask, grown where its input grew (a new position: fresh masks for the new entries, the old
ones kept). Scoring several continuations of one prompt under one draw needs one mask for all of
them: with ``groups=(S, N)`` a pass's rows are ``S`` draws × ``c`` continuations × ``N`` prompts
(draw-major) and the mask of draw ``s`` and prompt ``n`` serves its ``c`` continuations.

Every dropout is held: element, channel and alpha dropout, and attention dropout (attention runs
in its reference form within the mode, ``F.scaled_dot_product_attention``'s math kernel).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils._python_dispatch import TorchDispatchMode

from ...distributions import bernoulli_keep

__all__ = ["HeldMasks"]

_ATEN = torch.ops.aten


class HeldMasks(TorchDispatchMode):
    """Within the mode, the dropout masks of each pass (:meth:`new_pass` before it) are held.

    It acts where every dropout draws its mask, below the functions a forward calls (so the
    attention dropout inside ``F.multi_head_attention_forward`` is seen too): ``bernoulli_`` on a
    mask buffer (dropout, channel dropout, alpha dropout on a CPU) and ``native_dropout`` (on a
    GPU); attention runs in its reference form (``F.scaled_dot_product_attention``'s math kernel),
    whose dropout is such a call.

    :param groups: ``(S, N)``: each mask drawn per draw and prompt and shared by the continuations
        between them in the rows (``S·c·N``, draw-major); ``None``: every row its own draw.
    """

    def __init__(self, groups: tuple[int, int] | None = None) -> None:
        super().__init__()
        self.groups = groups
        self.masks: list[tuple[torch.Tensor, float]] = []
        self.calls = 0
        self.rows = 0
        self._kernel: Any = None

    def new_pass(self, rows: int) -> None:
        """The next pass, of ``rows`` rows, starts: its first dropout call takes the first mask."""
        self.calls, self.rows = 0, rows

    def __enter__(self) -> HeldMasks:
        self._kernel = sdpa_kernel(SDPBackend.MATH)
        self._kernel.__enter__()
        return super().__enter__()

    def __exit__(self, *exc: Any) -> None:
        try:
            super().__exit__(*exc)
        finally:
            self._kernel.__exit__(*exc)

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func is _ATEN.bernoulli_.float:
            noise = args[0]
            keep = float(args[1] if len(args) > 1 else kwargs.get("p", 0.5))
            if 0 < keep < 1:
                return noise.copy_(self._mask(noise.shape, 1 - keep, noise.device))
        if func is _ATEN.native_dropout.default:
            x, p, train = args[0], float(args[1]), args[2] if len(args) > 2 else kwargs.get("train")
            if train and 0 < p < 1:
                kept = self._mask(x.shape, p, x.device).to(x.dtype)
                return x * kept / (1 - p), kept.bool()
        return func(*args, **kwargs)

    def _mask(self, shape: torch.Size, p: float, device: torch.device) -> torch.Tensor:
        index = self.calls
        self.calls += 1
        dim = None if self.groups is None else self._row_dim(shape)
        wanted = self._stored_shape(shape, dim)
        if index < len(self.masks):
            held, rate = self.masks[index]
            if rate != p:
                raise ValueError(f"generation: dropout call {index} changed its rate from {rate} to {p}")
            if held.shape != wanted:
                held = self._grown(held, wanted, index, p, device)
                self.masks[index] = (held, p)
        else:
            held = self._draw(wanted, p, device)
            self.masks.append((held, p))
        return self._expanded(held, shape, dim)

    def _draw(self, shape: torch.Size, p: float, device: torch.device) -> torch.Tensor:
        return bernoulli_keep(shape, 1.0 - p, device).to(torch.get_default_dtype())

    def _grown(
        self, held: torch.Tensor, shape: torch.Size, index: int, p: float, device: torch.device
    ) -> torch.Tensor:
        """``held`` grown to ``shape``: the entries it had kept, fresh ones at the new positions."""
        if held.dim() != len(shape) or any(a > b for a, b in zip(held.shape, shape, strict=True)):
            raise ValueError(
                f"generation: dropout call {index}'s input went from {tuple(held.shape)} to {tuple(shape)}; "
                "its masks can be held only while its positions grow"
            )
        grown = self._draw(shape, p, device)
        grown[tuple(slice(0, n) for n in held.shape)] = held
        return grown

    # --- masks shared by the continuations of a draw and a prompt (groups) -------------------
    def _row_dim(self, shape: torch.Size) -> int:
        """The dim of a pass's rows (batch-first, or time-first: dim 1)."""
        assert self.groups is not None
        for dim in (0, 1)[: len(shape)]:
            if shape[dim] == self.rows:
                return dim
        raise ValueError(
            f"generation: a dropout's input {tuple(shape)} has no dim of the pass's {self.rows} rows: its "
            "masks cannot be shared by the continuations of a draw"
        )

    def _stored_shape(self, shape: torch.Size, dim: int | None) -> torch.Size:
        """The shape a mask is kept at: with groups (rows on ``dim``), one continuation per draw and
        prompt."""
        if self.groups is None or dim is None:
            return torch.Size(shape)
        draws, prompts = self.groups
        return torch.Size([*shape[:dim], draws * prompts, *shape[dim + 1 :]])

    def _expanded(self, held: torch.Tensor, shape: torch.Size, dim: int | None) -> torch.Tensor:
        if self.groups is None or dim is None:
            return held
        draws, prompts = self.groups
        count = shape[dim] // (draws * prompts)
        split = held.unflatten(dim, (draws, 1, prompts))
        return split.expand(*split.shape[:dim], draws, count, prompts, *split.shape[dim + 3 :]).flatten(
            dim, dim + 2
        )
