"""The front door takes the inputs a network's forward takes (a tuple of positional inputs, a dict
of keyword inputs, a graph's ``(x, edge_index)``), and networks torch runs its own way (a
bidirectional or projected LSTM, graph layers the library cannot make Bayesian): on each, the MC
predictive is the network's own MC dropout (the conformance battery's z-tests against its own
passes, its dropout on), and the expected weights give the network in eval mode (1e-5).
"""

from __future__ import annotations

import math

import pyro
import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from pyro_dropout import MCDropout, predict_standard

from ..nn.conformance import compare_draws
from ..nn.conformance_inputs import cases, eval_pass, own_passes

CASES = cases()
FAST = ("tabular-tuple", "tabular-dict", "diffusion-unet-x-t", "gcn-plain-torch", "bilstm-tagger")


def _front(name: str, draws: int) -> tuple[MCDropout, object, object]:
    case = CASES[name]
    if case.needs:
        pytest.importorskip(case.needs, reason=f"{case.needs} (an optional extra)")
    torch.manual_seed(0)
    net, inputs = case.make().eval(), case.inputs()
    options = {"tau": 1.0} if case.task == "regression" else {}
    return MCDropout(net, case.task, num_samples=draws, shared=case.shared, **options), net, inputs


def _squeezed(site: str, out: torch.Tensor) -> torch.Tensor:
    return out.squeeze(-1) if site == "mean" else out


def _check(name: str, draws: int) -> None:
    case = CASES[name]
    bnn, net, inputs = _front(name, draws)
    pyro.set_rng_seed(1)
    lib = bnn.predict(inputs).samples[case.site]
    torch.manual_seed(2)
    own = _squeezed(case.site, own_passes(net, inputs, draws))
    result = compare_draws(lib, own)
    assert result.passed, result
    assert 0.85 < result.sd_ratio < 1.15, result
    standard = predict_standard(bnn.model, bnn.guide, inputs).samples[case.site][0]
    expected = _squeezed(case.site, eval_pass(net, inputs))
    assert torch.allclose(standard, expected, atol=1e-5), (standard - expected).abs().max()


@pytest.mark.parametrize("name", FAST)
def test_several_inputs_give_the_networks_own_mc_dropout(name):
    _check(name, 400)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in CASES if n not in FAST])
def test_several_inputs_give_the_networks_own_mc_dropout_slow(name):
    _check(name, 2000)


def test_a_padded_batchs_attention_mask_is_honoured():
    """BERT with a padded batch: the predictive with its mask is the network's own with that mask
    (the slow battery), and its expected weights give the network's eval output with the mask,
    not without it (the mask reaches the forward)."""
    bnn, net, inputs = _front("hf-bert-padded", 8)
    assert bnn.predict(inputs).probs["obs"].shape == (8, 3, 3)
    standard = predict_standard(bnn.model, bnn.guide, inputs).samples["logits"][0]
    assert torch.allclose(standard, eval_pass(net, inputs), atol=1e-5)
    unmasked = {"input_ids": inputs["input_ids"], "attention_mask": torch.ones_like(inputs["attention_mask"])}
    gap = (eval_pass(net, unmasked) - standard).abs()
    assert float(gap[0].max()) < 1e-6 < float(gap[1:].max())  # the row without padding is the same


class _Pairs(Dataset):
    """A dataset of ((numbers, category), y) or of dicts of keyword inputs and their "labels"."""

    def __init__(self, as_dict: bool) -> None:
        generator = torch.Generator().manual_seed(0)
        self.numbers = torch.randn(24, 3, generator=generator)
        self.category = torch.randint(0, 6, (24,), generator=generator)
        self.y = self.numbers[:, 0] + 0.1 * torch.randn(24, generator=generator)
        self.as_dict = as_dict

    def __len__(self) -> int:
        return 24

    def __getitem__(self, i: int):
        if self.as_dict:
            return {"numbers": self.numbers[i], "category": self.category[i], "labels": self.y[i]}
        return (self.numbers[i], self.category[i]), self.y[i]


@pytest.mark.parametrize("as_dict", [False, True])
def test_fit_evaluate_save_and_load_take_several_inputs(as_dict, tmp_path):
    """A DataLoader of ((x1, x2), y) batches (collated as lists) or of dicts with "labels": fit,
    evaluate and predict stream them; the kept front door loads and draws the same under a seed."""
    bnn, net, _ = _front("tabular-dict" if as_dict else "tabular-tuple", 50)
    data = _Pairs(as_dict)
    loader = DataLoader(data, batch_size=8)
    history = bnn.fit(loader, epochs=2, progress=False)
    assert len(history) == 2 and all(torch.isfinite(torch.tensor(history)))
    report = bnn.evaluate(loader)
    assert report.rmse > 0 and bnn.predict(loader).means["obs"].shape == (50, 24)
    x = (
        {"numbers": data.numbers[:5], "category": data.category[:5]}
        if as_dict
        else (data.numbers[:5], data.category[:5])
    )
    path = bnn.save(tmp_path / "front.pt")
    again = MCDropout.load(path, net)
    pyro.set_rng_seed(3)
    first = bnn.predict(x).means["obs"]
    pyro.set_rng_seed(3)
    assert torch.equal(again.predict(x).means["obs"], first)
    refined = bnn.to_module()
    call = refined(**x) if as_dict else refined(*x)
    expected = predict_standard(bnn.model, bnn.guide, x).means["obs"][0]
    assert torch.allclose(call.squeeze(-1), expected, atol=1e-5)


class _DenseGraph(torch.nn.Module):
    """A graph network on a dense adjacency ``[N, N]``: its dim 0 is the batch's by chance."""

    def __init__(self) -> None:
        super().__init__()
        self.lin, self.out = torch.nn.Linear(4, 8), torch.nn.Linear(8, 2)

    def forward(self, x, adjacency):
        h = torch.relu(adjacency @ self.lin(torch.nn.functional.dropout(x, 0.3, self.training)))
        return self.out(adjacency @ h)


def test_an_input_shared_by_the_examples_is_inferred_or_declared():
    """edge_index [2, E] is shared by its shape; a dense [N, N] adjacency is declared
    shared=["adjacency"] (undeclared, the rows check finds the rows joined and warns); a name the
    forward does not take is refused."""
    torch.manual_seed(0)
    x, adjacency = torch.randn(5, 4), torch.softmax(torch.randn(5, 5), -1)
    net = _DenseGraph().eval()
    with pytest.warns(UserWarning, match="does not treat the rows of a batch apart"):
        MCDropout(net, num_samples=4).predict((x, adjacency))
    declared = MCDropout(net, num_samples=4, shared=["adjacency"])
    declared.predict((x, adjacency))
    assert "adjacency [5, 5] (shared)" in declared.explain()
    assert "the shared adjacency joins the rows" in declared.explain()
    with pytest.raises(ValueError, match=r"shared names \['adj'\], which _DenseGraph.forward does not take"):
        MCDropout(net, shared=["adj"])


def test_a_network_with_no_layer_to_make_bayesian_predicts_and_refuses_to_fit():
    """torch_geometric's GCN: its own MC dropout, no site to refine; fit refused by name."""
    bnn, _, inputs = _front("pyg-gcn", 20)
    assert bnn.predict(inputs).probs["obs"].shape == (20, 7, 3)
    assert "no latent site" in bnn.explain()
    with pytest.raises(ValueError, match=r"MCDropout.fit: PygNet has no layer the library can make Bayesian"):
        bnn.fit([(inputs, torch.zeros(7, dtype=torch.long))])


class _TwoHeads(pyro.distributions.TorchDistribution):
    """A user's distribution of two heads: y[..., 0] ~ Normal(f[..., 0], 1) and y[..., 1] a class
    of Categorical(logits=f[..., 1:]); no mean, no variance."""

    arg_constraints: dict = {}
    support = torch.distributions.constraints.real_vector

    def __init__(self, f: torch.Tensor) -> None:
        self.f = f
        super().__init__(f.shape[:-1], torch.Size([2]))

    def _heads(self):
        return pyro.distributions.Normal(self.f[..., 0], 1.0), pyro.distributions.Categorical(
            logits=self.f[..., 1:]
        )

    def log_prob(self, y):
        normal, categorical = self._heads()
        return normal.log_prob(y[..., 0]) + categorical.log_prob(y[..., 1].long())

    def sample(self, sample_shape=()):
        normal, categorical = self._heads()
        shape = torch.Size(sample_shape)
        return torch.stack([normal.sample(shape), categorical.sample(shape).float()], -1)


def test_a_users_distribution_without_a_mean_is_evaluated_by_its_log_likelihood():
    """Before: evaluate raised a bare KeyError: 'obs'. Now its report is the MC predictive
    log-likelihood, each point's log-mean-exp of its draws' log p(y | f), from a tensor or a loader."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(3, 16), torch.nn.ReLU(), torch.nn.Dropout(0.2), torch.nn.Linear(16, 4)
    )
    x = torch.randn(20, 3)
    y = torch.stack([torch.randn(20), torch.randint(0, 3, (20,)).float()], -1)
    bnn = MCDropout(net, _TwoHeads, num_samples=4000)
    report = bnn.evaluate(x, y)
    assert report.rmse is None and report.num_samples == 4000
    f = bnn.predict(x).samples["output"]  # other draws of the same predictive
    log_p = _TwoHeads(f).log_prob(y).double()  # [4000, 20]
    expected = (torch.logsumexp(log_p, 0) - math.log(4000)).mean()
    assert report.test_ll == pytest.approx(float(expected), abs=0.01)  # two MC estimates, 4,000 draws each
    merged = bnn.evaluate([(x[:12], y[:12]), (x[12:], y[12:])])
    assert merged.log_likelihood.shape == (20,) and "test_ll" in str(merged)
