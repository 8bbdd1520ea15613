"""docs/img/performance.png, the figure docs/performance.md opens with, from the stored runs.

Left: each training path's step time over the raw PyTorch step of the same computation (the
benchmark of record, ``benchmarks/svi_step.py --threads 1``, its runs in
``docs/results/benchmarks/svi_step_cpu_record*.json``), one marker per run. Right: MC prediction
at T = 1,000 draws on N = 10,000 points of the UCI net (``benchmarks/predictive.py``, its runs in
``docs/results/benchmarks/predictive_cpu_*_run*.json``) as GFLOP/s, beside the machine's square
matrix product, the hardware's rate for this arithmetic.

    python tools/performance_figure.py            # writes docs/img/performance.png
    python tools/performance_figure.py out.png
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "docs" / "results" / "benchmarks"
TRAINING = {
    "svi": "SVI + DropoutELBO()\n(the README's call)",
    "svi_eager": 'SVI, graph="eager"',
    "svi_compile": 'SVI, graph="compile"',
    "compiled": "CompiledSVI",
    "autonormal": "Pyro AutoNormal\n(peer)",
}
CASES = {
    ("uci", 32, "elbo"): "UCI net, B = 32",
    ("uci", 128, "elbo"): "UCI net, B = 128",
    ("wide", 128, "elbo"): "wide net, B = 128",
}
PREDICTION = {
    "predict": "predict",
    "raw_loop": "raw loop\n(one draw a pass)",
    "equal_flop_batched_matmul": "equal-FLOP\nbatched matmul",
}


def speed_record_tool():  # the tool beside this one, loaded by path (tools/ is not a package)
    spec = importlib.util.spec_from_file_location("speed_record", ROOT / "tools" / "speed_record.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _training(ax, runs: list[dict]) -> None:
    tool = speed_record_tool()
    for i, (case, label) in enumerate(CASES.items()):
        for j, kind in enumerate(TRAINING):
            values = tool.ratios(runs, kind, [case])
            y = [j + (i - 1) * 0.22] * len(values)
            ax.scatter(values, y, s=18, color=f"C{i}", label=label if j == 0 else None)
    ax.axvline(1.0, color="0.3", lw=0.8)
    ax.set_yticks(range(len(TRAINING)), list(TRAINING.values()), fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ticks = [1, 1.5, 2, 3, 5, 8]
    ax.set_xticks(ticks, [f"{t:g}×" for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel("step time / raw PyTorch step (1× = raw)")
    ax.set_title("training: one SVI step, one thread", fontsize=10)
    ax.legend(fontsize=7, loc="upper right")


def _prediction(ax, runs: list[dict]) -> None:
    gemm = [r["speed"]["square_gemm_gflop_per_s"] for r in runs]
    for j, key in enumerate(PREDICTION):
        rates = [r["speed"]["rows"][key]["gflop_per_s"] for r in runs if key in r["speed"]["rows"]]
        ax.scatter(rates, [j] * len(rates), s=18, color="C3")
    ax.axvline(min(gemm), color="0.3", lw=0.8, ls="--")
    ax.text(min(gemm), 1, "square GEMM ", fontsize=7, ha="right")
    ax.set_yticks(range(len(PREDICTION)), list(PREDICTION.values()), fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 1.05 * max(gemm))
    ax.set_xlabel("GFLOP/s (higher is faster)")
    ax.set_title("prediction: T = 1,000 on N = 10,000, two threads", fontsize=10)


def main(argv: list[str]) -> Path:
    from pyro_dropout.export import pyplot

    out = Path(argv[0]) if argv else ROOT / "docs" / "img" / "performance.png"
    training = speed_record_tool().load(RECORD)
    prediction = [json.loads(p.read_text()) for p in sorted(RECORD.glob("predictive_cpu_*_run*.json"))]
    if not prediction:
        raise FileNotFoundError(f"no predictive_cpu_*_run*.json in {RECORD}")
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.4), gridspec_kw={"width_ratios": [1.2, 1]})
    _training(left, training)
    _prediction(right, prediction)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


if __name__ == "__main__":
    print(main(sys.argv[1:]))
