"""The losses' one fast path: a loss recorded once per input shape as a graph of ATen operations
(``torch.fx``'s ``make_fx``), replayed, and optionally compiled by ``torch.compile``."""
