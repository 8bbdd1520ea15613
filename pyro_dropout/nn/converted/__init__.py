"""The machinery of :func:`~pyro_dropout.nn.from_module`: the folded draws, the per-draw loop, the
dropouts' placement, the module rules and the likelihoods."""
