"""K-fold's folds trained together (pyro_dropout.export.kfold_runs): one MLP with runs=K, each
run's held-out fold masked out of its likelihood.

Exactness is checked where it can be exact: with drop probability 0 the guide's draws are not
random, so the runs model's loss must equal the sum of the K fold-wise losses (to float32
rounding, 1e-4 relative) with the same gradients (1e-6), and 50 steps of CompiledSVI must end
where K separate fits from the same start end (1e-5)."""

import numpy as np
import pyro
import pytest
import torch
from pyro import poutine

from pyro_dropout import CompiledSVI, DropoutELBO, DropoutGuide
from pyro_dropout.export import fold_of, kfold
from pyro_dropout.export.kfold_runs import Folds, runs_model, split_scores
from pyro_dropout.nn import MLP

az = pytest.importorskip("arviz")

N, K = 11, 3


def _data():
    g = torch.Generator().manual_seed(0)
    return torch.rand(N, 2, generator=g), torch.randn(N, generator=g)


def _runs_setup(store):
    """The folds' runs model and guide, its parameters moved off their start, and its inputs."""
    x, y = _data()
    folds = fold_of(N, K)
    mask = folds.unsqueeze(0) != torch.arange(K).unsqueeze(1)
    model = Folds(MLP(2, hidden=(5,), tau="learned", runs=K))
    guide = DropoutGuide(model, dropout=0.0)
    args = (x.expand(K, N, 2).contiguous(), y.expand(K, N).contiguous(), mask)
    guide(*args)
    with torch.no_grad():
        for name in store.keys():
            value = store.get_param(name).unconstrained()
            value.add_(0.1 * torch.randn(value.shape, generator=torch.Generator().manual_seed(len(name))))
    return model, guide, args


def _single_like(store, start, run, mask):
    """Fold ``run``'s own model and guide, started at the runs model's values of that run."""
    x, y = _data()
    model = MLP(2, hidden=(5,), tau="learned")
    guide = DropoutGuide(model, dropout=0.0)
    guide(x[mask[run]], y[mask[run]])
    for name in store.keys():
        value = store.get_param(name).unconstrained()
        with torch.no_grad():
            value.copy_(start[name.replace("locs.", "locs.net.")][run].reshape(value.shape))
    return model, guide, (x[mask[run]], y[mask[run]])


def _unconstrained(store):
    return {name: store.get_param(name).unconstrained() for name in store.keys()}


def test_the_observed_mask_leaves_latent_sites_alone():
    x, y = _data()
    mask = torch.zeros(K, N, dtype=torch.bool)
    mask[1, :4] = True
    with pyro.get_param_store().scope():
        model = Folds(MLP(2, hidden=(5,), runs=K))
        trace = poutine.trace(model).get_trace(x.expand(K, N, 2), y.expand(K, N), mask)
    trace.compute_log_prob()
    obs = trace.nodes["obs"]
    assert torch.equal(obs["mask"], mask)
    assert obs["log_prob_sum"] == pytest.approx(float(obs["fn"].log_prob(y)[1, :4].sum()), rel=1e-6)
    latent = [s for s in trace.nodes.values() if s["type"] == "sample" and not s["is_observed"]]
    assert len(latent) == 6 and all(s["mask"] is None for s in latent)  # weights, biases, plates


def test_the_runs_loss_is_the_sum_of_the_fold_losses_with_their_gradients():
    store = pyro.get_param_store()
    with store.scope():
        model, guide, args = _runs_setup(store)
        params = _unconstrained(store)
        loss = DropoutELBO().differentiable_loss(model, guide, *args)
        grads = dict(zip(params, torch.autograd.grad(loss, list(params.values())), strict=True))
    total = 0.0
    for run in range(K):
        with store.scope():
            single, single_guide, single_args = _single_like(store, params, run, args[2])
            mine = _unconstrained(store)
            one = DropoutELBO().differentiable_loss(single, single_guide, *single_args)
            for name, grad in zip(mine, torch.autograd.grad(one, list(mine.values())), strict=True):
                theirs = grads[name.replace("locs.", "locs.net.")][run].reshape(grad.shape)
                assert torch.allclose(theirs, grad, atol=1e-6), (run, name)
            total += float(one.detach())
    assert float(loss) == pytest.approx(total, rel=1e-4)


def test_training_the_folds_together_ends_where_separate_fits_end():
    store = pyro.get_param_store()
    with store.scope():
        model, guide, args = _runs_setup(store)
        start = {name: value.detach().clone() for name, value in _unconstrained(store).items()}
        svi = CompiledSVI(model, guide, pyro.optim.Adam({"lr": 1e-2}), DropoutELBO(num_particles=2))
        for _ in range(50):
            svi.step(*args)
        together = {name: value.detach().clone() for name, value in _unconstrained(store).items()}
    moved = max(float((together[n] - start[n]).abs().max()) for n in start)
    assert moved > 0.1  # the fits went somewhere
    for run in range(K):
        with store.scope():
            single, single_guide, single_args = _single_like(store, start, run, args[2])
            svi = CompiledSVI(
                single, single_guide, pyro.optim.Adam({"lr": 1e-2}), DropoutELBO(num_particles=2)
            )
            for _ in range(50):
                svi.step(*single_args)
            for name, value in _unconstrained(store).items():
                theirs = together[name.replace("locs.", "locs.net.")][run].reshape(value.shape)
                assert torch.allclose(theirs, value, atol=1e-5), (run, name)


def test_only_an_mlp_as_built_is_replicated():
    assert isinstance(runs_model(MLP(2, hidden=(5,)), 4), MLP)
    assert runs_model(MLP(2, hidden=(5,)), 4).runs == 4
    assert "not pyro_dropout.nn.MLP" in runs_model(torch.nn.Linear(2, 1), 4)
    assert "already holds runs=2" in runs_model(MLP(2, runs=2), 4)
    changed = MLP(2, hidden=(5,))
    changed.output = MLP(5, hidden=(3,)).output
    assert "changed after" in runs_model(changed, 4)
    with pytest.raises(ValueError, match="already holds runs=2"):
        MLP(2, runs=2).with_runs(3)
    options = dict(likelihood="heteroscedastic", activation="tanh", length_scale=[1.0, 2.0, 3.0])
    one, two = MLP(3, 2, hidden=(4, 5), **options), MLP(3, 2, hidden=(4, 5), **options, runs=2)
    assert repr(one.with_runs(2)) == repr(two) and one.with_runs(2)._options == two._options


def test_split_scores_takes_each_rows_own_fold_and_the_mean_of_the_others():
    scores = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])
    held, inside = split_scores(scores, torch.tensor([0, 2, 1]))
    assert held.tolist() == [1.0, 8.0, 6.0]
    assert inside.tolist() == [5.5, 3.5, 6.0]


def test_kfold_trains_together_by_default_and_says_why_it_cannot():
    x, y = _data()
    make = lambda: MLP(2, hidden=(4,), tau="learned")  # noqa: E731
    options = dict(k=3, steps=10, num_samples=10)
    auto, forced = kfold(make, x, y, **options), kfold(make, x, y, vectorize=True, **options)
    assert auto["elpd_loo"] == forced["elpd_loo"]  # the same seed, the same path
    looped = kfold(make, x, y, vectorize=False, **options)
    assert looped["elpd_loo"] != auto["elpd_loo"]
    with pytest.raises(ValueError, match="cannot be trained together: a fit= of one's own"):
        kfold(make, x, y, vectorize=True, fit=lambda *a: None, **options)
    with pytest.raises(ValueError, match="not a DropoutGuide"):
        kfold(make, x, y, vectorize=True, guide=pyro.infer.autoguide.AutoNormal, **options)
    double = kfold(lambda: make().double(), x.double(), y.double(), vectorize=True, **options)
    assert np.isfinite(np.asarray(double["loo_i"])).all()  # the runs model takes the model's dtype
    with pytest.raises(ValueError, match="vectorize must be"):
        kfold(make, x, y, vectorize="yes", **options)
