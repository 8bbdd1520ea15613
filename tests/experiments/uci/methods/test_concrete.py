"""Concrete dropout's final M-step: the closed form, the held-out precision, and where its rows come from."""

import math

import pytest
import torch

from pyro_dropout_experiments.core import held_out_tau, m_step_tau
from pyro_dropout_experiments.uci import UCIBenchmark, UCIProtocol, fit_and_validate, run_uci
from pyro_dropout_experiments.uci.methods import ConcreteDropoutMethod
from tests.uci_data import TINY, tiny_method


def _loglik(means, y, tau):
    """The held-out predictive log-likelihood by brute force, ``[G, R]`` for ``tau`` ``[G, R]``."""
    comp = torch.distributions.Normal(means.unsqueeze(0), tau.rsqrt()[:, None, :, None]).log_prob(y)
    return (torch.logsumexp(comp, 1) - math.log(means.shape[0])).sum(-1)


def test_held_out_tau_maximises_the_predictive_log_likelihood():
    g = torch.Generator().manual_seed(0)
    y = torch.randn(3, 40, generator=g, dtype=torch.float64)
    # three runs: one draw (the closed form is exact), and two with a spread of draws
    spread = torch.tensor([0.0, 0.3, 1.0], dtype=torch.float64).reshape(1, 3, 1)
    means = y + 0.5 * torch.randn(1, 3, 40, generator=g, dtype=torch.float64)
    means = means + spread * torch.randn(50, 3, 40, generator=g, dtype=torch.float64)
    closed = m_step_tau(means, y, (1.0, 0.0))  # N / sum of E (y - f)^2: no prior
    tau = held_out_tau(means, y, closed)
    # with all draws equal the maximiser is the closed form (to the search's precision, 1e-9 relative)
    assert tau[0].item() == pytest.approx(closed[0].item(), rel=1e-6)
    # against a dense grid (1e-3 apart in log tau): none is better, within the grid's spacing
    grid = closed * torch.exp(torch.linspace(-3, 3, 6001, dtype=torch.float64)).unsqueeze(-1)
    best = grid[_loglik(means, y, grid).argmax(0), torch.arange(3)]
    assert torch.allclose(tau, best, rtol=2e-3)
    assert (_loglik(means, y, tau.unsqueeze(0)) >= _loglik(means, y, best.unsqueeze(0)) - 1e-9).all()
    # a spread of draws already carries some of the variance: the precision is above the closed form's
    assert (tau[1:] > closed[1:]).all()


def test_m_step_tau_is_the_gamma_posterior_mode():
    y = torch.tensor([[0.0, 1.0, 2.0, 3.0]])
    means = torch.zeros(2, 1, 4)  # E (y - f)^2 = y^2: sum 14
    assert m_step_tau(means, y, (2.0, 1.0)).item() == pytest.approx((2 - 1 + 2) / (1 + 7))


def test_the_held_out_precision_comes_from_validation_rows_and_is_carried_to_the_final_fit(tiny, monkeypatch):
    data = UCIBenchmark.load("tiny", tiny)
    seen = []
    original = ConcreteDropoutMethod.after_training

    def spy(self, model, guide, rows):
        seen.append((rows.held_out, rows.x.shape[1], [h.get("tau_held_out") for h in rows.hyper]))
        return original(self, model, guide, rows)

    monkeypatch.setattr(ConcreteDropoutMethod, "after_training", spy)
    (result,) = run_uci(data, tiny_method("concrete"), [1], None, TINY, log=lambda m: None)
    grid, final = seen
    fit, validation = fit_and_validate(data.splits[1].train)
    assert grid[0] is not None and grid[0][0].shape[1] == len(validation) and grid[1] == len(fit)
    # the final fit trains on all the training rows and sees no held-out rows (it scores the test rows)
    assert final[0] is None and final[1] == len(data.splits[1].train)
    chosen = max(result["validation"], key=lambda v: v["test_ll"])
    assert final[2] == [chosen["tau_held_out"]]
    assert result["tau_held_out"] == chosen["tau_held_out"]
    assert result["tau"] == pytest.approx(chosen["tau_held_out"], rel=1e-5)  # (through float32)
    # every network trained with tau held at its grid value (standardised scale), the final one at the
    # chosen point's; the M-step then replaced it
    assert result["tau_train"] == chosen["tau_train"] and result["tau_before_m_step"] != result["tau"]
    rows = result["validation"]
    assert len(rows) == 9 and {r["tau_train"] for r in rows} == {1.0, 10.0, 100.0}
    for r in rows:  # held: before the M-step, each row's tau is its grid value on the original scale
        same = [v["tau_before_m_step"] for v in rows if v["tau_train"] == r["tau_train"]]
        assert same == pytest.approx([r["tau_before_m_step"]] * 3, rel=1e-6)
    assert rows[1]["tau_before_m_step"] / rows[0]["tau_before_m_step"] == pytest.approx(10.0, rel=1e-5)
    # the paper's closed form on the training rows: nothing carried
    seen.clear()
    (training,) = run_uci(
        data, tiny_method("concrete", m_step_rows="training"), [1], None, TINY, log=lambda m: None
    )
    assert all(carried == [None] * len(carried) for _, _, carried in seen)
    assert "tau_held_out" not in training
    assert UCIProtocol(data, tiny_method("concrete", m_step_rows="training"), TINY).method.carried() == ()
