"""The losses' fast paths: a loss traced once per input shape (``jit=True``), compiled by
``torch.compile`` (``jit="compile"``), and ``JitLoss`` that runs either in plain ``SVI``."""
