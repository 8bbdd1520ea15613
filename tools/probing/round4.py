"""Round 4: the surfaces of active learning, the in-between check, saved states, K-fold after a fit,
the front door's labels and devices, and the fast paths' bad uses (values changed and changed back
under a recorded graph, batch norm's statistics, shapes made from data, a new batch size every
step, a forward that asks its layers' classes). A fast path's probe is handled where every step
equals the eager one."""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyro
import pyro.distributions as dist
import torch
from pyro.infer import SVI
from pyro.nn import PyroModule

from pyro_dropout import DropoutELBO, DropoutGuide, MCDropout, evaluate
from pyro_dropout.active import ActiveLearner, balanced_start, pool_probs
from pyro_dropout.infer import JointOptim, load_param_store
from pyro_dropout.metrics import acquisition_scores, batch_bald, epistemic_variance, gap_points, in_between
from pyro_dropout.nn import Linear

from .base import Probe, finite, fitted, small_data

NOISE = {"value": 0.5}  # a global the fast-path probes change


def _draws(t: int, n: int = 6, c: int = 3) -> torch.Tensor:
    return torch.softmax(torch.randn(t, n, c, generator=torch.Generator().manual_seed(0)), -1)


def acquisition_probes() -> list[Probe]:
    probes = [
        Probe(
            "round 4",
            f"{name} of {t} draws",
            lambda n=name, t=t: acquisition_scores(n, _draws(t)),
            ("draws",),
        )
        for name in ("bald", "variation_ratios", "mean_std", "max_entropy")
        for t in (0, 1)
        if not (name == "max_entropy" and t == 1)
    ]
    one_hot = torch.nn.functional.one_hot(torch.randint(0, 3, (6, 8), generator=torch.Generator()), 3).float()
    return probes + [
        Probe("round 4", "batch_bald piece=-1", lambda: batch_bald(_draws(4), 2, piece=-1), ("piece",)),
        Probe("round 4", "batch_bald piece=0", lambda: batch_bald(_draws(4), 2, piece=0), ("piece",)),
        Probe("round 4", "batch_bald of one draw", lambda: batch_bald(_draws(1), 2), ("draws",)),
        Probe(
            "round 4",
            "batch_bald, float32 one-hot, one configuration",
            lambda: batch_bald(one_hot, 3, num_configurations=1)[1],
            (),
            finite,
        ),
        Probe(
            "round 4",
            "epistemic_variance of no points",
            lambda: epistemic_variance(torch.zeros(5, 0)),
            ("N >= 1",),
        ),
    ]


def _classifier() -> tuple[Any, Any]:
    from pyro_dropout.nn import MLP

    pyro.clear_param_store()
    model = MLP(2, 3, hidden=(8,), likelihood="categorical")
    guide = DropoutGuide(model, dropout=0.3)
    guide(torch.randn(6, 2), torch.randint(0, 3, (6,)))
    return model, guide


def _generator_pool() -> bool:
    model, guide = _classifier()
    pool = torch.randn(30, 2)
    probs = pool_probs(model, guide, ((pool[i : i + 8],) for i in range(0, 30, 8)), num_samples=4)
    return probs.shape == (4, 30, 3)


def active_probes() -> list[Probe]:
    x = torch.randn(30, 2)
    y = torch.arange(30) % 3

    def learner(**settings: Any) -> ActiveLearner:
        return ActiveLearner(lambda xs, ys: _classifier(), x, y, x, y, k=2, num_samples=4, **settings)

    bad = {
        "subset=-5": ({"subset": -5}, ("subset",)),
        "initial=[0.5, 1.7, 2.2]": ({"initial": [0.5, 1.7, 2.2]}, ("integers",)),
        "initial=[0, 0, 1, 2]": ({"initial": [0, 0, 1, 2]}, ("more than once",)),
        "initial=[-1, 0, 1]": ({"initial": [-1, 0, 1]}, ("negative",)),
        "batch_size=0": ({"batch_size": 0}, ("batch_size",)),
        "seed=2**64": ({"seed": 2**64}, ("seed",)),
    }
    probes = [
        Probe("round 4", f"ActiveLearner({k})", lambda s=s: learner(**s), n) for k, (s, n) in bad.items()
    ]
    return probes + [
        Probe("round 4", "ActiveLearner.run(-1)", lambda: learner().run(-1), ("rounds",)),
        Probe("round 4", "balanced_start(per_class=0)", lambda: balanced_start(y, 0), ("per_class",)),
        Probe("round 4", "balanced_start(per_class=-1)", lambda: balanced_start(y, -1), ("per_class",)),
        Probe(
            "round 4",
            "balanced_start of one-hot labels",
            lambda: balanced_start(torch.eye(3)[y], 2),
            ("one-hot",),
        ),
        Probe("round 4", "pool_probs of a generator of batches", _generator_pool, (), bool),
        Probe(
            "round 4",
            "pool_probs of an empty pool",
            lambda: pool_probs(*_classifier(), torch.zeros(0, 2)),
            ("no rows",),
        ),
    ]


def in_between_probes() -> list[Probe]:
    x = torch.cat([torch.linspace(-2, -1, 20), torch.linspace(1, 2, 20)]).unsqueeze(-1)
    q = torch.linspace(-2, 2, 81).unsqueeze(-1)
    return [
        Probe(
            "round 4", "in_between with a zero sd", lambda: in_between(x, q, torch.zeros(81)), ("sd is 0",)
        ),
        Probe(
            "round 4",
            "in_between, 2-column queries",
            lambda: in_between(x, torch.zeros(81, 2), torch.ones(81)),
            ("columns",),
        ),
        Probe(
            "round 4",
            "in_between, repeated training rows",
            lambda: in_between(x.repeat(3, 1), q, torch.ones(81)),
            ("near=",),
        ),
        Probe("round 4", "gap_points(num=10**9)", lambda: gap_points(x, num=10**9), ("num",)),
    ]


def _saved(tmp: Path, name: str, data: Any) -> Path:
    path = tmp / name
    path.write_bytes(data) if isinstance(data, bytes) else torch.save(data, path)
    return path


def saved_state_probes(tmp: Path) -> list[Probe]:
    pyro.clear_param_store()
    pyro.param("a", torch.ones(3))
    good = tmp / "good.pt"
    pyro.get_param_store().save(good)
    raw, state = good.read_bytes(), pyro.get_param_store().get_state()
    files = {
        "truncated": raw[: len(raw) // 2],
        "empty": b"",
        "a list of params": {"params": [1, 2], "constraints": {}},
        "a parameter without its constraint": {"params": state["params"], "constraints": {}},
    }
    paths = {k: _saved(tmp, f"s{i}.pt", v) for i, (k, v) in enumerate(files.items())}
    probes = [
        Probe("round 4", f"load_param_store: {k}", lambda p=p: load_param_store(p), (str(tmp),))
        for k, p in paths.items()
    ]
    garbage = _saved(tmp, "opt.pt", {"w": "garbage"})
    return probes + [
        Probe(
            "round 4",
            "JointOptim.load: garbage",
            lambda: JointOptim(torch.optim.Adam, {"lr": 0.1}).load(str(garbage)),
            ("opt.pt",),
        )
    ]


def _kfold_keeps_the_fit() -> bool:
    from pyro_dropout.export import kfold
    from pyro_dropout.nn import MLP

    with pyro.settings.context(module_local_params=False):
        model, guide = fitted()
        x, y = small_data(12)
        pyro.set_rng_seed(5)
        before = evaluate(model, guide, x, y, num_samples=20)
        kfold(lambda: MLP(3, hidden=(4,)), x, y, k=2, steps=3, num_samples=3)
        pyro.set_rng_seed(5)
        after = evaluate(model, guide, x, y, num_samples=20)
    return after.rmse == before.rmse


def front_probes() -> list[Probe]:
    net = torch.nn.Sequential(
        torch.nn.Linear(3, 8), torch.nn.ReLU(), torch.nn.Dropout(0.2), torch.nn.Linear(8, 2)
    )
    x = torch.randn(10, 3)
    return [
        Probe("round 4", "fit, kfold, then evaluate the fitted guide", _kfold_keeps_the_fit, (), bool),
        Probe(
            "round 4",
            "MCDropout regression without tau: predict",
            lambda: MCDropout(torch.nn.Sequential(torch.nn.Linear(3, 1)), "regression").predict(x),
            ("tau=", "calibrate"),
        ),
        Probe(
            "round 4",
            "MCDropout.fit on fractional labels",
            lambda: MCDropout(net, "classification").fit([(x, torch.full((10,), 0.5))]),
            ("whole numbers",),
        ),
        Probe(
            "round 4",
            "MCDropout.predict on the meta device",
            lambda: MCDropout(net, "classification").predict(x.to("meta")),
            ("meta device",),
        ),
    ]


class _Reads(PyroModule):
    """A 2-8-1 regression reading ``NOISE`` (``how="global"``), a dict attribute, its mode, batch
    norm, or a shape from the data."""

    def __init__(self, how: str) -> None:
        super().__init__()
        self.fc1, self.fc2, self.how, self.cfg = Linear(2, 8), Linear(8, 1), how, {"noise": 0.5}
        self.norm = torch.nn.BatchNorm1d(8)

    def forward(self, x: torch.Tensor, y: torch.Tensor | None = None) -> torch.Tensor:
        h = torch.relu(self.fc1(x))
        h = self.norm(h) if self.how == "batch norm" else h
        h = torch.nn.functional.dropout(h, 0.3, self.training) if self.how == "mode" else h
        noise = NOISE["value"] if self.how == "global" else self.cfg["noise"]
        mu = self.fc2(h).squeeze(-1)
        keep = x[:, 0] > 0 if self.how == "shape" else torch.ones(len(x), dtype=torch.bool)
        with pyro.plate("data", int(keep.shape[0]) if self.how != "shape" else mu[keep].shape[0]):
            return pyro.sample("obs", dist.Normal(mu[keep], noise), obs=None if y is None else y[keep])


def _every_step_eager(how: str, change: Callable[[int, Any], None], sizes: bool = False) -> bool:
    """60 steps with the default loss against the eager loss, the same seeds: equal at every step."""
    runs = []
    with pyro.settings.context(module_local_params=False):
        for graph in ("eager", "record"):
            pyro.clear_param_store()
            pyro.set_rng_seed(0)
            model = _Reads(how)
            svi = SVI(
                model,
                DropoutGuide(model, dropout=0.1),
                pyro.optim.Adam({"lr": 1e-2}),
                DropoutELBO(graph=graph),
            )
            losses = []
            for t in range(60):
                change(t, model)
                g = torch.Generator().manual_seed(t)
                n = 5 + t if sizes else 16
                losses.append(svi.step(torch.randn(n, 2, generator=g), torch.randn(n, generator=g)))
            runs.append(losses + [float(b.sum()) for b in model.buffers()])
    NOISE["value"] = 0.5
    return all(abs(a - b) <= 1e-5 * max(1.0, abs(a)) for a, b in zip(*runs, strict=True))


def _back_and_forth(t: int) -> float:
    return 0.3 if t in (10, 11, 23, 24, 41) else 0.5


def fast_path_probes() -> list[Probe]:
    changes: dict[str, tuple[str, Callable[[int, Any], None], bool]] = {
        "a global changed and changed back": (
            "global",
            lambda t, m: NOISE.update(value=_back_and_forth(t)),
            False,
        ),
        "a dict attribute changed and back": (
            "dict",
            lambda t, m: m.cfg.update(noise=_back_and_forth(t)),
            False,
        ),
        "eval and train between steps": ("mode", lambda t, m: m.train(t not in (10, 11, 23)), False),
        "batch norm in training mode": ("batch norm", lambda t, m: None, False),
        "a shape made from the data": ("shape", lambda t, m: None, False),
        "a new batch size every step": ("dict", lambda t, m: None, True),
    }
    return [
        Probe("fast paths", what, lambda h=h, c=c, s=s: _every_step_eager(h, c, s), (), bool)
        for what, (h, c, s) in changes.items()
    ] + [
        Probe(
            "fast paths",
            "a loop asking type(layer) != nn.Linear",
            _looped_sd_ratio,
            (),
            lambda r: abs(r - 1) < 0.05,
        )
    ]


def _looped_sd_ratio() -> float:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.nn.conformance import looped_sd_ratio

    return looped_sd_ratio(2000)


def round4_probes() -> list[Probe]:
    tmp = Path(tempfile.mkdtemp(prefix="probe-round4-"))
    return (
        acquisition_probes()
        + active_probes()
        + in_between_probes()
        + saved_state_probes(tmp)
        + front_probes()
        + fast_path_probes()
    )
