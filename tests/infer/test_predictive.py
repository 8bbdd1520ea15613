import pyro
import pyro.distributions as dist
import pytest
import torch
from pyro.infer import SVI
from pyro.nn import PyroModule

from pyro_dropout import DropoutELBO, DropoutGuide, predict, predict_standard
from pyro_dropout.nn import MLP, Linear
from pyro_dropout.prediction import predict_from_samples


def _trained(likelihood="normal", steps=200, **kwargs):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(40, 3, generator=g)
    y = torch.randint(0, 3, (40,), generator=g) if likelihood == "categorical" else x.sum(-1)
    out = 3 if likelihood == "categorical" else 1
    model = MLP(3, out, hidden=(16,), likelihood=likelihood, **kwargs)
    guide = DropoutGuide(model, dropout=0.2)
    svi = SVI(model, guide, pyro.optim.Adam({"lr": 1e-2}), DropoutELBO())
    for _ in range(steps):
        svi.step(x, y)
    return model, guide, x, y


def test_documented_shapes_without_plate_slots():
    model, guide, x, y = _trained(tau="learned")
    pred = predict(model, guide, x, y, num_samples=30, chunk_size=7)
    assert pred.num_samples == 30
    assert pred["hidden.0.weight"].shape == (30, 16, 3)  # no [30, 1, 16, 3]
    assert pred["output.bias"].shape == (30, 1)
    assert pred["tau"].shape == (30,)
    assert pred["mean"].shape == pred["obs"].shape == (30, 40)
    assert (
        pred.means["obs"].shape == pred.variances["obs"].shape == pred.log_likelihood["obs"].shape == (30, 40)
    )
    assert torch.equal(pred.observed["obs"], y)
    assert pred.kinds == {
        "tau": "latent",
        "hidden.0.weight": "latent",
        "hidden.0.bias": "latent",
        "output.weight": "latent",
        "output.bias": "latent",
        "mean": "deterministic",
        "obs": "likelihood",
    }
    # the likelihood's variance is the aleatoric noise 1/tau of each draw
    assert torch.allclose(pred.variances["obs"], (1 / pred["tau"]).unsqueeze(-1).expand(30, 40))
    assert torch.allclose(pred.means["obs"], pred["mean"])


def test_classification_probabilities():
    model, guide, x, y = _trained("categorical")
    pred = predict(model, guide, x, y, num_samples=12)
    assert pred.probs["obs"].shape == (12, 40, 3)
    assert torch.allclose(pred.probs["obs"], torch.softmax(pred["logits"], -1), atol=1e-6)
    assert torch.allclose(
        pred.log_likelihood["obs"],
        torch.log_softmax(pred["logits"], -1)[:, torch.arange(40), y],
        atol=1e-5,
    )


def test_chunked_and_unchunked_agree_in_distribution():
    model, guide, x, _ = _trained()
    t = 3000
    pyro.set_rng_seed(1)
    a = predict(model, guide, x, num_samples=t, chunk_size=None)["mean"]
    pyro.set_rng_seed(2)
    b = predict(model, guide, x, num_samples=t, chunk_size=128)["mean"]
    assert a.shape == b.shape == (t, 40)
    # per point: means within 5 standard errors, standard deviations within 10%
    se = (a.var(0) / t + b.var(0) / t).sqrt()
    assert ((a.mean(0) - b.mean(0)).abs() <= 5 * se + 1e-6).all()
    assert torch.allclose(a.std(0), b.std(0), rtol=0.1, atol=1e-4)
    # different draws each pass: dropout is on
    assert (a.std(0) > 0).all()


def test_return_sites_and_standard_dropout():
    model, guide, x, _ = _trained()
    pred = predict(model, guide, x, num_samples=5, return_sites=["mean"])
    assert set(pred.samples) == {"mean"} and "obs" in pred.means
    standard = predict_standard(model, guide, x)
    m = guide.median()
    h = torch.relu(x @ m["hidden.0.weight"].T + m["hidden.0.bias"])
    expected = (h @ m["output.weight"].T + m["output.bias"]).squeeze(-1)
    assert torch.allclose(standard["mean"][0], expected, atol=1e-5)


def test_predict_from_samples_conditions_on_the_given_draws():
    model, guide, x, _ = _trained()
    med = guide.median()
    samples = {k: v.unsqueeze(0).expand(4, *v.shape) for k, v in med.items()}
    pred = predict_from_samples(model, samples, x, chunk_size=3)
    assert pred["mean"].shape == (4, 40)
    assert torch.allclose(pred["mean"], predict_standard(model, guide, x)["mean"].expand(4, 40), atol=1e-6)
    with pytest.raises(ValueError, match="not in the model"):
        predict_from_samples(model, {"nope": torch.zeros(2)}, x)


def test_bad_arguments():
    model, guide, x, _ = _trained(steps=1)
    with pytest.raises(ValueError, match="num_samples"):
        predict(model, guide, x, num_samples=0)
    with pytest.raises(ValueError, match="chunk_size"):
        predict(model, guide, x, chunk_size=0)
    bad = x.clone()
    bad[0, 0] = float("inf")
    with pytest.raises(ValueError, match="model argument 0"):
        predict(model, guide, bad)


def test_a_site_with_rows_outside_every_plate_is_named():
    class RowsOutside(PyroModule):
        def __init__(self):
            super().__init__()
            self.fc = Linear(3, 2)

        def forward(self, x, y=None):
            mean = pyro.deterministic("mean", self.fc(x), event_dim=1)  # [N, 2]: N in no plate
            with pyro.plate("data", x.shape[0]):
                return pyro.sample("obs", dist.Normal(mean, 1.0).to_event(1), obs=y)

    model = RowsOutside()
    guide = DropoutGuide(model)
    x = torch.randn(5, 3)
    guide(x)
    with pytest.raises(ValueError, match=r"at site 'mean'.*batch shape \(5,\).*dims \[-1\] in no plate"):
        predict(model, guide, x, num_samples=4, return_sites=["mean"])


class _PlateFromActivation(PyroModule):
    """Pyro's style, the data plate sized from a layer's output: ``h.shape[0]`` is the draws' axis
    under batched draws, which the check's two draws on two points cannot tell from the data's."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = Linear(3, 8), Linear(8, 1)

    def forward(self, x, y=None):
        h = torch.relu(self.fc1(x))
        mean = self.fc2(h).squeeze(-1)
        with pyro.plate("data", h.shape[0]):
            return pyro.sample("obs", dist.Normal(mean, 1.0), obs=y)


@pytest.mark.parametrize("rows", [2, 9])
def test_a_model_whose_batched_pass_fails_runs_one_draw_at_a_time_with_a_warning(rows):
    torch.manual_seed(0)
    model, x = _PlateFromActivation(), torch.randn(rows, 3)
    guide = DropoutGuide(model, dropout=0.2)
    guide(x, torch.randn(rows))
    with pytest.warns(UserWarning, match="one at a time from now on"):
        pred = predict(model, guide, x, num_samples=30, chunk_size=10)
    assert pred["obs"].shape == (30, rows) and pred.means["obs"].std(0).min() > 0
