"""R independent networks in one model (MLP(runs=R)) equal R separate networks."""

import pyro
import pytest
import torch
from pyro.infer import SVI

from pyro_dropout import DropoutELBO, DropoutGuide
from pyro_dropout.nn import MLP

R, N, D = 3, 20, 2


def _data():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(R, N, D, generator=g, dtype=torch.float64)
    return x, x.sum(-1) + 0.1 * torch.randn(R, N, generator=g, dtype=torch.float64)


@pytest.mark.parametrize("per_run_length_scale", [False, True])
def test_vectorised_runs_train_exactly_like_separate_runs(per_run_length_scale):
    torch.set_default_dtype(torch.float64)
    x, y = _data()
    tau = torch.tensor([1.0, 2.0, 4.0])
    # each run its own prior length-scale (Concrete dropout's grid), or all the default 1.0
    lengths = torch.tensor([0.3, 1.0, 3.0]) if per_run_length_scale else torch.ones(R)
    together = MLP(D, hidden=(5,), tau=tau, runs=R, length_scale=lengths if per_run_length_scale else 1.0)
    guide = DropoutGuide(together, dropout=0.0)  # p = 0: deterministic, so the comparison is exact
    guide(x, y)
    init = {k: v.clone() for k, v in guide.median().items()}
    svi = SVI(together, guide, pyro.optim.Adam({"lr": 0.05}), DropoutELBO())
    for _ in range(60):
        svi.step(x, y, num_data=50)
    for r in range(R):
        pyro.clear_param_store()
        single = MLP(D, hidden=(5,), tau=float(tau[r]), length_scale=float(lengths[r]))
        g = DropoutGuide(single, dropout=0.0)
        g(x[r], y[r])
        with torch.no_grad():
            for name, param in g.named_parameters():
                site = name.removeprefix("locs.").removesuffix("_unconstrained")
                param.copy_(init[site][r, 0])  # the run's slice, without the plate slot
        svi_r = SVI(single, g, pyro.optim.Adam({"lr": 0.05}), DropoutELBO())
        for _ in range(60):
            svi_r.step(x[r], y[r], num_data=50)
        for site, value in g.median().items():
            assert torch.allclose(value, guide.median()[site][r, 0], atol=1e-8), (r, site)


def test_per_run_rates_and_shapes():
    x, y = _data()
    x, y = x.float(), y.float()
    p = torch.tensor([[0.05], [0.1], [0.2]])
    model = MLP(D, hidden=(5,), tau="learned", runs=R)
    guide = DropoutGuide(model, dropout={"hidden.0.weight": p, "output.weight": p})
    guide(x, y)
    assert torch.equal(guide.dropout_rates()["hidden.0.weight"], p)
    sample = guide(x, y)
    assert sample["hidden.0.weight"].shape == (R, 1, 5, D) and sample["tau"].shape == (R, 1)
    loss = DropoutELBO(num_particles=4).loss(model, guide, x, y)
    assert torch.isfinite(torch.tensor(loss))


def test_bad_runs_inputs():
    x, y = _data()
    with pytest.raises(ValueError, match="runs=3"):
        MLP(D, runs=R)(x[0], y[0])
    with pyro.validation_enabled(True), pytest.raises(ValueError, match="needs runs=R"):
        MLP(D, tau=torch.ones(R))
    model = MLP(D, hidden=(5,), runs=R)
    with pytest.raises(ValueError, match=r"must broadcast to the site's batch shape \(3, 1\)"):
        DropoutGuide(model, dropout=lambda name, site: torch.full((R,), 0.1))(x.float(), y.float())


def test_a_single_run_keeps_its_plate_dim():
    """With R = 1 the runs dim has size 1 like a plate slot; it must not be stripped."""
    x, y = _data()
    x, y = x[:1].float(), y[:1].float()
    model = MLP(D, hidden=(5,), runs=1)
    guide = DropoutGuide(model, dropout=0.1)
    loss = DropoutELBO(num_particles=4).loss(model, guide, x, y)
    assert torch.isfinite(torch.tensor(loss))
    from pyro_dropout import predict

    pred = predict(model, guide, x, y, num_samples=6)
    assert pred["obs"].shape == (6, 1, N) and pred.log_likelihood["obs"].shape == (6, 1, N)
