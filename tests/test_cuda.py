"""The GPU path: everything follows the model's device. Runs only where CUDA is available."""

import pyro
import pytest
import torch
from pyro.infer import SVI, Predictive

from pyro_dropout import BBAlpha, DropoutELBO, DropoutGuide
from pyro_dropout.distributions import bernoulli_keep
from pyro_dropout.infer.recorded.graph import RECORD_AT
from pyro_dropout.nn import MLP

pytestmark = pytest.mark.cuda  # skipped where there is none (conftest.py)


@pytest.mark.parametrize("concrete", [False, True])
@pytest.mark.parametrize(
    "loss",
    [
        DropoutELBO(num_particles=2),
        BBAlpha(0.5, num_particles=4),
        DropoutELBO(num_particles=2, per_example_masks=True),
        BBAlpha(0.5, num_particles=4, per_example_masks=True),
    ],
)
def test_training_and_prediction_stay_on_the_gpu(concrete, loss):
    device = torch.device("cuda")
    x, y = torch.randn(32, 3, device=device), torch.randn(32, device=device)
    model = MLP(3, hidden=(16,), tau="learned").to(device)
    guide = DropoutGuide(model, concrete=True) if concrete else DropoutGuide(model, dropout=0.1)
    svi = SVI(model, guide, pyro.optim.Adam({"lr": 1e-2}), loss)
    for _ in range(3):
        assert torch.isfinite(torch.tensor(svi.step(x, y)))
    assert all(p.device.type == "cuda" for p in guide.parameters())
    out = Predictive(model, guide=guide, num_samples=5, parallel=True)(x)
    assert out["obs"].device.type == "cuda" and out["obs"].shape == (5, 32)


def test_bernoulli_keep_on_the_gpu_has_its_probability():
    device = torch.device("cuda")
    torch.manual_seed(0)
    keep = torch.tensor([[1.0], [0.9], [0.3]], device=device)
    draws = bernoulli_keep(torch.Size([3, 200_001]), keep, device)
    assert draws.device.type == "cuda" and draws.dtype == torch.bool
    assert bool(draws[0].all())
    freq = draws[1:].double().mean(1).cpu()
    se = torch.tensor([0.9 * 0.1, 0.3 * 0.7], dtype=torch.float64).div(200_001).sqrt()
    assert bool(((freq - torch.tensor([0.9, 0.3], dtype=torch.float64)).abs() < 5 * se).all())  # 5 se


def test_evaluate_streams_on_the_gpu():
    """evaluate() and the calibration scores on CUDA tensors (miscalibration_area built its
    coverage grid on the CPU; found on an H100)."""
    from pyro_dropout import evaluate
    from pyro_dropout.metrics import miscalibration_area

    g = torch.Generator().manual_seed(0)
    means, y = torch.randn(20, 30, generator=g).cuda(), torch.randn(30, generator=g).cuda()
    assert 0 <= miscalibration_area(means, y, torch.tensor(0.5).cuda()) <= 0.5
    model = MLP(2, hidden=(8,), tau=4.0).cuda()
    x, target = torch.randn(30, 2).cuda(), torch.randn(30).cuda()
    guide = DropoutGuide(model, dropout=0.2)
    guide(x, target)
    report = evaluate(model, guide, x, target, num_samples=20, chunk_size=7)
    assert report.num_samples == 20 and report.mean.device.type == "cuda"


def test_auto_chunks_on_the_gpu_are_few_and_large():
    """On a GPU the chunk is sized from a memory budget, not capped at 100 draws as on a CPU."""
    from pyro_dropout.prediction.predictive import predict_chunks

    model = MLP(3, hidden=(16,), tau=1.0).cuda()
    guide = DropoutGuide(model, dropout=0.1)
    x = torch.randn(50, 3).cuda()
    guide(x)
    sizes = [
        c["mean"].shape[0] for c in predict_chunks(model, guide, x, num_samples=300, return_sites=["mean"])
    ]
    assert sizes == [300]  # 50 x 16 floats a draw: far inside the budget


@pytest.mark.parametrize("vectorize", [True, False])
def test_kfold_follows_the_models_device(vectorize):
    pytest.importorskip("arviz")  # the result is ArviZ's ELPDData
    from pyro_dropout.export import kfold

    device = torch.device("cuda")
    x, y = torch.randn(30, 2, device=device), torch.randn(30, device=device)
    make = lambda: MLP(2, hidden=(8,), tau="learned").to(device)  # noqa: E731
    result = kfold(make, x, y, k=3, steps=10, num_samples=10, vectorize=vectorize)
    assert len(result["loo_i"]) == 30 and bool(torch.isfinite(torch.as_tensor(result["loo_i"].values)).all())


def test_reloo_follows_the_models_device():
    """Exact LOO of a model on the GPU: the refits run there, the scores come back to ArviZ."""
    np = pytest.importorskip("numpy")
    pytest.importorskip("arviz")
    from pyro_dropout.export import loo, reloo, to_arviz

    device = torch.device("cuda")
    x = torch.rand(12, 1, device=device) * 4 - 2
    y = torch.sin(2 * x[:, 0]) + 0.2 * torch.randn(12, device=device)
    model = MLP(1, hidden=(8,), tau="learned").to(device)
    guide = DropoutGuide(model)
    svi = SVI(model, guide, pyro.optim.Adam({"lr": 1e-2}), DropoutELBO())
    for _ in range(100):
        svi.step(x, y)
    psis = loo(to_arviz(model, guide, x, y, num_samples=100))
    psis.pareto_k[:] = 0.0
    psis.pareto_k[0] = 1.0  # one point flagged: one refit on the GPU
    make = lambda: MLP(1, hidden=(8,), tau="learned").to(device)  # noqa: E731
    result = reloo(make, x, y, psis, steps=20, num_samples=50)
    assert np.isfinite(np.asarray(result.loo_i)).all()


def test_metrics_take_draws_on_the_gpu_and_labels_on_the_cpu():
    """Every classification metric gives the CPU's value for probabilities on the GPU and labels
    left on the CPU (as a DataLoader leaves them); tolerance 1e-9 (float64 on both)."""
    from pyro_dropout import metrics

    g = torch.Generator().manual_seed(0)
    probs = torch.softmax(torch.randn(20, 50, 4, generator=g, dtype=torch.float64), -1)
    labels = torch.randint(0, 4, (50,), generator=g)
    logits = torch.randn(20, 50, 4, generator=g)
    cases = {
        "accuracy": lambda p, y: metrics.accuracy(p, y),
        "nll": lambda p, y: metrics.negative_log_likelihood(p, y),
        "brier": lambda p, y: metrics.brier_score(p, y),
        "ece": lambda p, y: metrics.expected_calibration_error(p, y),
        "adaptive_ece": lambda p, y: metrics.adaptive_ece(p, y),
        "classwise_ece": lambda p, y: metrics.classwise_ece(p, y),
        "aurc": lambda p, y: metrics.aurc(p, y),
        "auroc": lambda p, y: metrics.auroc(p[0, :25, 0], p[0, 25:, 0].cpu()),
    }
    for name, score in cases.items():
        on_cpu, on_gpu = score(probs, labels), score(probs.cuda(), labels)
        assert on_gpu == pytest.approx(on_cpu, abs=1e-9), name
    t_cpu = metrics.fit_temperature(logits, labels)
    assert metrics.fit_temperature(logits.cuda(), labels) == pytest.approx(t_cpu, rel=1e-4)


@pytest.mark.parametrize("sparse", [False, True])
def test_the_gp_baselines_fit_where_the_data_are(sparse):
    """``fit_gp`` and ``fit_sparse_gp`` on CUDA data: the kernel and noise follow the data."""
    from pyro_dropout.baselines import fit_gp, fit_sparse_gp, gp_predictive

    x = torch.linspace(-2, 2, 40, device="cuda").unsqueeze(-1)
    y = torch.sin(2 * x[:, 0]) + 0.1 * torch.randn(40, device="cuda")
    model = fit_sparse_gp(x, y, num_inducing=8, steps=50) if sparse else fit_gp(x, y, steps=50)
    mean, sd = gp_predictive(model, x)
    assert mean.device.type == "cuda" and bool(torch.isfinite(sd).all())


def test_a_converted_network_with_a_mask_site_trains_and_predicts_on_the_gpu():
    """``from_module`` on a network on the GPU whose dropout feeds a tanh (a mask site, not a
    weight's family): the mask is drawn on the input's device."""
    from torch import nn

    from pyro_dropout import predict
    from pyro_dropout.nn import from_module

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 16), nn.Dropout(0.3), nn.Tanh(), nn.Linear(16, 3)).cuda()
    x, y = torch.randn(40, 4, device="cuda"), torch.randint(0, 3, (40,), device="cuda")
    model = from_module(net, likelihood="categorical")
    guide = DropoutGuide(model)
    svi = SVI(model, guide, pyro.optim.Adam({"lr": 1e-2}), DropoutELBO())
    losses = [svi.step(x, y) for _ in range(5)]
    assert all(torch.isfinite(torch.tensor(losses)))
    assert any(name.endswith(".mask") for name in guide.dropout_rates())
    pred = predict(model, guide, x, num_samples=10)
    assert pred.probs["obs"].device.type == "cuda"


def test_epsilon_greedy_acts_on_the_gpu():
    """Its seeded CPU draws (which actions explore, and where to) meet the GPU's scores there."""
    from pyro_dropout.policies import EpsilonGreedy
    from pyro_dropout_experiments.bandit import RewardModel

    model = RewardModel(2, 4, (16,), dropout=0.5).cuda()
    guide = DropoutGuide(model)
    x, a, r = (
        torch.randn(8, 2, device="cuda"),
        torch.randint(4, (8,), device="cuda"),
        torch.randn(8, device="cuda"),
    )
    guide(x, a, r)
    actions = EpsilonGreedy(model, guide, epsilon=0.5, seed=3).act(torch.randn(100, 2, device="cuda"))
    assert actions.device.type == "cuda" and actions.shape == (100,)


@pytest.mark.parametrize("loss", ["elbo", "bbalpha"])
def test_the_recorded_graphs_run_on_the_gpu_and_give_the_eager_gradients(loss):
    device = torch.device("cuda")
    x, y = torch.randn(32, 3, device=device), torch.randn(32, device=device)
    grads = {}
    for graph in ("eager", "record", "compile"):
        pyro.clear_param_store()
        pyro.set_rng_seed(0)
        model = MLP(3, hidden=(16,)).to(device)
        guide = DropoutGuide(model, dropout=0.1)
        objective = DropoutELBO(graph=graph) if loss == "elbo" else BBAlpha(0.5, num_particles=4, graph=graph)
        svi = SVI(model, guide, pyro.optim.Adam({"lr": 1e-2}), objective)
        for _ in range(RECORD_AT + 1):  # recorded at its 8th step: the 9th replays
            svi.step(x, y, num_data=100)
        pyro.set_rng_seed(1)
        objective.loss_and_grads(model, guide, x, y, num_data=100)
        store = pyro.get_param_store()
        grads[graph] = {n: store[n].unconstrained().grad.clone() for n in store}
        if graph != "eager":
            (recorded,) = objective.graph_losses.values()
            (route,) = recorded.recorded.routes.by_key.values()
            assert len(route.graphs) == 1 and not route.eager, recorded.explain()
    for graph in ("record", "compile"):
        for name, grad in grads["eager"].items():  # float32 on the GPU: rounding differs more
            assert torch.allclose(grads[graph][name], grad, rtol=1e-3, atol=1e-3), (graph, name)


def test_the_front_door_runs_on_the_device_and_leaves_the_network_where_it_is(tmp_path):
    from torch import nn

    from pyro_dropout import MCDropout

    device = torch.device("cuda")
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 2))
    x, y = torch.randn(32, 3, device=device), torch.randint(0, 2, (32,), device=device)
    bnn = MCDropout(net, "classification", num_samples=10, device=device)
    bnn.fit([(x, y)], epochs=2)
    torch.manual_seed(1)
    probs = bnn.probs(x)
    assert probs.device.type == "cuda" and bnn.evaluate(x, y).accuracy >= 0
    assert all(p.device.type == "cpu" for p in net.parameters())  # the user's network stays
    bnn.save(tmp_path / "front.pt")
    back = MCDropout.load(tmp_path / "front.pt", net, device=device)
    torch.manual_seed(1)
    assert torch.equal(back.probs(x), probs)
    assert all(p.device.type == "cuda" for p in bnn.to_module().parameters())


def test_a_fitted_front_door_moves_with_to_and_draws_the_same():
    from torch import nn

    from pyro_dropout import MCDropout

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 2))
    x, y = torch.randn(32, 3), torch.randint(0, 2, (32,))
    bnn = MCDropout(net, "classification", num_samples=10)
    bnn.fit([(x, y)], epochs=2)
    means = {k: v.clone() for k, v in bnn.guide.median().items()}
    assert bnn.to("cuda") is bnn
    assert all(v.device.type == "cuda" for v in bnn.guide.median().values())
    assert all(torch.equal(v.cpu(), means[k]) for k, v in bnn.guide.median().items())
    assert bnn.probs(x.cuda()).device.type == "cuda"
    bnn.fit([(x.cuda(), y.cuda())], epochs=1)  # and trains there
