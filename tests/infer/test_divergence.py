"""A loss that stops being finite stops training at that step, saying what is not finite."""

import math

import pyro
import pytest
import torch
from pyro.infer import SVI

from pyro_dropout import DropoutELBO, DropoutGuide
from pyro_dropout.infer import BBAlpha, CompiledSVI, DivergenceError
from pyro_dropout.infer.divergence import all_finite
from pyro_dropout.nn import MLP
from pyro_dropout_experiments.core import train_runs


def _data(n=32):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 3, generator=g)
    return x, x[:, 0] + 0.1 * torch.randn(n, generator=g)


def _finite_params():
    return all(bool(torch.isfinite(p).all()) for _, p in pyro.get_param_store().named_parameters())


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("loss", [DropoutELBO(), BBAlpha(0.5, num_particles=3)], ids=["elbo", "bbalpha"])
def test_inputs_too_large_for_float32_stop_the_first_step(compiled, loss):
    """x * 1e20 is finite, but its square is not in float32: the loss is inf at once. Before,
    CompiledSVI went on with [nan, nan, nan] and no warning."""
    x, y = _data()
    model = MLP(3, hidden=(8,), tau=1.0)
    guide = DropoutGuide(model, dropout=0.1)
    svi = (CompiledSVI if compiled else SVI)(model, guide, pyro.optim.Adam({"lr": 1e-2}), loss)
    svi.step(x, y)
    where = "CompiledSVI step 2" if compiled else type(loss).__name__
    with pytest.raises(
        DivergenceError,
        match=rf"{where}: the loss is (inf|nan); model argument 0 holds values up to [\d.]+e\+20, "
        "too large to square in torch.float32",
    ):
        svi.step(x * 1e20, y)
    assert _finite_params()  # the update was not applied
    svi.step(x, y)  # and training can go on from the last finite state


def test_parameters_that_diverged_are_named():
    x, y = _data()
    model = MLP(3, hidden=(8,), tau=1.0)
    guide = DropoutGuide(model, dropout=0.1)
    svi = CompiledSVI(model, guide, pyro.optim.SGD({"lr": 1e30}), DropoutELBO())
    with pytest.raises(
        DivergenceError,
        match=r"CompiledSVI step \d+: the loss is (inf|nan); "
        r"parameters (holding NaN or inf|too large to square): ",
    ):
        for _ in range(20):
            svi.step(x, y)


def test_training_loops_say_which_training_and_epoch():
    x, y = _data()
    model = MLP(3, hidden=(8,), tau=1.0, runs=2)
    guide = DropoutGuide(model, dropout=0.1)
    svi = CompiledSVI(model, guide, pyro.optim.Adam({"lr": 1e-2}), DropoutELBO())
    xs, ys = x.expand(2, *x.shape).clone(), y.expand(2, *y.shape).clone()
    xs[1, 5] = 1e25  # one run's data, one row: every epoch reaches it
    with pytest.raises(
        DivergenceError, match=r"grid \(2 runs\), epoch 1 of 3: CompiledSVI step \d+: the loss is"
    ):
        train_runs(svi.step, xs, ys, epochs=3, batch_size=8, desc="grid (2 runs)", progress=False)


def test_the_check_can_be_turned_off_as_the_input_checks_can():
    x, y = _data()
    model = MLP(3, hidden=(8,), tau=1.0)
    guide = DropoutGuide(model, dropout=0.1)
    svi = CompiledSVI(model, guide, pyro.optim.Adam({"lr": 1e-2}), DropoutELBO(check_finite=False))
    svi.step(x, y)
    assert not math.isfinite(svi.step(x * 1e20, y))  # no error: the user turned the check off


@pyro.settings.context(module_local_params=True)
def test_with_module_local_params_the_checks_see_the_modules_parameters():
    """Pyro's module_local_params keeps parameters out of the global store, where the checks
    looked: a parameter gone NaN went unnamed (and a non-finite gradient unchecked)."""
    x, y = _data()
    model = MLP(3, hidden=(8,), tau=1.0)
    guide = DropoutGuide(model, dropout=0.1)
    svi = SVI(model, guide, pyro.optim.Adam({"lr": 1e-2}), DropoutELBO())
    svi.step(x, y)
    assert not list(pyro.get_param_store().keys())
    with torch.no_grad():
        dict(guide.named_parameters())["locs.output.weight_unconstrained"].fill_(float("nan"))
    with (
        pyro.validation_enabled(False),
        pytest.raises(
            DivergenceError,
            match=r"DropoutELBO: the loss is nan; parameters holding NaN or inf: .*output\.weight",
        ),
    ):
        svi.step(x, y)


def test_all_finite_finds_one_bad_entry_and_leaves_the_tensors_as_they_were():
    """The fused test (torch.amp's) multiplies by 1 in place: the values stay bit for bit; a sum
    that overflows in float32 is not a non-finite entry; mixed dtypes take the per-tensor path."""
    g = torch.Generator().manual_seed(0)
    tensors = [
        torch.randn(50, 13, generator=g),
        torch.randn(50, generator=g),
        torch.randn(1, 50, generator=g),
    ]
    before = [t.clone() for t in tensors]
    assert all_finite(tensors)
    assert all(torch.equal(a, b) for a, b in zip(before, tensors, strict=True))
    assert all_finite([torch.full((4,), 3e38), torch.full((4,), 3e38)])  # their sum overflows float32
    for bad in (float("nan"), float("inf"), -float("inf")):
        broken = [t.clone() for t in tensors]
        broken[1][7] = bad
        assert not all_finite(broken)
        assert not all_finite([broken[0].double(), broken[1]])  # mixed dtypes
    assert all_finite([tensors[0].double(), tensors[1]])
