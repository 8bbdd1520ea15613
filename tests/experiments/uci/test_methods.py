"""What each method builds under the UCI protocol: priors, precisions, starts, the M-step."""

import json
import math
from dataclasses import replace

import pytest
import torch

from pyro_dropout_experiments.uci import (
    Spec,
    UCIBenchmark,
    build_runs,
    get_method,
    run_uci,
)
from pyro_dropout_experiments.uci.methods import ConcreteOptions
from tests.uci_data import TINY, spy_on_build, tiny_method


def _built(data, method, specs, settings=TINY):
    return build_runs(data, method, specs, settings)


def test_tau_is_applied_on_the_original_scale(tiny):
    data = UCIBenchmark.load("tiny", tiny)
    spec = Spec(0, data.splits[0].train, data.splits[0].test, {"p": 0.1, "tau": 2.0})
    built = _built(data, get_method("mc-dropout"), [spec])
    stats = built.stats
    assert torch.allclose(built.model.fixed_tau, (2.0 * stats.y_std.pow(2)).reshape(1, 1))
    assert torch.equal(stats.x_std[0, 3], torch.tensor(1.0))  # the constant column: std 0 -> 1
    # a run's own prior length-scale reaches every layer's prior (std 1/l), times sqrt(K_in) by
    # default (paper 001, appendix D): 4 inputs, 8 hidden units
    spec.hyper["length_scale"] = 0.5
    model = _built(data, get_method("concrete"), [spec]).model
    assert float(model.hidden[0].prior_weight_scale) == pytest.approx(1 / (0.5 * math.sqrt(4)))
    assert float(model.output.prior_weight_scale) == pytest.approx(1 / (0.5 * math.sqrt(8)))
    model = _built(data, tiny_method("concrete", scale_by_fan_in=False), [spec]).model
    assert float(model.hidden[0].prior_weight_scale) == float(model.output.prior_weight_scale) == 2.0
    # runs with different length-scales train together, each with its own prior
    other = Spec(0, spec.train, spec.score, {**spec.hyper, "length_scale": 2.0})
    model = _built(data, get_method("concrete"), [spec, other]).model
    scales = model.hidden[0].prior_weight_scale.flatten()
    assert scales.tolist() == pytest.approx([1 / (0.5 * math.sqrt(4)), 1 / (2.0 * math.sqrt(4))])
    model = _built(data, get_method("mc-dropout"), [spec, other]).model
    assert model.output.prior_weight_scale.flatten().tolist() == pytest.approx([2.0, 0.5])


# trains every method once (about a minute): slow
@pytest.mark.slow
def test_init_setting_reaches_every_network_and_is_checked_on_resume(tiny, monkeypatch):
    data = UCIBenchmark.load("tiny", tiny)
    guides = spy_on_build(monkeypatch, "guide")
    from pyro_dropout.guides import init_to_glorot

    for method in ("mc-dropout", "mfvi", "ensemble", "concrete", "nn-p0"):
        guides.clear()
        run_uci(data, tiny_method(method), [0], None, replace(TINY, init="glorot"), log=lambda m: None)
        # (Concrete dropout holds tau at its grid values by default, so its network has no tau site)
        assert guides and all(g.init_loc_fn is init_to_glorot for g in guides), method
    # learning tau by MAP, Concrete dropout starts tau at its own value, the rest by --init
    guides.clear()
    glorot = replace(TINY, init="glorot")
    run_uci(data, tiny_method("concrete", tau="map"), [0], None, glorot, log=lambda m: None)
    assert guides and all(g.init_loc_fn.keywords["fallback"] is init_to_glorot for g in guides)
    run_uci(data, tiny_method("mc-dropout"), [0], tiny / "out", TINY, log=lambda m: None)
    with pytest.raises(ValueError, match="init='fan-in' but this run has init='glorot'"):
        run_uci(data, tiny_method("mc-dropout"), [0], tiny / "out", glorot, log=lambda m: None)
    with pytest.raises(ValueError, match=r"init \(--init\) must be one of fan-in, glorot, got 'he'"):
        replace(TINY, init="he")


def test_concrete_tau_start_under_map_and_the_settings_checked_on_resume(tiny):
    data = UCIBenchmark.load("tiny", tiny)
    sp = Spec(0, data.splits[0].train, data.splits[0].test, {"length_scale": 0.01})

    def initial_tau(**options):
        built = _built(data, tiny_method("concrete", **options), [sp] * 4)
        built.guide(built.stats.x(built.train[0]), built.stats.y(built.train[1]))
        return built.guide.median()["tau"].reshape(-1)

    # the default holds tau at each value of a grid chosen on validation rows; "map" learns it from 1
    assert (ConcreteOptions().tau, ConcreteOptions().tau_init) == ("em", 1.0)
    assert ConcreteOptions().tau_grid == (1.0, 10.0, 100.0)
    # (through the guide's log-parametrisation: equal to float32 rounding)
    assert torch.allclose(initial_tau(tau="map"), torch.full((4,), 1.0), rtol=1e-6, atol=0)
    assert torch.allclose(initial_tau(tau="map", tau_init=1e-3), torch.full((4,), 1e-3), rtol=1e-6)
    legacy = initial_tau(tau="map", tau_init=None)  # a sample median of the prior, per run
    assert len(set(legacy.tolist())) == 4
    with pytest.raises(ValueError, match=r"tau_init \(--concrete-tau-init\) must be positive, got -1\.0"):
        initial_tau(tau="map", tau_init=-1.0)
    # files made before the settings learned tau by MAP from a random start: resuming one under
    # the new default is an error, and so is one made with another start
    out = tiny / "out"
    for method in ("concrete", "mc-dropout"):
        run_uci(data, tiny_method(method), [0], out, TINY, log=lambda m: None)
        path = out / f"tiny_{method}_split00.json"
        stored = json.loads(path.read_text())
        for key in ("concrete_tau_init", "concrete_tau", "concrete_m_step_rows", "concrete_tau_grid"):
            stored["settings"].pop(key, None)
        path.write_text(json.dumps(stored))
    legacy = {"tau": "map", "tau_init": None, "m_step_rows": "training", "tau_grid": ()}
    for key, value, shown in [
        ("tau", "em", r"concrete_tau='map' but this run has concrete_tau='em'"),
        ("tau_init", 1.0, r"concrete_tau_init=None but this run has concrete_tau_init=1\.0"),
        ("m_step_rows", "validation", r"concrete_m_step_rows='training' but this run has 'validation'"),
        (
            "tau_grid",
            (1.0, 10.0),
            r"concrete_tau_grid=\[\] but this run has concrete_tau_grid=\[1\.0, 10\.0\]",
        ),
    ]:
        changed = {**legacy, key: value, **({"tau_init": 1.0} if key == "tau" else {})}
        with pytest.raises(ValueError, match=shown.replace("has '", "has concrete_m_step_rows='")):
            run_uci(data, tiny_method("concrete", **changed), [0], out, TINY, log=lambda m: None)
    with pytest.raises(ValueError, match="was made with"):  # today's default differs in all four
        run_uci(data, tiny_method("concrete"), [0], out, TINY, log=lambda m: None)
    legacy_run = tiny_method("concrete", **legacy)
    run_uci(data, legacy_run, [0], out, TINY, log=lambda m: None)
    run_uci(data, tiny_method("mc-dropout"), [0], out, TINY, log=lambda m: None)  # Concrete's settings only


def test_concrete_tau_held_during_training_then_set_by_the_m_step(tiny):
    data = UCIBenchmark.load("tiny", tiny)
    runs = {}
    for init in (0.5, 2.0):
        method = tiny_method("concrete", tau="em", tau_init=init, m_step_rows="training", tau_grid=())
        (runs[init],) = run_uci(data, method, [0], None, TINY, log=lambda m: None)
    # held: the value before the M-step is the start itself (original scale: the same factor 1/std_y^2)
    assert runs[2.0]["tau_before_m_step"] / runs[0.5]["tau_before_m_step"] == pytest.approx(4.0, rel=1e-6)
    # the M-step replaced it with the closed-form MAP, which depends on the fit, not on the start
    assert runs[2.0]["tau"] != pytest.approx(runs[2.0]["tau_before_m_step"], rel=1e-3)
    learned_tau = tiny_method("concrete", tau="map", tau_init=0.5, m_step_rows="training")
    (learned,) = run_uci(data, learned_tau, [0], None, TINY, log=lambda m: None)
    # MAP moved it
    assert learned["tau_before_m_step"] != pytest.approx(runs[0.5]["tau_before_m_step"], rel=1e-6)
    with pytest.raises(ValueError, match=r"tau \(--concrete-tau\) must be one of em, map, got 'fixed'"):
        tiny_method("concrete", tau="fixed")
    with pytest.raises(ValueError, match="holds tau at tau_init, which is None"):
        tiny_method("concrete", tau="em", tau_init=None, tau_grid=())
