"""Options dataclasses: flags, checks and stored keys from one source."""

import argparse
from dataclasses import dataclass, field

import pytest

from pyro_dropout_experiments.core import add_flags, flatten, from_args, unflatten, unless_given, validate


@dataclass
class Options:
    rate: float = field(default=0.5, metadata={"positive": True, "help": "a rate"})
    steps: int = field(default=3, metadata={"minimum": 1})
    kind: str = field(default="a", metadata={"choices": ("a", "b")})
    scales: tuple[float, ...] = field(default=(1.0, 2.0), metadata={"positive": True})
    start: float | None = None
    on: bool = True


def _parser():
    parser = argparse.ArgumentParser(exit_on_error=False)
    add_flags(parser, Options, "my")
    return parser


def test_flags_carry_the_defaults_and_parse_each_type():
    args = _parser().parse_args(["--my-rate", "0.25", "--my-scales", "3,4", "--no-my-on", "--my-start", "2"])
    options = from_args(Options, args, "my")
    assert options == Options(rate=0.25, scales=(3.0, 4.0), on=False, start=2.0)
    assert from_args(Options, _parser().parse_args([]), "my") == Options()
    assert "a rate (default 0.5)" in _parser().format_help()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--my-rate", "0"], "--my-rate must be positive, got 0.0"),
        (["--my-rate", "inf"], "--my-rate must be finite"),
        (["--my-steps", "0"], "--my-steps must be at least 1, got 0"),
        (["--my-steps", "2.5"], "--my-steps takes int values, got '2.5'"),
        (["--my-kind", "c"], "--my-kind must be one of a, b, got 'c'"),
        (["--my-scales", "1,-2"], "--my-scales must be positive, got -2.0"),
    ],
)
def test_bad_values_are_refused_when_parsed(flags, message):
    with pytest.raises(argparse.ArgumentError, match=message):
        _parser().parse_args(flags)


def test_validate_checks_values_set_in_python():
    validate(Options())
    for bad, message in [
        (Options(steps=1.5), r"steps \(--steps\) must be a whole number"),  # type: ignore[arg-type]
        (Options(rate="1"), r"rate \(--rate\) must be a number"),  # type: ignore[arg-type]
        (Options(kind="z"), r"kind \(--kind\) must be one of a, b"),
    ]:
        with pytest.raises(ValueError, match=message):
            validate(bad)


def test_stored_keys_round_trip_and_missing_keys_take_the_legacy_value():
    flat = flatten(Options(scales=(5.0,)), "my")
    assert flat == {
        "my_rate": 0.5,
        "my_steps": 3,
        "my_kind": "a",
        "my_scales": [5.0],
        "my_start": None,
        "my_on": True,
    }
    assert unflatten(Options, flat, "my") == Options(scales=(5.0,))
    assert unflatten(Options, {"other": 1}, "my", legacy={"my_kind": "b"}) == Options(kind="b")


def test_quick_values_go_to_the_flags_not_given_the_later_change_winning():
    args = _parser().parse_args(["--my-steps", "7"])
    given = from_args(Options, args, "my")
    out = unless_given(
        given, {"steps": 2, "rate": 0.1, "other": 1}, {"rate": 0.2, "kind": "b"}, given={"steps"}
    )
    assert (out.steps, out.rate, out.kind, out.scales) == (7, 0.2, "b", (1.0, 2.0))  # "other": no field
    assert unless_given(given, given=set()) == given


def test_an_explicit_flag_wins_over_quick_even_at_its_default():
    """``--my-steps 3`` equals the default and is still the user's choice: --quick leaves it."""
    from pyro_dropout_experiments.core import Parser, command_settings

    parser = Parser()
    add_flags(parser, Options, "my")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(["--my-steps", "3", "--quick"])
    assert args.given == {"my_steps", "quick"}
    out = command_settings(Options, args, {"steps": 2, "rate": 0.1}, prefix="my")
    assert (out.steps, out.rate) == (3, 0.1)
    args = parser.parse_args(["--my-steps=3", "--quick"])  # the = form is a given flag too
    assert command_settings(Options, args, {"steps": 2}, prefix="my").steps == 3
    assert command_settings(Options, parser.parse_args(["--quick"]), {"steps": 2}, prefix="my").steps == 2


def test_threads_flag_sets_torchs_threads_and_rejects_nonsense():
    import argparse

    import torch

    from pyro_dropout_experiments.core import add_threads, use_threads

    parser = argparse.ArgumentParser()
    add_threads(parser)
    before = torch.get_num_threads()
    try:
        use_threads(parser.parse_args(["--threads", "1"]))
        assert torch.get_num_threads() == 1
        use_threads(parser.parse_args([]))  # not given: unchanged
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    for bad in ("0", "two"):
        with pytest.raises(SystemExit):
            parser.parse_args(["--threads", bad])
