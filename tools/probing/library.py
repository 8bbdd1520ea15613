"""The first wave: bad and extreme inputs to the guide, the losses, SVI and CompiledSVI steps,
predict, evaluate, the layers and models, and the metrics."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyro
import torch
from pyro.infer import SVI

from pyro_dropout import BBAlpha, CompiledSVI, DropoutELBO, DropoutGuide, evaluate, predict
from pyro_dropout import metrics as M
from pyro_dropout.nn import MLP, Conv2d, Linear

from .base import Probe, finite, fitted, small_data

BAD_NUMBERS: list[Any] = [None, "0.1", [0.1], True, -0.1, 1.0, 1.5, float("nan"), float("inf"), -float("inf")]
BAD_COUNTS: list[Any] = [0, -1, True, 2.5, "3", None, float("nan")]


def _guide_step(**kwargs: Any) -> float:
    pyro.clear_param_store()
    model = MLP(3, hidden=(4,))
    guide = DropoutGuide(model, **kwargs)
    return SVI(model, guide, pyro.optim.Adam({"lr": 1e-2}), DropoutELBO()).step(*small_data())


def guide_probes() -> list[Probe]:
    probes = [
        Probe("guide", f"dropout={v!r}", lambda v=v: _guide_step(dropout=v), ("dropout",), finite)
        for v in [*BAD_NUMBERS, torch.tensor(1 - 1e-9, dtype=torch.float64), torch.tensor([0.1, 0.2])]
    ]
    probes += [
        Probe(
            "guide",
            f"concrete init_dropout={v!r}",
            lambda v=v: _guide_step(concrete=True, init_dropout=v),
            ("init_dropout",),
            finite,
        )
        for v in [*BAD_NUMBERS, 0.0]
    ]
    probes += [
        Probe(
            "guide",
            f"dropout callable -> {v!r}",
            lambda v=v: _guide_step(dropout=lambda n, s: v),
            ("dropout",),
            finite,
        )
        for v in BAD_NUMBERS
    ]
    probes += [
        Probe("guide", f"dropout dict {d!r}", lambda d=d: _guide_step(dropout=d), ("dropout", "site"), finite)
        for d in [{"nope": 0.1}, {"hidden.0.weight": 0.1}, {"hidden.0.weight": 0.1, "output.weight": 2.0}]
    ]
    probes += [
        Probe(
            "guide",
            f"point_estimates={v!r}",
            lambda v=v: _guide_step(point_estimates=v),
            ("point_estimates",),
            finite,
        )
        for v in ["hidden.0.weight", ["nope"], [1], None]
    ]
    probes += [
        Probe(
            "guide",
            f"temperature={v!r}",
            lambda v=v: _guide_step(concrete=True, temperature=v),
            ("temperature",),
            finite,
        )
        for v in [0, -1.0, float("nan"), float("inf"), "0.1", None]
    ]
    return probes


def _step(svi_class: type, loss: Any, x: torch.Tensor, y: torch.Tensor | None) -> float:
    pyro.clear_param_store()
    model = MLP(3, hidden=(4,))
    return svi_class(model, DropoutGuide(model), pyro.optim.Adam({"lr": 1e-2}), loss).step(x, y)


def _bad_data() -> dict[str, tuple[torch.Tensor, Any]]:
    x, y = small_data()
    nan_x, inf_y = x.clone(), y.clone()
    nan_x[0, 0], inf_y[1] = float("nan"), float("inf")
    return {
        "empty batch": (x[:0], y[:0]),
        "NaN in x": (nan_x, y),
        "inf in y": (x, inf_y),
        "x * 1e20": (x * 1e20, y),
        "y * 1e30": (x, y * 1e30),
        "y of length 1": (x, y[:1]),
        "y too short": (x, y[:4]),
        "integer x": (x.long(), y),
        "float64 x": (x.double(), y),
        "x with 2 features": (x[:, :2], y),
        "1-d x": (x[:, 0], y),
        "integer y": (x, y.long()),
    }


def step_probes() -> list[Probe]:
    probes = []
    for svi_class in (SVI, CompiledSVI):
        for loss_name, make in (
            ("DropoutELBO", DropoutELBO),
            ("BBAlpha", lambda: BBAlpha(0.5, num_particles=3)),
        ):
            for what, (x, y) in _bad_data().items():
                probes.append(
                    Probe(
                        "step",
                        f"{svi_class.__name__}/{loss_name}: {what}",
                        lambda c=svi_class, m=make, x=x, y=y: _step(c, m(), x, y),
                        ("model argument", "site", "MLP", "linear", "loss"),
                        finite,
                    )
                )
    probes += [
        Probe("loss", f"BBAlpha(alpha={v!r})", lambda v=v: BBAlpha(v), ("alpha",))
        for v in [0, *BAD_NUMBERS[:4], -1.0, float("nan"), float("inf")]
    ]
    probes += [
        Probe(
            "loss",
            f"BBAlpha(num_particles={v!r})",
            lambda v=v: BBAlpha(0.5, num_particles=v),
            ("num_particles",),
        )
        for v in BAD_COUNTS
    ]
    probes += [
        Probe(
            "loss",
            f"DropoutELBO(num_particles={v!r})",
            lambda v=v: DropoutELBO(num_particles=v),
            ("num_particles",),
        )
        for v in BAD_COUNTS
    ]
    return probes


def predict_probes() -> list[Probe]:
    model, guide = fitted()
    x, y = small_data()
    probes = []
    for name in ("num_samples", "chunk_size"):
        for v in BAD_COUNTS:
            probes.append(
                Probe(
                    "predict",
                    f"predict {name}={v!r}",
                    lambda n=name, v=v: predict(model, guide, x, **{n: v}),
                    (name,),
                    lambda p: finite(p["obs"]),
                )
            )
            probes.append(
                Probe(
                    "evaluate",
                    f"evaluate {name}={v!r}",
                    lambda n=name, v=v: evaluate(model, guide, x, y, **{n: v}),
                    (name,),
                    lambda r: finite(r.test_ll),
                )
            )
    for v in ["obs", ["nope"], [1], "mean"]:
        probes.append(
            Probe(
                "predict",
                f"predict return_sites={v!r}",
                lambda v=v: predict(model, guide, x, num_samples=3, return_sites=v),
                ("return_sites",),
                lambda p: bool(p.samples),
            )
        )
    for what, (bx, by) in _bad_data().items():
        rows = len(bx)
        probes.append(
            Probe(
                "predict",
                f"predict: {what}",
                lambda bx=bx: predict(model, guide, bx, num_samples=3),
                ("model argument", "MLP", "linear"),
                lambda p, n=rows: p["obs"].shape == (3, n),
            )
        )
        probes.append(
            Probe(
                "evaluate",
                f"evaluate: {what}",
                lambda bx=bx, by=by: evaluate(model, guide, bx, by, num_samples=3),
                ("model argument", "MLP", "linear", "site"),
                lambda r: finite(r.test_ll),
            )
        )
    return probes


def layer_probes() -> list[Probe]:
    probes = [
        Probe(
            "layers",
            f"MLP({kw})",
            lambda kw=kw: MLP(**kw),
            tuple(k for k in kw if k != "in_features") or ("MLP",),
        )
        for kw in [
            {"in_features": 0},
            {"in_features": 3, "hidden": (0,)},
            {"in_features": 3, "tau": -1.0},
            {"in_features": 3, "tau": float("nan")},
            {"in_features": 3, "likelihood": "x"},
            {"in_features": 3, "activation": "x"},
            {"in_features": 3, "length_scale": 0.0},
            {"in_features": 3, "length_scale": -1.0},
            {"in_features": 3, "runs": 0},
        ]
    ]
    probes += [
        Probe("layers", f"Linear({a}, {b})", lambda a=a, b=b: Linear(a, b), ("Linear", "features"))
        for a, b in [(0, 3), (3, 0), (-1, 2)]
    ]
    probes += [
        Probe("layers", f"Conv2d({kw})", lambda kw=kw: Conv2d(1, 2, **kw), tuple(kw))
        for kw in [
            {"kernel_size": 0},
            {"kernel_size": (3, 0)},
            {"kernel_size": 3, "stride": 0},
            {"kernel_size": 3, "dilation": 0},
            {"kernel_size": 2.5},
        ]
    ]
    return probes


def metric_probes() -> list[Probe]:
    g = torch.Generator().manual_seed(1)
    probs = torch.softmax(torch.randn(5, 4, 3, generator=g), -1)
    labels, draws, y = torch.tensor([0, 1, 2, 1]), torch.randn(5, 4, generator=g), torch.randn(4, generator=g)
    cases: list[tuple[str, Callable[[], Any], tuple[str, ...]]] = [
        ("accuracy, no points", lambda: M.accuracy(probs[:, :0], labels[:0]), ("no points",)),
        ("ECE, no points", lambda: M.expected_calibration_error(probs[:, :0], labels[:0]), ("no points",)),
        ("rmse, no points", lambda: M.rmse(y[:0], y[:0]), ("no points",)),
        ("crps, no points", lambda: M.crps(draws[:, :0], y[:0], 1.0), ("no points",)),
        ("accuracy, labels out of range", lambda: M.accuracy(probs, labels + 3), ("labels",)),
        ("accuracy, wrong number of labels", lambda: M.accuracy(probs, labels[:2]), ("labels",)),
        ("accuracy, probabilities that do not sum to 1", lambda: M.accuracy(probs * 2, labels), ("probs",)),
        ("rmse, NaN", lambda: M.rmse(y * float("nan"), y), ("mean",)),
        ("rmse, shapes differ", lambda: M.rmse(y, y[:2]), ("shape",)),
        ("coverage level 1.5", lambda: M.coverage(draws, y, 1.0, levels=(1.5,)), ("levels",)),
        ("gaussian LL, tau 0", lambda: M.gaussian_log_likelihood(draws, y, 0.0), ("tau",)),
        ("gaussian LL, tau NaN", lambda: M.gaussian_log_likelihood(draws, y, float("nan")), ("tau",)),
        ("ECE, n_bins 0", lambda: M.expected_calibration_error(probs, labels, n_bins=0), ("n_bins",)),
        ("mutual information, one draw", lambda: M.mutual_information(probs[:1]), ("draws",)),
    ]
    return [Probe("metrics", what, call, names, finite) for what, call, names in cases]
