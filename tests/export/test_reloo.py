"""Exact LOO for the points PSIS flags (pyro_dropout.export.reloo, through ArviZ's az.reloo)."""

import numpy as np
import pyro
import pytest
import torch
from pyro.infer import SVI

from pyro_dropout import DropoutELBO, DropoutGuide
from pyro_dropout.export import loo, reloo, to_arviz
from pyro_dropout.nn import MLP

az = pytest.importorskip("arviz")


def _fitted_loo():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(12, 1, generator=g) * 4 - 2
    y = torch.sin(2 * x[:, 0]) + 0.2 * torch.randn(12, generator=g)
    pyro.clear_param_store()
    pyro.set_rng_seed(1)
    model = MLP(1, hidden=(8,), tau="learned")
    guide = DropoutGuide(model)
    svi = SVI(model, guide, pyro.optim.Adam({"lr": 1e-2}), DropoutELBO())
    for _ in range(100):
        svi.step(x, y)
    with pytest.warns(UserWarning, match="Pareto k"):
        return x, y, loo(to_arviz(model, guide, x, y, num_samples=100))


def test_reloo_refits_once_per_flagged_point_and_keeps_the_others():
    x, y, psis = _fitted_loo()
    flagged = np.asarray(psis.pareto_k) > 0.7
    assert 0 < flagged.sum() < len(x)  # the case reloo is for: some points flagged, not all
    before, store = np.asarray(psis.loo_i).copy(), dict(pyro.get_param_store().items())
    calls = []

    def fit(model, guide, xs, ys):
        calls.append(len(xs))
        svi = SVI(model, guide, pyro.optim.Adam({"lr": 1e-2}), DropoutELBO())
        for _ in range(20):
            svi.step(xs, ys)

    result = reloo(lambda: MLP(1, hidden=(8,), tau="learned"), x, y, psis, fit=fit, num_samples=50)
    assert calls == [len(x) - 1] * int(flagged.sum())
    after = np.asarray(result.loo_i)
    assert np.array_equal(after[~flagged], before[~flagged]) and np.isfinite(after).all()
    assert not np.isclose(after[flagged], before[flagged]).any()
    assert float(result.elpd_loo) == pytest.approx(after.sum())
    assert (np.asarray(result.pareto_k)[flagged] == 0).all()
    assert np.array_equal(np.asarray(psis.loo_i), before)  # the caller's result is left as it was
    assert dict(pyro.get_param_store().items()).keys() == store.keys()


def test_reloo_refuses_what_it_cannot_score():
    x, y, psis = _fitted_loo()
    with pytest.raises(ValueError, match="one value per row of x"):
        reloo(lambda: MLP(1), x[:5], y[:5], psis)
    with pytest.raises(ValueError, match="one row per point"):
        reloo(lambda: MLP(1), x, y[:5], psis)
    with pytest.raises(ValueError, match="k_thresh must be a finite number"):
        reloo(lambda: MLP(1), x, y, psis, k_thresh=float("nan"))  # before: the PSIS result unchanged
    with pytest.raises(ValueError, match="reloo: steps must be a positive int, got 0"):
        reloo(lambda: MLP(1), x, y, psis, steps=0)  # before: untrained refits scored
