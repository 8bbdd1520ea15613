"""The benchmark of record for training speed: one SVI step of each library path, and of Pyro's
AutoNormal, against a raw PyTorch training step doing the same computation, in one process.

Run: python benchmarks/svi_step.py --threads 1 [--device auto|cpu|cuda] [--quick] [--no-compile] [--out NAME]

Networks: the UCI net (13-50-1, Gaussian likelihood, batch 32 and 128) and a wide net
(784-1024-1024-10, categorical likelihood, batch 128). Losses: DropoutELBO with one
particle, and BBAlpha(0.5) with K = 10 particles. Timings:

* ``svi``: ``pyro.infer.SVI`` with ``DropoutGuide`` and the loss at its defaults (what the
  README's quick start runs: eager for each input shape's first steps, then its recorded graph);
  those first steps are run and timed apart (``svi_warm_s``);
* ``svi_fused``: the same with ``pyro.optim.Adam({"lr": ..., "fused": True})``: each of Pyro's
  per-parameter optimizers PyTorch's fused Adam instead of its for-loop form (the CPU's default);
* ``svi_eager``: the same with ``graph="eager"``, the loss run eagerly at every step;
* ``svi_record``: ``pyro.infer.SVI`` with the loss's recorded graph from the second step
  (``graph="record"``);
* ``svi_compile``: ``pyro.infer.SVI`` with the loss compiled by ``torch.compile``
  (``graph="compile"``); its first two steps, which compile, are timed apart (``*_compile_s``:
  with Inductor's on-disk cache cold, the first case also pays for starting the compiler);
* ``svi_joint``: the same with ``pyro_dropout.infer.JointOptim(torch.optim.Adam, ...)`` (one
  PyTorch optimizer for all parameters) instead of ``pyro.optim.Adam`` (one per parameter);
* ``compiled``: ``pyro_dropout.infer.CompiledSVI`` at its defaults (the loss and its gradient
  compiled, ``graph="compile"``), its first two steps timed apart;
* ``compiled_record``: ``CompiledSVI(..., graph="record")``, the recorded graph not compiled;
* ``autonormal`` (ELBO only): Pyro's ``AutoNormal`` guide and ``Trace_ELBO`` on the same MLP
  under N(0, 1) priors, the mean-field peer inside Pyro;
* ``raw``, the baseline: a hand-written PyTorch step with the same network, loss (likelihood
  scaled by N/B plus the KL's weight terms) and Adam. With one particle it is ``F.dropout``
  before each ``F.linear``, as ``nn.Dropout`` and ``nn.Linear`` run; with K particles, one mask
  per input unit and particle shared by the minibatch and batched products. Its Adam is the
  fastest of the for-loop, foreach and fused implementations in that case (``raw_adam``).

Each path runs in a group interleaved with ``raw`` (``blocks`` rounds), and its ratio is its
median over raw's median in the same blocks (``*_vs_raw``; the ratio of the minimums too,
``*_vs_raw_min``), so that a slow spell of the machine during one group does not skew its
ratio. The benchmark also checks its result: with the same seed the recorded loss (``GraphLoss``,
whose recording ``CompiledSVI`` shares) equals the eager loss.
"""

from __future__ import annotations

import argparse
import itertools
import math
import statistics
import sys
import time
from datetime import date
from pathlib import Path

import pyro
import torch
import torch.nn.functional as F
from pyro.infer import SVI, Trace_ELBO
from pyro.infer.autoguide import AutoNormal

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import interleaved_times, machine, pick_device, write

from pyro_dropout import BBAlpha, DropoutELBO, DropoutGuide
from pyro_dropout.infer import CompiledSVI, GraphLoss, JointOptim
from pyro_dropout.infer.recorded.graph import RECORD_AT
from pyro_dropout.nn import MLP

P, TAU, N_DATA, LR = 0.05, 1.0, 10_000, 1e-3


class RawStep:
    """A hand-written dropout training step: masks on layer inputs, Gaussian or softmax loss."""

    def __init__(
        self,
        sizes: list[int],
        classes: bool,
        particles: int,
        alpha: float | None,
        device: torch.device,
        adam: dict[str, bool],
        per_example: bool = False,
    ):
        g = torch.Generator().manual_seed(0)
        self.weights = [
            (torch.rand(b, a, generator=g) * 2 - 1).div(math.sqrt(a)).to(device).requires_grad_()
            for a, b in itertools.pairwise(sizes)
        ]
        self.biases = [torch.zeros(b, device=device, requires_grad=True) for b in sizes[1:]]
        self.classes, self.k, self.alpha, self.device = classes, particles, alpha, device
        self.per_example = per_example  # K particles: one mask per particle and example
        self.opt = torch.optim.Adam([*self.weights, *self.biases], lr=LR, **adam)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """One particle as ``nn.Dropout`` before each ``nn.Linear`` runs it; ``[1, B, out]``."""
        h = x
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            h = F.linear(F.dropout(h, P), w, b)
            if i < len(self.weights) - 1:
                h = torch.relu(h)
        return h.unsqueeze(0)

    def particles(self, x: torch.Tensor) -> torch.Tensor:
        """K particles, each one mask per input unit shared by the minibatch (or, ``per_example``,
        one per example); ``[K, B, out]``."""
        h = x.expand(self.k, *x.shape)
        rows = x.shape[0] if self.per_example else 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            keep = (torch.rand(self.k, rows, w.shape[1], device=self.device) > P).to(x.dtype) / (1 - P)
            h = torch.baddbmm(b, h * keep, w.T.expand(self.k, *w.T.shape))
            if i < len(self.weights) - 1:
                h = torch.relu(h)
        return h

    def loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        h = self.forward(x) if self.k == 1 else self.particles(x)
        if self.classes:
            log_lik = -F.cross_entropy(h.reshape(-1, h.shape[-1]), y.repeat(self.k), reduction="none").view(
                self.k, -1
            )
        else:
            log_lik = -0.5 * TAU * (y - h.squeeze(-1)).pow(2)
        scale = N_DATA / x.shape[0]
        if self.alpha is None:
            fit = scale * log_lik.sum() / self.k
        else:
            fit = scale * (torch.logsumexp(self.alpha * log_lik, 0) - math.log(self.k)).sum() / self.alpha
        kl = (
            sum(w.pow(2).sum() for w in self.weights) / (2 * (1 - P))
            + sum(b.pow(2).sum() for b in self.biases) / 2
        )
        return kl - fit

    def step(self, x: torch.Tensor, y: torch.Tensor) -> float:
        loss = self.loss(x, y)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        return float(loss.detach())


def library(kind: str, sizes: list[int], classes: bool, loss, device: torch.device):
    pyro.clear_param_store()
    model = MLP(
        sizes[0],
        sizes[-1],
        hidden=tuple(sizes[1:-1]),
        likelihood="categorical" if classes else "normal",
        tau=TAU,
        **({"prior": "normal"} if kind == "autonormal" else {}),
    ).to(device)
    guide = AutoNormal(model) if kind == "autonormal" else DropoutGuide(model, dropout=P)
    fused = {"fused": True} if kind == "svi_fused" else {}
    optim = (
        JointOptim(torch.optim.Adam, {"lr": LR})
        if kind == "svi_joint"
        else pyro.optim.Adam({"lr": LR, **fused})
    )
    if kind.startswith("compiled"):
        graph = "record" if kind == "compiled_record" else "compile"
        return CompiledSVI(model, guide, optim, loss, graph=graph), model, guide
    return SVI(model, guide, optim, loss), model, guide


def check_compiled_matches_eager(sizes, classes, make_loss, device, x, y) -> float:
    """Same seed, same masks: the recorded loss equals the eager loss."""
    _, model, guide = library("svi", sizes, classes, make_loss(), device)
    recorded = GraphLoss(make_loss(), model, guide, "record")
    for _ in range(RECORD_AT + 1):  # eager: creates the parameters, learns their names; then recorded
        recorded((x, y), {"num_data": N_DATA})
    eager_loss = make_loss()
    eager_loss.differentiable_loss(
        model, guide, x, y, num_data=N_DATA
    )  # first call guesses the plate nesting
    pyro.set_rng_seed(123)
    compiled = recorded((x, y), {"num_data": N_DATA}).item()
    pyro.set_rng_seed(123)
    eager = eager_loss.differentiable_loss(model, guide, x, y, num_data=N_DATA).item()
    assert math.isclose(compiled, eager, rel_tol=1e-4), (compiled, eager)
    return abs(compiled - eager) / abs(eager)


# raw PyTorch's Adam settings; the fastest for each case is the baseline (the honest raw)
RAW_ADAMS = {"for-loop": {"foreach": False}, "foreach": {"foreach": True}, "fused": {"fused": True}}
# the library's paths and Pyro's AutoNormal, timed in groups, each interleaved with the raw step;
# one path per group: each group sets up its own guide (two live guides of one model's names
# share Pyro's param store, and the guides refuse that)
GROUPS = (("compiled",), ("svi",), ("svi_fused",), ("svi_eager",), ("svi_record",), ("svi_compile",))
GROUPS += (("svi_joint",), ("compiled_record",))
MODES = {"svi_eager": "eager", "svi_record": "record", "svi_compile": "compile", "svi_joint": "compile"}
COMPILING = ("svi_compile", "svi_joint", "compiled")  # compiled at RECORD_AT: seconds
# the recorded paths run each call signature eagerly until its RECORD_AT-th call and record it
# there: those first steps are timed apart, and the timed steps are the long run's
WARM = {k: RECORD_AT + 2 for k in ("svi", "svi_fused", "svi_record", "svi_compile", "svi_joint")}
WARM |= {k: RECORD_AT + 2 for k in ("compiled", "compiled_record")}


def case(name, sizes, classes, batch, loss_name, device, steps, blocks, compile_paths=True) -> dict:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(batch, sizes[0], generator=g).to(device)
    y = (
        torch.randint(0, sizes[-1], (batch,), generator=g) if classes else torch.randn(batch, generator=g)
    ).to(device)
    k, alpha = (1, None) if loss_name == "elbo" else (10, 0.5)

    def make_loss(graph: str | None = None):  # None: the loss's default
        kw = {} if graph is None else {"graph": graph}
        return DropoutELBO(**kw) if alpha is None else BBAlpha(alpha, num_particles=k, **kw)

    row: dict = {"case": name, "batch": batch, "loss": loss_name, "particles": k}
    raws = {a: RawStep(sizes, classes, k, alpha, device, kw) for a, kw in RAW_ADAMS.items()}
    times = interleaved_times(
        {a: lambda r=r: r.step(x, y) for a, r in raws.items()}, device, steps, blocks, warmup=2
    )
    row["raw_adam"] = min(times, key=lambda a: statistics.median(times[a]))
    row["raw_adam_ms"] = {a: 1e3 * statistics.median(t) for a, t in times.items()}
    raw = raws[row["raw_adam"]]
    groups = GROUPS + ((("autonormal",),) if alpha is None else ())
    groups = tuple(g for g in groups if compile_paths or g[0] not in COMPILING)
    for kinds in groups:
        runners = {"raw": lambda: raw.step(x, y)}
        for kind in kinds:
            loss = Trace_ELBO() if kind == "autonormal" else make_loss(MODES.get(kind))
            svi, _, _ = library(kind, sizes, classes, loss, device)
            runners[kind] = lambda svi=svi: svi.step(x, y, num_data=N_DATA)
            if kind in WARM:  # the first steps: eager until recorded (and compiled) at RECORD_AT
                start = time.perf_counter()
                for _ in range(WARM[kind]):
                    runners[kind]()
                row[f"{kind}_warm_s"] = time.perf_counter() - start
        times = interleaved_times(runners, device, steps, blocks, warmup=2)
        base = statistics.median(times["raw"])
        for kind in kinds:  # each against the raw step timed in the same blocks
            row[f"{kind}_ms"] = 1e3 * statistics.median(times[kind])
            row[f"{kind}_min_ms"] = 1e3 * min(times[kind])
            row[f"{kind}_vs_raw"] = statistics.median(times[kind]) / base
            row[f"{kind}_vs_raw_min"] = min(times[kind]) / min(times["raw"])
        row["raw_ms"] = min(row.get("raw_ms", math.inf), 1e3 * base)
    row["check_rel_error"] = check_compiled_matches_eager(sizes, classes, make_loss, device, x, y)
    print(f"  {name} batch {batch} {loss_name}: raw {row['raw_ms']:.3f} ms (Adam {row['raw_adam']})")
    for kind in (k for group in groups for k in group):
        compiled = f", first {WARM[kind]} steps {row[f'{kind}_warm_s']:.1f} s" if kind in COMPILING else ""
        print(
            f"    {LABELS[kind]:42s} {row[f'{kind}_ms']:8.3f} ms  {row[f'{kind}_vs_raw']:5.2f}x raw "
            f"(median; best {row[f'{kind}_vs_raw_min']:.2f}x){compiled}"
        )
    return row


LABELS = {
    "svi": "SVI, DropoutELBO() / BBAlpha(0.5)",
    "svi_fused": "SVI, the default loss, Adam fused=True",
    "svi_eager": 'SVI, graph="eager"',
    "svi_record": 'SVI, graph="record"',
    "svi_compile": 'SVI, graph="compile"',
    "svi_joint": 'SVI, graph="compile", JointOptim',
    "compiled": "CompiledSVI (compiles)",
    "compiled_record": 'CompiledSVI(graph="record")',
    "autonormal": "SVI, Pyro AutoNormal + Trace_ELBO",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile paths")
    parser.add_argument("--threads", type=int, help="PyTorch's CPU threads (the record: 1)")
    parser.add_argument("--out", help="the JSON file's name under benchmarks/results (default by device)")
    args = parser.parse_args()
    device = pick_device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    uci, wide = [13, 50, 1], [784, 1024, 1024, 10]
    (steps_small, steps_wide), blocks = ((20, 3), 3) if args.quick else ((300, 15), 7)
    print(f"svi_step benchmark on {device} ({torch.get_num_threads()} threads, {blocks} interleaved blocks)")
    rows = []
    for loss_name in ("elbo", "bbalpha"):
        for batch in (32, 128):
            rows.append(
                case("uci", uci, False, batch, loss_name, device, steps_small, blocks, not args.no_compile)
            )
        rows.append(case("wide", wide, True, 128, loss_name, device, steps_wide, blocks, not args.no_compile))
    write(
        args.out or f"svi_step_{device.type}" + ("_quick" if args.quick else ""),
        {"machine": machine(device), "date": date.today().isoformat(), "blocks": blocks, "rows": rows},
    )


if __name__ == "__main__":
    main()
