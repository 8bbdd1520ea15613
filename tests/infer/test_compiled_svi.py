"""CompiledSVI's saved state: a training stopped and resumed in a fresh model equals one never stopped."""

import io

import pyro
import pytest
import torch

from pyro_dropout import DropoutELBO, DropoutGuide
from pyro_dropout.infer import CompiledSVI
from pyro_dropout.infer.recorded.graph import RECORD_AT
from pyro_dropout.nn import MLP

R, N, D = 2, 30, 3


def _batches(device="cpu"):
    """Twelve steps' minibatches, the 4th and 10th smaller (a new recorded shape in each half)."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(R, N, D, generator=g)
    y = x[..., 0] - x[..., 1] + 0.1 * torch.randn(R, N, generator=g)
    sizes = [8, 8, 8, 5, 8, 8, 8, 8, 8, 5, 8, 8]
    return [(x[:, :k].to(device), y[:, :k].to(device)) for k in sizes]


def _svi(concrete, graph="record", device="cpu"):
    pyro.clear_param_store()
    model = MLP(D, hidden=(6,), tau=torch.tensor([1.0, 4.0]), runs=R).to(device)
    rates = {"concrete": True, "init_dropout": 0.2} if concrete else {"dropout": 0.3}
    guide = DropoutGuide(model, **rates)
    return CompiledSVI(model, guide, pyro.optim.Adam({"lr": 0.05}), DropoutELBO(), graph=graph)


def _params():
    return {k: v.detach().clone() for k, v in pyro.get_param_store().items()}


@pytest.mark.parametrize("graph", ["record", "eager"])
@pytest.mark.parametrize("concrete", [False, True])
def test_a_stopped_training_resumes_exactly(concrete, graph, device):
    batches = _batches(device)
    pyro.set_rng_seed(0)
    svi = _svi(concrete, graph, device)
    losses = [svi.step(x, y, num_data=N) for x, y in batches]
    unstopped = _params()

    pyro.set_rng_seed(0)
    svi = _svi(concrete, graph, device)
    first = [svi.step(x, y, num_data=N) for x, y in batches[:6]]
    buffer = io.BytesIO()
    torch.save(svi.state_dict(), buffer)  # as a file would hold it
    svi.step(*batches[6], num_data=N)  # steps after the save are lost with the process
    # a fresh process: new parameters, another random state, the state loaded before any step
    pyro.set_rng_seed(123)
    svi = _svi(concrete, graph, device)
    buffer.seek(0)
    svi.load_state_dict(torch.load(buffer, weights_only=False))  # the GPU's random state too
    rest = [svi.step(x, y, num_data=N) for x, y in batches[6:]]
    resumed = _params()
    assert first + rest == losses  # the same masks drawn at every step
    assert unstopped.keys() == resumed.keys()
    for name, value in unstopped.items():
        assert value.device.type == device and torch.equal(value, resumed[name]), name
    # the random state carries on too: what follows training (e.g. prediction) draws the same
    after_resumed = torch.rand(3, device=device)
    pyro.set_rng_seed(0)
    svi = _svi(concrete, graph, device)
    for x, y in batches:
        svi.step(x, y, num_data=N)
    assert torch.equal(torch.rand(3, device=device), after_resumed)


def test_setup_loads_a_state_without_a_step():
    batches = _batches()
    pyro.set_rng_seed(0)
    svi = _svi(False)
    for x, y in batches[:3]:
        svi.step(x, y, num_data=N)
    state, trained = svi.state_dict(), _params()
    svi = _svi(False)
    svi.load_state_dict(state)
    svi.setup(*batches[0], num_data=N)
    for name, value in trained.items():
        assert torch.equal(pyro.param(name).unconstrained(), value), name
    assert svi.optimizer is not None and svi.optimizer.state_dict()["state"][0]["step"] == 3


def test_bad_states_are_named():
    batches = _batches()
    svi = _svi(False)
    with pytest.raises(RuntimeError, match="no step has run yet"):
        svi.state_dict()
    svi.step(*batches[0], num_data=N)
    state = svi.state_dict()
    with pytest.raises(ValueError, match=r"lacks \['rng'\]"):
        svi.load_state_dict({k: v for k, v in state.items() if k != "rng"})
    other = _svi(True)  # Concrete dropout: learned rates, parameters the state lacks
    other.load_state_dict(state)
    with pytest.raises(ValueError, match="are not all the model and guide's"):
        other.step(*batches[0], num_data=N)
    name = next(iter(state["params"]))
    wrong = {**state, "params": {**state["params"], name: torch.zeros(7)}}
    with pytest.raises(ValueError, match=rf"{name!r} has shape \(7,\) in the state"):
        svi.load_state_dict(wrong)


def test_a_graph_is_freed_with_its_svi():
    """The recorded graphs belong to their ``CompiledSVI``: nothing global keeps them."""
    import gc
    import weakref

    batches = _batches()
    for _ in range(3):
        svi = _svi(concrete=False)
        for _ in range(RECORD_AT):
            for x, y in batches[:4]:  # two shapes: two graphs
                svi.step(x, y)
        routes = list(svi._graph_loss.recorded.routes.by_key.values())
        assert [len(r.graphs) for r in routes] == [1, 1]
        graph = weakref.ref(next(iter(routes[0].graphs.values()))[0])
        del routes
        del svi
        gc.collect()
        assert graph() is None


@pytest.mark.parametrize("graph", ["record", "eager"])
@pyro.settings.context(module_local_params=True)
def test_module_local_params_keep_two_fits_apart(graph):
    """With Pyro's module_local_params, each model and guide keeps its own parameters (none in
    the global param store), and CompiledSVI finds and trains them."""
    from pyro_dropout import evaluate

    x, y = _batches()[0]
    x, y = x[0], y[0]
    fits = []
    for seed in (0, 1):
        pyro.set_rng_seed(seed)
        model = MLP(D, hidden=(6,), tau=4.0 * (1 + seed))
        guide = DropoutGuide(model)
        svi = CompiledSVI(model, guide, pyro.optim.Adam({"lr": 0.05}), DropoutELBO(), graph=graph)
        guide(x, y)
        start = {k: v.detach().clone() for k, v in guide.median().items()}
        for _ in range(5):
            svi.step(x, y)
        assert all(not torch.equal(start[k], v) for k, v in guide.median().items())
        pyro.set_rng_seed(5)
        fits.append((model, guide, evaluate(model, guide, x, y, num_samples=20).test_ll))
    assert not list(pyro.get_param_store().keys())
    model, guide, test_ll = fits[0]
    pyro.set_rng_seed(5)
    assert evaluate(model, guide, x, y, num_samples=20).test_ll == test_ll  # untouched by the second fit


@pytest.mark.parametrize(
    "optim, expected",
    [
        (pyro.optim.Adam({"lr": 0.01}), {"fused": True}),  # one kernel for every parameter
        (pyro.optim.Adam({"lr": 0.01, "foreach": False}), {"fused": None, "foreach": False}),  # the user's
        (pyro.optim.ClippedAdam({"lr": 0.01}), {}),  # Pyro's own optimizer: neither setting
    ],
    ids=["adam", "adam-foreach-set", "clipped-adam"],
)
def test_the_update_is_fused_where_the_optimizer_takes_it(optim, expected):
    pyro.clear_param_store()
    model = MLP(D, hidden=(6,))
    svi = CompiledSVI(model, DropoutGuide(model, dropout=0.1), optim, DropoutELBO(), graph="record")
    x, y = torch.randn(N, D), torch.randn(N)
    losses = [svi.step(x, y) for _ in range(3)]
    group = svi.state_dict()["optimizer"]["param_groups"][0]
    assert {k: group[k] for k in expected} == expected and all(map(torch.isfinite, map(torch.tensor, losses)))


@pytest.mark.parametrize("where", ["x", "y"])
def test_a_non_finite_input_at_a_recorded_step_is_named_and_nothing_is_updated(where):
    # the inputs are checked once the loss is found non-finite (free while it is finite)
    pyro.clear_param_store()
    model = MLP(D, hidden=(6,))
    svi = CompiledSVI(
        model, DropoutGuide(model, dropout=0.1), pyro.optim.Adam({"lr": 0.01}), DropoutELBO(), graph="record"
    )
    x, y = torch.randn(N, D), torch.randn(N)
    for _ in range(3):
        svi.step(x, y)  # the later steps run the graph
    before = {n: p.detach().clone() for n, p in svi.state_dict()["params"].items()}
    bad_x, bad_y = x.clone(), y.clone()
    (bad_x if where == "x" else bad_y)[2] = float("nan")
    arg = 0 if where == "x" else 1
    with pytest.raises(ValueError, match=rf"model argument {arg} \(shape .*\) contains NaN or inf"):
        svi.step(bad_x, bad_y)
    after = svi.state_dict()["params"]
    assert all(torch.equal(before[n], after[n]) for n in before)


def test_a_scheduler_and_bad_optimizer_settings_are_refused_by_name():
    model = MLP(D, hidden=(6,))
    guide, x = DropoutGuide(model, dropout=0.1), torch.randn(N, D)
    sched = pyro.optim.ExponentialLR(
        {"optimizer": torch.optim.Adam, "optim_args": {"lr": 0.01}, "gamma": 0.5}
    )
    with pytest.raises(ValueError, match=r"does not step a learning-rate scheduler .*ExponentialLR"):
        CompiledSVI(model, guide, sched, DropoutELBO())
    for settings, message in (
        ({"lrr": 0.01}, r"Adam takes no setting \['lrr'\]; its settings: lr, betas"),
        ({"lr": -1.0}, r"Adam's lr must be a finite number >= 0; got -1.0"),
        ({"lr": float("nan")}, r"Adam's lr must be a finite number >= 0; got nan"),
    ):
        pyro.clear_param_store()
        svi = CompiledSVI(model, guide, pyro.optim.Adam(settings), DropoutELBO(), graph="eager")
        with pytest.raises(ValueError, match=message):
            svi.step(x, x.sum(-1))


def test_an_optimizer_setting_given_as_a_string_is_named():
    """Adam({"lr": "0.01"}) dumped the fused Adam's signature before."""
    model = MLP(3, 1, hidden=(8,))
    with pytest.raises(ValueError, match=r"the optimizer's lr is '0.01', a string; give a number"):
        CompiledSVI(model, DropoutGuide(model), pyro.optim.Adam({"lr": "0.01"}), DropoutELBO())
