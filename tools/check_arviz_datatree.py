"""Check the arviz >= 1 (DataTree) path of the ArviZ export, without torch.

arviz 1.x needs Python >= 3.12, so CI (Python 3.11, arviz 0.23) cannot run it:

    python3.12 -m venv /tmp/venv312 && /tmp/venv312/bin/pip install "arviz>=1" numpy
    /tmp/venv312/bin/python tools/check_arviz_datatree.py

It builds the groups that ``pyro_dropout.to_arviz`` writes, with the same builder, and runs
az.summary, az.loo, az.compare and az.plot_ppc_dist on them; any failure raises.
"""

from __future__ import annotations

import importlib.util
import math
import warnings
from pathlib import Path

import numpy as np

COMPAT = Path(__file__).resolve().parents[1] / "pyro_dropout" / "export" / "_arviz_compat.py"


def load_builder():
    spec = importlib.util.spec_from_file_location("arviz_compat", COMPAT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def groups(rng: np.random.Generator, y: np.ndarray, noise: float, draws: int = 400) -> dict:
    mu = rng.normal(scale=0.3, size=(1, draws, y.size)) + y
    log_lik = -0.5 * ((y - mu) / noise) ** 2 - np.log(noise) - 0.5 * np.log(2 * np.pi)
    return {
        "posterior": {"output.bias": rng.normal(size=(1, draws, 1))},
        "posterior_predictive": {"obs": mu + noise * rng.normal(size=mu.shape)},
        "log_likelihood": {"obs": log_lik},
        "observed_data": {"obs": y},
    }


def main() -> None:
    import arviz as az

    warnings.filterwarnings("ignore")
    compat = load_builder()
    rng = np.random.default_rng(0)
    y = rng.normal(size=30)
    good, worse = compat.build(groups(rng, y, 0.5)), compat.build(groups(rng, y, 1.0))
    print(f"arviz {az.__version__}: {type(good).__name__}")
    if compat.arviz_major() >= 1:
        assert type(good).__name__ == "DataTree"
        assert set(good.children) == {"posterior", "posterior_predictive", "log_likelihood", "observed_data"}
    assert "output.bias[0]" in az.summary(good).index
    loo = az.loo(good)
    assert math.isfinite(float(getattr(loo, "elpd_loo", None) or loo.elpd))  # 0.x name, 1.x name
    table = az.compare({"mc_dropout": good, "hmc": worse})
    assert list(table.index) == ["mc_dropout", "hmc"]  # the better-calibrated one ranks first
    if compat.arviz_major() >= 1:
        az.plot_ppc_dist(good)
    print("summary, loo, compare and the predictive plot work")


if __name__ == "__main__":
    main()
