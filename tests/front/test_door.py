"""The front door: a trained torch LeNet with dropout to MC-dropout predictions, their mutual
information, ECE and an OOD AUROC in a few lines, on MNIST-format images (a small random set with
a learnable signal: ``tests/experiments/image_data.py``)."""

from __future__ import annotations

import gc
import math

import pyro
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from pyro_dropout import MCDropout
from pyro_dropout.datasets import load_images
from pyro_dropout.metrics import mutual_information
from tests.experiments.image_data import write_tiny_images


class TorchLeNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, 6, 5), nn.Conv2d(6, 12, 5)
        self.fc1, self.drop, self.fc2 = nn.Linear(12 * 4 * 4, 32), nn.Dropout(0.5), nn.Linear(32, 10)

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.conv1(x)), 2)
        h = F.max_pool2d(F.relu(self.conv2(h)), 2)
        return self.fc2(self.drop(F.relu(self.fc1(h.view(h.size(0), -1)))))


def _images(root, name, part):
    data = load_images(name, part, root)
    return torch.from_numpy(data.x), torch.from_numpy(data.y)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = write_tiny_images(tmp_path_factory.mktemp("images"), train=300, test=60)
    x, y = _images(root, "mnist", "train")
    torch.manual_seed(0)
    net = TorchLeNet()
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    for _ in range(60):  # an ordinary torch training loop
        opt.zero_grad()
        F.cross_entropy(net(x), y).backward()
        opt.step()
    return net.eval(), root


def test_a_trained_lenet_in_four_lines(trained):
    net, root = trained
    (x, y), (fashion, _) = _images(root, "mnist", "test"), _images(root, "fashion-mnist", "test")
    bnn = MCDropout(net, "classification", num_samples=30)
    report = bnn.evaluate(x, y)
    mi = mutual_information(bnn.probs(x))
    auroc = bnn.ood(x, fashion)["mutual_information"]["auroc"]
    assert report.accuracy > 0.5 and 0 <= report.ece <= 1
    assert mi.shape == (len(x),) and (mi >= 0).all() and mi.max() > 0
    assert 0.0 <= auroc <= 1.0


def test_fit_takes_a_dataloader_and_the_predictions_keep_their_shapes(trained):
    net, root = trained
    x, y = _images(root, "mnist", "train")
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=100)
    bnn = MCDropout(net, "classification", num_samples=8)
    before = bnn.evaluate(loader).nll
    history = bnn.fit(loader, epochs=2, lr=1e-3)
    assert len(history) == 2 and all(torch.isfinite(torch.tensor(history)))
    assert bnn.predict(loader).probs["obs"].shape == (8, len(x), 10)
    after = bnn.evaluate(loader).nll
    assert after != before and after < 0.5 * math.log(10)  # SVI moved it; still far better than chance


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="task must be one of classification, segmentation, regression"):
        MCDropout(nn.Linear(3, 2), "ranking")
    with pytest.raises(ValueError, match="num_samples must be a positive int"):
        MCDropout(nn.Linear(3, 2), num_samples=0)
    bnn = MCDropout(nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.2), nn.Linear(4, 1)), "regression", tau=10.0)
    with pytest.raises(ValueError, match="give the targets"):
        bnn.evaluate(torch.randn(5, 3))
    assert bnn.predict(torch.randn(5, 3)).means["obs"].shape == (100, 5)
    for call in (bnn.predict, bnn.probs, lambda x, n: bnn.evaluate(x, torch.randn(5), n)):
        with pytest.raises(ValueError, match="num_samples must be a positive int, got 0"):
            call(torch.randn(5, 3), 0)  # before: 0 was taken as "the default" (100 draws)
    with pytest.raises(ValueError, match=r"for a batch of 3 rows.*pass x.unsqueeze\(0\)"):
        bnn.predict(torch.randn(3))  # one point, no batch dimension


def test_two_networks_of_one_architecture_each_predict_with_their_own_weights():
    """Before, both used Pyro's global param store under the same names: a second MCDropout made
    the first one refuse to run, and one made after the first was collected predicted with the
    first network's weights (a plausible wrong answer)."""
    torch.manual_seed(0)
    nets = [nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 2)) for _ in range(3)]
    x = torch.randn(5, 2)
    first, second = MCDropout(nets[0].eval()), MCDropout(nets[1].eval())
    for bnn, net in ((first, nets[0]), (second, nets[1]), (first, nets[0])):
        bnn.predict(x, num_samples=2)  # sets its guide up (the first time) and runs it
        assert torch.allclose(_mean_weight(bnn), net[0].weight)
    names = {n.split(".")[0] for n in pyro.get_param_store().keys()}
    del first, second, bnn
    gc.collect()
    assert not names & {n.split(".")[0] for n in pyro.get_param_store().keys()}  # the store forgot them
    third = MCDropout(nets[2].eval())
    third.predict(x, num_samples=2)
    assert torch.allclose(_mean_weight(third), nets[2][0].weight)


def _mean_weight(bnn):
    return bnn.guide.median()["net.0.weight"]


def test_a_data_loader_streams_and_its_batches_are_read_as_they_come():
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    bnn = MCDropout(
        nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Dropout(0.2), nn.Linear(8, 2)), num_samples=20
    )
    x, y = torch.randn(10, 3), torch.randint(0, 2, (10,))
    loader = DataLoader(TensorDataset(x, y), batch_size=4)
    pred = bnn.predict(loader)
    assert pred.probs["obs"].shape == (20, 10, 2) and pred.samples["logits"].shape == (20, 10, 2)
    assert "net.0.weight" not in pred.samples  # each batch drew its own weights: none kept
    assert bnn.evaluate(loader).probs.shape == (10, 2)
    assert set(bnn.ood(loader, (t for t in torch.randn(2, 5, 3)))) >= {"predictive_entropy"}
    assert bnn.predict(iter([x[:4], x[4:]])).probs["obs"].shape == (20, 10, 2)  # x-only batches
    with pytest.raises(ValueError, match=r"the inputs \['x', 'y'\] are not arguments of Sequential.forward"):
        bnn.predict([{"x": x, "y": y}])  # a dict batch's inputs are keyword inputs; its targets 'labels'
    with pytest.raises(ValueError, match=r"a batch holds 3 items; give \(x, y\) batches.*\(\(x1, x2"):
        bnn.evaluate([(x, y, y)])
    with pytest.raises(ValueError, match="the data loader gave no batch"):
        bnn.predict(iter([]))
    with pytest.raises(ValueError, match="give the targets"):
        bnn.evaluate(iter([x]))


def _regression_data(n=256):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 3, generator=g)
    return x, x @ torch.tensor([1.0, -2.0, 0.5]) + 0.1 * torch.randn(n, generator=g)


def test_fit_history_is_a_loss_per_example_whatever_the_batch_size():
    """Before, each step's loss (scaled to the whole data set) was summed and divided by the
    examples, so the history grew with the number of batches (39.6 at batch 8, 4.94 at 64)."""
    x, y = _regression_data()
    net = nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Dropout(0.1), nn.Linear(16, 1))
    losses = {}
    for batch in (8, 64):
        pyro.set_rng_seed(0)
        loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=batch)
        losses[batch] = MCDropout(net, "regression", tau=10.0).fit(loader, epochs=1, lr=1e-9)[0]
    # lr 1e-9: the same weights throughout; the per-example estimates then agree within their
    # Monte Carlo noise (a 10% band; the old definition was 8x apart)
    assert losses[8] == pytest.approx(losses[64], rel=0.1)


def test_fit_refuses_what_it_cannot_train_on():
    x, y = _regression_data(32)
    bnn = MCDropout(nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.2), nn.Linear(4, 1)), "regression", tau=10.0)
    loader = [(x[:16], y[:16]), (x[16:], y[16:])]
    for epochs in (0, -1, True, 1.5):
        with pytest.raises(ValueError, match="epochs must be a positive int"):
            bnn.fit(loader, epochs=epochs)
    for lr in (-1.0, 0.0, float("nan")):
        with pytest.raises(ValueError, match="lr must be a positive finite number"):
            bnn.fit(loader, lr=lr)
    with pytest.raises(ValueError, match="the data loader gave no batch"):
        bnn.fit([], num_data=10)
    with pytest.raises(ValueError, match=r"size is not known .* give num_data="):
        bnn.fit(iter(loader))
    history = bnn.fit(iter(loader), num_data=32)  # told the size, a generator trains once
    assert len(history) == 1 and math.isfinite(history[0])
    with pytest.raises(ValueError, match=r"epoch 2\): the data loader gave no batch"):
        bnn.fit(iter(loader), epochs=2, num_data=32)  # a generator is used up after one pass


def test_predict_refuses_draws_that_cannot_fit_in_memory_before_allocating():
    bnn = MCDropout(nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.2), nn.Linear(4, 1)), "regression", tau=10.0)
    with pytest.raises(ValueError, match=r"num_samples=1000000000000 draws of these outputs take .* GiB"):
        bnn.predict(torch.randn(5, 3), num_samples=10**12)  # before: a list of 10^10 chunk sizes


def test_an_input_holding_nan_is_named():
    bnn = MCDropout(nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.2), nn.Linear(4, 1)), "regression", tau=10.0)
    x = torch.randn(5, 3)
    x[2, 1] = float("nan")
    with pytest.raises(ValueError, match=r"MCDropout: x holds 1 NaN or infinite values \(of 15\)"):
        bnn.predict(x)  # before, on the first call: Pyro's "Expected parameter logits"
    with pytest.raises(ValueError, match="MCDropout: y holds 1 NaN"):
        bnn.evaluate(torch.randn(5, 3), torch.tensor([0.0, 1.0, float("inf"), 0.0, 1.0]))


def test_fractional_labels_and_a_meta_batch_are_named():
    """Fractional class labels reached Pyro's support check; a batch on the meta device reached
    "Tensor.item() cannot be called on meta tensors"."""
    from torch import nn

    net = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Dropout(0.2), nn.Linear(8, 2))
    bnn = MCDropout(net, "classification")
    x = torch.randn(10, 3)
    with pytest.raises(ValueError, match=r"labels must be class indices \(whole numbers\), found 0.5"):
        bnn.fit([(x, torch.full((10,), 0.5))], epochs=1)
    with pytest.raises(ValueError, match="on the meta device, which holds shapes but no values"):
        bnn.predict(torch.randn(4, 3, device="meta"))


def test_fit_trains_its_own_copy_of_the_start_and_replays_its_graph():
    """The guide's means once shared their storage with the converted layers' start buffers: every
    step changed the buffers (the trained start lost) and so what the recorded loss reads, which
    was then recorded again at every step and ran eagerly."""
    from pyro_dropout import DropoutELBO

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(1, 16), nn.ReLU(), nn.Dropout(0.1), nn.Linear(16, 1)).eval()
    trained = net[0].weight.detach().clone()
    x = torch.rand(200, 1)
    loader = [(x[i : i + 50], torch.sin(x[i : i + 50, 0])) for i in range(0, 200, 50)]
    bnn, loss = MCDropout(net, "regression", tau=100.0), DropoutELBO()
    bnn.fit(loader, epochs=3, loss=loss)
    assert torch.equal(bnn.model.net[0].start_weight, trained)
    assert "recorded graph" in loss.explain() and "eager" not in loss.explain()


def test_fit_shows_a_bar_in_a_terminal_and_none_under_ci(monkeypatch, capsys):
    from pyro_dropout.runtime import progress_bar

    monkeypatch.setattr("sys.stderr.isatty", lambda: True)
    monkeypatch.delenv("CI", raising=False)
    shown = {}
    for ci in (None, "true"):
        monkeypatch.delenv("CI", raising=False) if ci is None else monkeypatch.setenv("CI", ci)
        for asked in (None, True, False):
            with progress_bar(asked, 4, "fit") as bar:
                shown[ci, asked] = not bar.disable
    assert shown == {(None, None): True, ("true", None): False, (None, True): True, ("true", True): True,
                     (None, False): False, ("true", False): False}  # fmt: skip
    capsys.readouterr()
    x, y = torch.randn(16, 3), torch.randn(16)
    bnn = MCDropout(nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.2), nn.Linear(4, 1)), "regression", tau=10.0)
    bnn.fit([(x[:8], y[:8]), (x[8:], y[8:])], epochs=2, progress=True)
    err = capsys.readouterr().err
    assert "MCDropout.fit" in err and "/4 [" in err  # two epochs of two steps


def test_uncertainty_and_fpr95_for_unlabelled_inputs():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 3)).eval()
    bnn = MCDropout(net, "classification", num_samples=30)
    scores = bnn.uncertainty(torch.randn(10, 3))
    assert set(scores) >= {"predictive_entropy", "mutual_information"} and scores[
        "mutual_information"
    ].shape == (10,)
    found = bnn.ood(torch.randn(20, 3), 5 * torch.randn(20, 3))
    assert all(0 <= v["fpr95"] <= 1 for v in found.values())
    reg = MCDropout(nn.Sequential(nn.Linear(3, 16), nn.Dropout(0.3), nn.Linear(16, 1)), "regression", tau=4.0)
    sds = reg.uncertainty(torch.randn(10, 3))
    assert bool((sds["predictive_sd"] >= 0.5 - 1e-6).all()) and bool((sds["epistemic_sd"] > 0).all())


def test_plot_draws_the_three_pictures_and_writes_them(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 3)).eval()
    bnn = MCDropout(net, "classification", num_samples=20)
    x, y = torch.randn(40, 2), torch.randint(0, 3, (40,))
    bnn.plot("reliability", x, y, path=tmp_path / "reliability.png")
    bnn.plot("ood", x, 4 * torch.randn(40, 2), path=tmp_path / "ood.png")
    reg = MCDropout(
        nn.Sequential(nn.Linear(1, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 1)), "regression", tau=25.0
    )
    grid = torch.linspace(-3, 3, 50).unsqueeze(-1)
    fig = reg.plot(
        "band", grid, x_train=grid[10:20], y_train=torch.sin(grid[10:20, 0]), path=tmp_path / "band.png"
    )
    for name in ("reliability", "ood", "band"):
        data = (tmp_path / f"{name}.png").read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000, name
    assert fig.axes[0].get_title() == "MC dropout predictive"
    with pytest.raises(ValueError, match="kind must be one of reliability, band, ood"):
        bnn.plot("roc", x, y)
    with pytest.raises(ValueError, match=r"a regression on one input feature, x of shape \[N, 1\]"):
        bnn.plot("band", x)
    with pytest.raises(ValueError, match="score must be one of"):
        bnn.plot("ood", x, x, score="entropy")


def test_dropout_rates_name_every_dropout_of_the_network_that_acts():
    """A channel dropout before a Flatten feeds no layer's inputs unit by unit, so its weight's KL
    rate is 0; it still acts in every draw, and the report names it (before: only the 0)."""
    net = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Dropout2d(0.25), nn.Flatten(), nn.Linear(144, 10))
    bnn = MCDropout(net.eval(), "classification")
    assert bnn.dropout_rates()["weights"] == {}  # the guide is set up by the first batch
    bnn.predict(torch.randn(5, 1, 8, 8), num_samples=2)
    rates = bnn.dropout_rates()
    assert rates["network"] == {"2": 0.25} and rates["weights"] == {"net.0.weight": 0.0, "net.4.weight": 0.0}


def test_device_moves_the_converted_copy_not_the_network():
    net = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Dropout(0.2), nn.Linear(8, 2))
    before = [p.detach().clone() for p in net.parameters()]
    bnn = MCDropout(net, "classification", device="cpu", num_samples=4)
    assert bnn.device == torch.device("cpu") and bnn.probs(torch.randn(5, 3)).shape == (4, 5, 2)
    assert all(torch.equal(a, b) for a, b in zip(before, net.parameters(), strict=True))
    # the CUDA case, with fit, save, load and to_module: tests/test_cuda.py (run by benchmarks/gpu_check.sh)


@pytest.mark.parametrize("concrete", [False, True])
def test_fit_with_its_replayed_loss_equals_the_eager_loss_at_every_step(concrete):
    """The recorded path of MCDropout.fit: every step's loss equal to the eager loss's under the same
    seeds, the refined means (and, concrete=True, the learned rates) equal, and the user's network
    and torch's global generator as eager leaves them."""
    from pyro_dropout import DropoutELBO

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 1)).eval()
    before = [p.detach().clone() for p in net.parameters()]
    x = torch.randn(120, 2)
    batches = [(x[i : i + 30], x[i : i + 30, 0]) for i in range(0, 120, 30)]
    runs = {}
    for graph in ("eager", "record"):
        pyro.set_rng_seed(3)
        bnn, loss = MCDropout(net, "regression", tau=50.0, concrete=concrete), DropoutELBO(graph=graph)
        steps = [  # one step a call: each step's own loss, 16 of them (recorded at the 8th)
            bnn.fit([batches[t % 4]], lr=1e-2, loss=loss, num_data=120, progress=False)[0] for t in range(16)
        ]
        runs[graph] = (steps, bnn.guide.median() | bnn.guide.dropout_rates(), torch.get_rng_state())
    assert "recorded graph" in loss.explain()  # the record run replayed
    assert runs["record"][0] == pytest.approx(runs["eager"][0], rel=1e-6, abs=1e-7)  # at every step
    for site, mean in runs["eager"][1].items():
        assert torch.allclose(runs["record"][1][site], mean, atol=1e-6), site
    assert torch.equal(runs["record"][2], runs["eager"][2])
    assert all(torch.equal(a, b) for a, b in zip(before, net.parameters(), strict=True))
