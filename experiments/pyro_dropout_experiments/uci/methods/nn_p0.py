"""The network without dropout (paper 000, §5.3: Boston with p = 0 gives RMSE 3.07, test LL -2.59).

MC dropout's model and loss with the drop probability held at 0: every weight is a point mass,
so training is MAP with the same weight decay, and only ``tau`` is chosen on the validation rows.
"""

from __future__ import annotations

from typing import Any

from ..method import GridSetup
from .mc_dropout import MCDropout

__all__ = ["NoDropout"]


class NoDropout(MCDropout):
    masked = False

    def grid(self, setup: GridSetup) -> list[dict[str, Any]]:
        return [{"p": 0.0, "tau": tau} for tau in setup.tau_values]

    def draws(self, num_samples: int) -> int:
        return 1  # every draw is the same function
