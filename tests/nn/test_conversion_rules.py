"""The conversion's rules beyond the architectures of test_any_module.py: the self-checks catching
a forward that mixes the rows of a batch (converted) or counts axes from the left (Pyro style),
layers called twice, refusals by name, likelihoods, and every prediction entry point."""

from __future__ import annotations

import warnings

import pyro
import pyro.distributions as dist
import pytest
import torch
import torch.nn.functional as F
from pyro import poutine
from pyro.infer import SVI
from pyro.nn import PyroModule, PyroSample
from torch import nn

from pyro_dropout import BBAlpha, DropoutGuide, evaluate, predict, predict_standard
from pyro_dropout.nn import LeNet, from_module
from pyro_dropout.nn.converted.dropout_calls import FastDropout
from pyro_dropout.prediction import DRAWS_PLATE

TOL = 1e-5


class Centred(nn.Module):
    """A forward that subtracts the batch mean: its rows are not separate."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.drop, self.fc2 = nn.Linear(3, 8), nn.Dropout(0.3), nn.Linear(8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc2(self.drop(torch.relu(self.fc1(x))))
        return h - h.mean(0)


def _draws(model, guide, x, y, n=4):
    with torch.no_grad(), pyro.plate(DRAWS_PLATE, n, dim=-2):
        return poutine.trace(guide).get_trace(x, y)


def _replayed(model, trace, x):
    with torch.no_grad(), pyro.plate(DRAWS_PLATE, trace.nodes["net.fc1.weight"]["value"].shape[0], dim=-2):
        return poutine.trace(poutine.replay(model, trace=trace)).get_trace(x).nodes["mean"]["value"]


def test_the_self_check_catches_a_forward_that_mixes_rows_and_returns_the_per_draw_predictive():
    """masks="shared": the draws' folded pass against one draw at a time, the same masks."""
    torch.manual_seed(0)
    x, y = torch.randn(6, 3), torch.randn(6)
    model = from_module(Centred().eval(), masks="shared")
    guide = DropoutGuide(model)
    guide(x, y)
    draws = _draws(model, guide, x, y)
    with pytest.warns(UserWarning, match=r"site 'obs'.*does not match one pass per draw.*differ by up to"):
        checked = _replayed(model, draws, x)
    exact = from_module(Centred().eval(), masks="shared")
    exact.load_state_dict(model.state_dict())
    exact.per_draw = True  # one draw at a time, always
    assert torch.allclose(checked, _replayed(exact, draws, x), atol=TOL)
    exact.per_draw = None
    exact.verdicts[exact.inputs(x).key()] = "fold"  # what an unchecked batched pass gives
    assert not torch.allclose(checked, _replayed(exact, draws, x), atol=1e-3)


def test_the_own_masks_run_a_forward_that_mixes_rows_one_pass_per_draw():
    """masks="own": a forward that subtracts the batch mean is caught by the rows check, and its
    draws are then exactly the network's own passes in MC dropout, one after another (the same
    random stream, its dropout drawing with the library's Bernoulli draws, as the model's does)."""
    torch.manual_seed(0)
    net, x, y = Centred().eval(), torch.randn(6, 3), torch.randn(6)
    model = from_module(net)
    guide = DropoutGuide(model)
    guide(x, y)
    draws = _draws(model, guide, x, y)
    pyro.set_rng_seed(3)
    with pytest.warns(UserWarning, match=r"does not treat the rows of a batch apart.*one pass each"):
        checked = _replayed(model, draws, x)
    pyro.set_rng_seed(3)
    with torch.no_grad(), FastDropout():
        own = torch.stack([net.train()(x)[:, 0] for _ in range(4)])
    assert torch.allclose(checked, own, atol=TOL)
    assert list(model.row_verdicts.values()) == [(False, 0)]  # one input shape, one state: one verdict


class PyroStyle(PyroModule):
    """pytorch/examples' ending in Pyro's style: log_softmax over dim 1, the data axis under draws."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = PyroModule[nn.Linear](4, 3)
        self.fc.weight = PyroSample(dist.Normal(0.0, 1.0).expand([3, 4]).to_event(2))
        self.fc.bias = PyroSample(dist.Normal(0.0, 1.0).expand([3]).to_event(1))

    def forward(self, x, y=None):
        logits = F.log_softmax(self.fc(x), dim=1)
        with pyro.plate("data", x.shape[0]):
            return pyro.sample("obs", dist.Categorical(logits=logits), obs=y)


def test_a_pyro_style_forward_over_the_wrong_axis_is_caught_in_prediction_and_training():
    x, y = torch.randn(6, 4), torch.randint(0, 3, (6,))
    model = PyroStyle()
    guide = DropoutGuide(model, dropout=0.2)
    guide(x, y)
    pyro.set_rng_seed(1)
    with pytest.warns(UserWarning, match="batched draws do not match one draw at a time"):
        checked = predict(model, guide, x, num_samples=5).probs["obs"]
    pyro.set_rng_seed(1)
    assert torch.allclose(checked, predict(model, guide, x, num_samples=5, parallel=False).probs["obs"])
    assert torch.allclose(checked.sum(-1), torch.ones(5, 6))  # probabilities over the classes
    loss = BBAlpha(0.5, num_particles=4)
    with pytest.warns(UserWarning, match="vectorised particles do not match one particle at a time"):
        SVI(model, guide, pyro.optim.Adam({"lr": 1e-2}), loss).step(x, y)
    assert not loss.vectorize_particles


class Twice(nn.Module):
    """One layer applied twice (shared weights), an upsampling after a convolution."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.up = nn.Conv2d(1, 2, 3, padding=1), nn.Upsample(scale_factor=2)
        self.drop, self.shared, self.out = nn.Dropout(0.2), nn.Linear(8, 8), nn.Linear(8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.flatten(F.adaptive_avg_pool2d(self.up(torch.relu(self.conv(x))), 2), 1)
        return self.out(self.drop(self.shared(torch.relu(self.shared(h)))))


def test_a_layer_called_twice_and_an_upsampling_convert_exactly():
    torch.manual_seed(0)
    net, x, y = Twice().eval(), torch.randn(5, 1, 4, 4), torch.randn(5)
    model = from_module(net)
    guide = DropoutGuide(model)
    guide(x, y)
    standard = predict_standard(model, guide, x).samples["mean"][0]
    assert torch.allclose(standard, net(x)[:, 0], atol=TOL)
    predict(model, guide, x, num_samples=4)  # the rows check: the draws share one pass
    assert all(apart for apart, _ in model.row_verdicts.values())


def test_refusals_name_the_module_and_the_switch():
    class MyLinear(nn.Linear):
        def forward(self, x):
            return super().forward(x) * 2

    with pytest.raises(ValueError, match=r"'0' is a MyLinear, a subclass of nn.Linear.*keep=\['0'\]"):
        from_module(nn.Sequential(MyLinear(3, 2), nn.ReLU(), nn.Linear(2, 1)))
    with pytest.raises(ValueError, match=r"'0' has padding_mode='reflect'"):
        from_module(
            nn.Sequential(
                nn.Conv1d(1, 2, 3, padding=1, padding_mode="reflect"), nn.Flatten(), nn.Linear(8, 1)
            )
        )
    with pytest.raises(ValueError, match=r"'lstm' is bidirectional"):  # its own dropout: kept (masks="own")
        from_module(nn.ModuleDict({"lstm": nn.LSTM(3, 4, bidirectional=True)}), masks="shared")
    with pytest.raises(TypeError, match="last_layer must be True or False, got 'no'"):
        from_module(nn.Linear(3, 1), last_layer="no")
    with pytest.raises(ValueError, match=r"last layer '2' has 2 output\(s\).*likelihood='heteroscedastic'"):
        from_module(nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)), "normal")
    with pytest.raises(ValueError, match=r"keep names modules the network does not have: \['nope'\]"):
        from_module(nn.Linear(3, 1), keep=["nope"])
    model = from_module(nn.Sequential(MyLinear(3, 2), nn.ReLU(), nn.Linear(2, 1)), keep=["0"])
    assert list(model.rates) == ["2.weight"]


def test_data_in_another_dtype_and_an_untraceable_functional_dropout_are_named():
    net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1)).double()
    model = from_module(net)
    with pytest.raises(TypeError, match=r"x is torch.float32 but the network is torch.float64: pass x.to"):
        DropoutGuide(model)(torch.randn(5, 3), torch.randn(5))

    class Branchy(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(3, 4), nn.Linear(4, 1)

        def forward(self, x):
            h = torch.relu(self.fc1(x))
            if h.sum() > -1e9:  # data-dependent: torch.fx cannot trace it
                h = F.dropout(h, 0.3, self.training)
            return self.fc2(h)

    with pytest.warns(UserWarning, match="could not trace the forward of Branchy"):
        model = from_module(Branchy(), masks="shared")
    with pytest.raises(ValueError, match=r"calls dropout with a drop rate of 0.3.*masks='own'"):
        DropoutGuide(model)(torch.randn(5, 3), torch.randn(5))
    model = from_module(Branchy())  # its own dropout, as written
    guide = DropoutGuide(model)
    guide(torch.randn(5, 3), torch.randn(5))
    draws = predict(model, guide, torch.randn(2, 3), num_samples=200)["mean"]
    assert draws.std(0).max() > 0  # the F.dropout the conversion could not see draws its masks


def test_every_prediction_entry_point_with_a_one_draw_tail_and_parallel_switches():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv1d(2, 3, 3), nn.ReLU(), nn.Flatten(), nn.Dropout(0.2), nn.Linear(3 * 6, 1))
    x, y = torch.randn(5, 2, 8), torch.randn(5)
    model = from_module(net.eval())
    guide = DropoutGuide(model)
    guide(x, y)
    pred = predict(model, guide, x, num_samples=51, chunk_size=50)  # a 1-draw tail
    assert pred["mean"].shape == (51, 5)
    for parallel in (True, False):
        standard = predict_standard(model, guide, x, parallel=parallel).samples["mean"][0]
        assert torch.allclose(standard, net(x)[:, 0], atol=TOL)
        report = evaluate(model, guide, x, y, num_samples=7, chunk_size=3, parallel=parallel)
        assert report.num_samples == 7 and report.rmse_standard > 0


def test_likelihoods_heteroscedastic_and_callable_and_every_dropout_as_a_site():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Dropout(0.2), nn.Linear(8, 2)).eval()
    x, y = torch.randn(6, 2), torch.randn(6)
    log_sd = from_module(net, lambda f: dist.Normal(f[..., 0], f[..., 1].exp()))
    guide = DropoutGuide(log_sd)
    guide(x, y)
    pred = predict(log_sd, guide, x, num_samples=3)
    assert pred.samples["output"].shape == (3, 6, 2)
    sites = from_module(net, "heteroscedastic", masks="shared", dropouts="sites")
    assert sites.mask_sites == ["2"] and sites.rates == {"0.weight": 0.0, "3.weight": 0.0}
    own = from_module(net, "heteroscedastic", dropouts="sites")  # the module stays; its KL is p = 0's
    assert own.mask_sites == [] and own.rates == {"0.weight": 0.0, "3.weight": 0.0}
    weights = from_module(net, "heteroscedastic")
    assert weights.mask_sites == [] and weights.rates["3.weight"] == pytest.approx(0.2)


def test_lenet_does_not_mask_a_single_input_channel():
    model = LeNet(dropout_all=0.1)
    assert model.conv1.dropout == 0.0 and model.conv2.dropout == pytest.approx(0.1)
    assert LeNet(channels=3, dropout_all=0.1).conv1.dropout == pytest.approx(0.1)


def test_converted_draws_and_warnings_stay_quiet_for_a_net_that_batches():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Dropout(0.3), nn.Linear(8, 1)).eval()
    x, y = torch.randn(6, 3), torch.randn(6)
    model = from_module(net)
    guide = DropoutGuide(model)
    guide(x, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        predict(model, guide, x, num_samples=10)
