"""The method registry: one class in one place adds a method to the protocol, the command line
and the tables."""

import math
from dataclasses import dataclass, field

import pytest

from pyro_dropout_experiments.cli import build_parser
from pyro_dropout_experiments.uci import (
    BUILT_IN,
    GridSetup,
    UCIBenchmark,
    get_method,
    label,
    method_class,
    method_names,
    register,
    run_uci,
    unregister,
)
from pyro_dropout_experiments.uci.methods import MCDropout
from tests.uci_data import TINY

NAMES = ("mc-dropout", "concrete", "bbalpha-0.5", "bbalpha-1", "mfvi", "ensemble", "sgp", "hmc", "nn-p0")


def test_the_built_in_methods_in_table_order():
    assert method_names() == NAMES == tuple(entry.name for entry in BUILT_IN)
    assert get_method("bbalpha-1").presets == {"alpha": 1.0}
    assert get_method("bbalpha-0.5").options.particles == 10
    with pytest.raises(ValueError, match=r"unknown method 'nope' \(choose from mc-dropout, concrete"):
        get_method("nope")
    with pytest.raises(ValueError, match="a method named 'mc-dropout' is already registered"):
        register("mc-dropout")(MCDropout)
    with pytest.raises(TypeError, match="options must be BBAlphaOptions"):
        get_method("bbalpha-1", object())


@dataclass
class HalfRateOptions:
    scale: float = field(default=0.5, metadata={"positive": True, "help": "times the grid's rates"})


@pytest.fixture
def half_rate():
    """A new method in one class: MC dropout with each grid rate scaled."""

    @register("mc-dropout-half", summary="MC dropout at a fraction of each grid rate")
    class HalfRate(MCDropout):
        options_class = HalfRateOptions
        prefix = "half"

        def grid(self, setup: GridSetup):
            return [
                {"p": p * self.options.scale, "tau": t} for p in setup.dropout_rates for t in setup.tau_values
            ]

    yield HalfRate
    unregister("mc-dropout-half")


def test_a_method_in_one_class_runs_everywhere(half_rate, tiny):
    # the protocol
    method = get_method("mc-dropout-half", HalfRateOptions(scale=0.5))
    (result,) = run_uci(UCIBenchmark.load("tiny", tiny), method, [0], tiny / "out", TINY, log=lambda m: None)
    assert result["p"] in (0.005, 0.05) and math.isfinite(result["test_ll"])
    assert result["settings"]["half_scale"] == 0.5  # its options are stored and checked on resume
    assert (tiny / "out" / "tiny_mc-dropout-half_split00.json").is_file()
    # its labels (it inherits MC dropout's masks) and the command line, with its own flag
    assert label("mc-dropout-half", False) == "mc-dropout-half-per-draw"
    args = build_parser().parse_args(
        ["uci", "--dataset", "d", "--method", "mc-dropout-half", "--half-scale", "0.1"]
    )
    assert args.method == "mc-dropout-half" and args.half_scale == 0.1
    assert method_class("mc-dropout-half")[1]["summary"].startswith("MC dropout at a fraction")
    # once removed it is gone from everything
    unregister("mc-dropout-half")
    assert "mc-dropout-half" not in method_names()
    register("mc-dropout-half")(half_rate)  # for the fixture's teardown
