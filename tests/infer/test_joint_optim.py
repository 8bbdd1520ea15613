"""``JointOptim``: one PyTorch optimizer for all parameters, the same updates and saved states as
``pyro.optim``."""

import copy

import pyro
import pyro.distributions as dist
import pytest
import torch
from pyro.infer import SVI, Trace_ELBO

from pyro_dropout import DropoutELBO, DropoutGuide
from pyro_dropout.infer import JointOptim
from pyro_dropout.nn import MLP


def _data(steps, seed=1):
    g = torch.Generator().manual_seed(seed)
    xs = [torch.randn(16, 3, generator=g) for _ in range(steps)]
    return [(x, x.sum(-1)) for x in xs]


def _train(optim, steps=20, model=None, state=None, guide=None):
    pyro.set_rng_seed(0)
    model = model or MLP(3, 1, hidden=(8,))
    guide = guide or DropoutGuide(model, dropout=0.2)
    data = _data(steps)
    if guide.prototype_trace is None:  # set up first, so that a new guide and one going on draw alike
        guide(*data[0], num_data=100)
        pyro.set_rng_seed(0)
    svi = SVI(model, guide, optim, DropoutELBO())
    if state is not None:
        optim.set_state(state)
    losses = [svi.step(x, y, num_data=100) for x, y in data]
    return losses, {k: v.detach().clone() for k, v in pyro.get_param_store().items()}


def test_the_same_updates_as_pyro_optim():
    pyro.clear_param_store()
    reference = _train(pyro.optim.Adam({"lr": 1e-2}))
    pyro.clear_param_store()
    joint = _train(JointOptim(torch.optim.Adam, {"lr": 1e-2}))
    assert joint[0] == pytest.approx(reference[0], rel=1e-6)  # Adam's state is per parameter either way
    for name, value in reference[1].items():
        assert torch.allclose(joint[1][name], value, rtol=1e-6, atol=1e-7), name


@pytest.mark.parametrize("first, second", [("pyro", "joint"), ("joint", "pyro"), ("pyro", "pyro")])
def test_states_move_between_pyro_optim_and_joint_optim(first, second):
    make = {
        "pyro": lambda: pyro.optim.Adam({"lr": 1e-2}),
        "joint": lambda: JointOptim(torch.optim.Adam, {"lr": 1e-2}),
    }
    pyro.clear_param_store()
    model = MLP(3, 1, hidden=(8,))
    guide = DropoutGuide(model, dropout=0.2)
    optim = make[first]()
    _train(optim, steps=5, model=model, guide=guide)
    # copies: the optimizer's and the store's states hold the tensors that training goes on to change
    state, params = copy.deepcopy(optim.get_state()), copy.deepcopy(pyro.get_param_store().get_state())
    assert len(state) == 4 and all(s["state"][0]["step"] == 5 for s in state.values())
    continued = _train(optim, steps=5, model=model, guide=guide)  # training goes on
    pyro.get_param_store().set_state(params)  # copies: a saved state, which a new guide takes
    resumed = _train(make[second](), steps=5, model=model, state=state)
    assert resumed[0] == pytest.approx(continued[0], rel=1e-6)


def test_only_the_parameters_of_the_step_move():
    pyro.clear_param_store()
    optim = JointOptim(torch.optim.Adam, {"lr": 1e-2})
    _train(optim, steps=3)
    before = {k: v.detach().clone() for k, v in pyro.get_param_store().items()}

    def other_model():
        loc = pyro.param("other_loc", torch.zeros(2))
        pyro.sample("obs", dist.Normal(loc, 1.0).to_event(1), obs=torch.ones(2))

    svi = SVI(other_model, lambda: None, optim, Trace_ELBO())
    for _ in range(3):
        svi.step()
    store = pyro.get_param_store()
    assert (store["other_loc"].detach() > 0).all()  # the new parameter is stepped towards the data
    for name, value in before.items():  # the first model's are left as they were
        assert torch.equal(store[name].detach(), value), name


def test_per_parameter_settings_are_refused():
    with pytest.raises(ValueError, match="JointOptim: optim_args must be a dict"):
        JointOptim(torch.optim.Adam, lambda name: {"lr": 1e-2})
