"""The commands' progress bars: tqdm's, with a rate and a time left that leave out the first step.

A command's first step compiles a graph or fills a cache: 20 s where the next ones take
milliseconds. Counted in the rate, it makes the bar promise hours ("42:53:22") for a job of
minutes, and tqdm's smoothing takes many updates to forget it. Here the timers start again when
the first step ends; until the second one ends the time left shows as "?"."""

from __future__ import annotations

from typing import Any

from tqdm.auto import tqdm

__all__ = ["Progress"]


class Progress(tqdm):
    """``tqdm`` (same arguments) whose rate and estimate start after its first ``update``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.warm = False

    def update(self, n: float | None = 1) -> bool | None:
        shown = super().update(n)
        if not self.warm and not self.disable:
            self.warm = True
            done: float = getattr(self, "n")  # noqa: B009 (tqdm's count, untyped)
            self.reset()  # its timers and the averages of its rate, without the first step
            self.n = self.initial = self.last_print_n = done
            self.refresh()
        return shown
