"""Bad arguments to the losses, CompiledSVI, predict and evaluate get a clear error naming them."""

import functools

import pyro
import pyro.distributions as dist
import pytest
import torch
from pyro.infer import SVI

from pyro_dropout import BBAlpha, CompiledSVI, DropoutELBO, DropoutGuide, evaluate, predict, predict_standard
from pyro_dropout.nn import MLP, Linear


def _fitted():
    model = MLP(3, hidden=(5,))
    guide = DropoutGuide(model)
    guide(torch.randn(4, 3), torch.randn(4))
    return model, guide


EMPTY = (torch.zeros(0, 3), torch.zeros(0))


@pytest.mark.parametrize("loss", [DropoutELBO(), BBAlpha(0.5, num_particles=3)], ids=["elbo", "bbalpha"])
@pytest.mark.parametrize("svi_class", [SVI, CompiledSVI])
def test_an_empty_batch_is_named_in_training(loss, svi_class):
    """Before: ZeroDivisionError 'size cannot be zero' from Pyro's plate code."""
    model = MLP(3, hidden=(5,))
    svi = svi_class(model, DropoutGuide(model), pyro.optim.Adam({"lr": 1e-2}), loss)
    with pytest.raises(ValueError, match=r"model argument 0 has shape \(0, 3\): an empty batch"):
        svi.step(*EMPTY)


def test_an_empty_batch_is_named_in_prediction():
    model, guide = _fitted()
    with pytest.raises(ValueError, match=r"model argument 0 has shape \(0, 3\): an empty batch"):
        predict(model, guide, EMPTY[0], num_samples=3)
    with pytest.raises(ValueError, match=r"model argument 0 has shape \(0, 3\): an empty batch"):
        evaluate(model, guide, *EMPTY, num_samples=3)


def test_return_sites_must_name_sites_of_the_model():
    model, guide = _fitted()
    x = torch.randn(4, 3)
    # before: no samples and no error for both
    with pytest.raises(TypeError, match=r"return_sites must be a list of site names, got 'obs'"):
        predict(model, guide, x, num_samples=3, return_sites="obs")
    with pytest.raises(ValueError, match=r"return_sites names sites the model does not have: \['nope'\]"):
        predict(model, guide, x, num_samples=3, return_sites=["nope"])
    assert predict(model, guide, x, num_samples=3, return_sites=["obs"])["obs"].shape == (3, 4)


@pytest.mark.parametrize("kwargs", [{"num_samples": True}, {"chunk_size": True}, {"num_samples": 2.0}])
def test_counts_must_be_whole_numbers_not_booleans(kwargs):
    model, guide = _fitted()
    with pytest.raises(ValueError, match=r"(num_samples|chunk_size) must be a positive int"):
        predict(model, guide, torch.randn(4, 3), **kwargs)
    with pytest.raises(ValueError, match=r"(num_samples|chunk_size) must be a positive int"):
        evaluate(model, guide, torch.randn(4, 3), torch.randn(4), **kwargs)


class _Net(pyro.nn.PyroModule):
    """A model written as Pyro's tutorials write one: the data plate sized by x."""

    def __init__(self):
        super().__init__()
        self.fc = Linear(3, 1)

    def forward(self, x, y=None):
        mu = self.fc(x).squeeze(-1)
        with pyro.plate("data", x.shape[-2]):
            return pyro.sample("obs", dist.Normal(mu, 0.1), obs=y)


@pytest.mark.parametrize("loss", [DropoutELBO(), BBAlpha(0.5, num_particles=3)], ids=["elbo", "bbalpha"])
def test_one_target_for_many_points_is_refused(loss):
    """A y of length 1 was broadcast over all points with no error."""
    model = _Net()
    svi = SVI(model, DropoutGuide(model, dropout={"fc.weight": 0.1}), pyro.optim.Adam({"lr": 1e-2}), loss)
    x = torch.randn(8, 3)
    svi.step(x, torch.randn(8))
    with pytest.raises(
        ValueError,
        match=r"at site 'obs', the observed value has shape \(1,\): size 1 where the plate 'data' has 8",
    ):
        svi.step(x, torch.randn(1))


def _raw_at_model(x, y=None):
    """Weights used with ``@``: sampled outside the data plate, they keep its slot."""
    from pyro_dropout import QuantisedGaussian

    w = pyro.sample("w", QuantisedGaussian(0.0, 1.0).expand([8, 3]).to_event(2))
    v = pyro.sample("v", QuantisedGaussian(0.0, 1.0).expand([1, 8]).to_event(2))
    mu = (torch.relu(x @ w.transpose(-1, -2)) @ v.transpose(-1, -2)).squeeze(-1)
    with pyro.plate("data", x.shape[-2]):
        return pyro.sample("obs", dist.Normal(mu, 0.1), obs=y)


@pytest.mark.parametrize("entry", ["predict", "evaluate", "to_arviz"])
def test_draws_broadcast_against_each_other_fall_back_to_one_draw_at_a_time(entry):
    """Before, predict returned [S, S, N] draws (every draw's weights with every other's) and
    to_arviz exported S x N observations. The batching self-check sees the broadcast, warns, and
    the draws run one at a time: the draws of parallel=False, from the same random state."""
    from pyro_dropout import to_arviz

    x, y = torch.randn(6, 3), torch.randn(6)
    model = functools.partial(_raw_at_model)  # its own: the self-check's verdict is kept per model
    guide = DropoutGuide(model)
    guide(x, y)
    call = {
        "predict": lambda **k: predict(model, guide, x, num_samples=4, **k)["obs"],
        "evaluate": lambda **k: evaluate(model, guide, x, y, num_samples=4, **k).test_ll,
        "to_arviz": lambda **k: torch.as_tensor(
            to_arviz(model, guide, x, y, num_samples=4, **k).log_likelihood["obs"].values
        ),
    }[entry]
    pyro.set_rng_seed(2)
    with pytest.warns(
        UserWarning, match=r"do not match one draw at a time at site obs.*\(4, 4, 6\)|at site obs"
    ):
        checked = call()
    pyro.set_rng_seed(2)
    assert torch.equal(torch.as_tensor(checked), torch.as_tensor(call(parallel=False)))


def test_a_model_that_cannot_broadcast_predicts_one_draw_at_a_time():
    """The fix the error names: parallel=False runs guide and model once per draw, unbatched,
    and gives the [S, N] draws Pyro's Predictive(parallel=False) gives."""
    x, y = torch.randn(6, 3), torch.randn(6)
    guide = DropoutGuide(_raw_at_model, dropout=0.5)
    guide(x, y)
    pred = predict(_raw_at_model, guide, x, y, num_samples=5, parallel=False)
    assert pred["obs"].shape == (5, 6) and pred.log_likelihood["obs"].shape == (5, 6)
    assert pred["w"].shape == (5, 8, 3)
    assert len({tuple(w.flatten().tolist()) for w in pred["w"]}) > 1  # draws, not one repeated (seed 0)
    report = evaluate(_raw_at_model, guide, x, y, num_samples=5, parallel=False)
    assert report.num_samples == 5 and report.rmse_standard > 0  # the expected weights, unbatched
    from pyro_dropout import to_arviz

    idata = to_arviz(_raw_at_model, guide, x, y, num_samples=5, parallel=False)
    assert idata.log_likelihood["obs"].shape == (1, 5, 6)


def test_a_model_that_cannot_take_batched_weights_runs_one_draw_at_a_time():
    """torch's 't() expects a tensor with <= 2 dimensions' under batched draws: the self-check
    names it in a warning and the draws run one at a time; the model's own errors (a ValueError
    of its making) pass through unchanged where the batched error is explained (the losses)."""
    from pyro_dropout.infer.batched_errors import explain_batched_failure

    def model(x, y=None):
        w = pyro.sample("w", dist.Normal(0.0, 1.0).expand([1, 3]).to_event(2))
        with pyro.plate("data", x.shape[-2]):
            return pyro.sample("obs", dist.Normal(torch.nn.functional.linear(x, w).squeeze(-1), 0.1), obs=y)

    x, y = torch.randn(6, 3), torch.randn(6)
    guide = DropoutGuide(model)
    guide(x, y)
    with pytest.warns(UserWarning, match=r"the batched pass failed: RuntimeError: t\(\) expects") as caught:
        assert predict(model, guide, x, num_samples=4)["obs"].shape == (4, 6)
    message = next(
        str(w.message) for w in caught if "batched pass failed" in str(w.message)
    )  # one line (not Pyro's table of trace shapes), with the remedy
    assert "\n" not in message and "F.linear" in message and "pyro_dropout.nn.functional.linear" in message
    assert predict(model, guide, x, num_samples=4, parallel=False)["obs"].shape == (4, 6)
    with pytest.raises(ValueError, match=r"^the model's own$"):
        with explain_batched_failure("predict", "parallel=False"):
            raise ValueError("the model's own")


@pytest.mark.parametrize(
    "message",
    [
        "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!",
        "expected m1 and m2 to have the same dtype, but got: double != float",
    ],
)
def test_two_devices_or_dtypes_are_not_blamed_on_batched_weights(message):
    """torch's errors for tensors on two devices or of two dtypes (as a fold mask left on the CPU
    under a CUDA model once made) pass through unchanged: batching over draws causes neither."""
    from pyro_dropout.infer.batched_errors import explain_batched_failure

    with pytest.raises(RuntimeError, match=r"^" + message[:30]) as caught:
        with explain_batched_failure("DropoutELBO", "vectorize_particles=False"):
            raise RuntimeError(message)
    assert type(caught.value) is RuntimeError


class _Branching(pyro.nn.PyroModule):
    """Its second layer is one of two, chosen by the data: a guide set up on positive inputs
    never saw ``neg.weight``."""

    def __init__(self):
        super().__init__()
        self.first, self.pos, self.neg = Linear(1, 8), Linear(8, 1), Linear(8, 1)

    def forward(self, x, y=None):
        h = torch.relu(self.first(x))
        mu = (self.pos if x.mean() > 0 else self.neg)(h).squeeze(-1)
        with pyro.plate("data", x.shape[-2]):
            return pyro.sample("obs", dist.Normal(mu, 0.1), obs=y)


@pytest.mark.parametrize("loss", [DropoutELBO(), BBAlpha(0.5, num_particles=3)], ids=["elbo", "bbalpha"])
def test_a_site_the_guide_never_saw_names_the_branch_that_skipped_it(loss):
    model = _Branching()
    svi = SVI(model, DropoutGuide(model), pyro.optim.Adam({"lr": 1e-2}), loss)
    x = torch.rand(6, 1) + 0.1
    svi.step(x, x.squeeze(-1))
    with pytest.raises(ValueError, match=r"'neg\.weight' of the model is not sampled by the guide.*branch"):
        svi.step(-x, x.squeeze(-1))


def test_predict_refuses_a_site_the_guide_never_saw_instead_of_drawing_it_from_the_prior():
    """Before, predict ran, the skipped branch's weights drawn from their prior, and warned that
    the model's batched draws did not match one draw at a time (which its prior draws made so)."""
    model = _Branching()
    guide = DropoutGuide(model)
    x = torch.rand(6, 1) + 0.1
    guide(x, x.squeeze(-1))
    assert predict(model, guide, x, num_samples=3).means["obs"].shape == (3, 6)
    with pytest.raises(ValueError, match=r"'neg\.weight' is not sampled by the guide, so it would be drawn"):
        predict(model, guide, -x, num_samples=3)
    with pytest.raises(ValueError, match=r"site 'neg\.weight' is not sampled by the guide"):
        evaluate(model, guide, -x, x.squeeze(-1), num_samples=3)
    with pytest.raises(ValueError, match=r"site 'neg\.weight' is not sampled by the guide"):
        predict_standard(model, guide, -x)
