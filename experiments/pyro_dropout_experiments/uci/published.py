"""The published UCI figures the tables and plots compare with (two decimals, as printed)."""

from __future__ import annotations

__all__ = ["PUBLISHED", "PUBLISHED_DECIMALS", "PUBLISHED_TWO_LAYERS", "REFERENCE", "SOURCES"]

# (RMSE, its standard error, test log-likelihood, its standard error)
PUBLISHED: dict[str, dict[str, tuple[float, float, float, float]]] = {
    "pub. MC dropout 2016": {
        "bostonHousing": (2.97, 0.85, -2.46, 0.25),
        "concrete": (5.23, 0.53, -3.04, 0.09),
        "kin8nm": (0.10, 0.00, 0.95, 0.03),
        "naval-propulsion-plant": (0.01, 0.00, 3.80, 0.05),
        "power-plant": (4.02, 0.18, -2.80, 0.05),
        "protein-tertiary-structure": (4.36, 0.04, -2.89, 0.01),
        "wine-quality-red": (0.62, 0.04, -0.93, 0.06),
    },
    "pub. VI 2016": {
        "bostonHousing": (4.32, 0.29, -2.90, 0.07),
        "concrete": (7.19, 0.12, -3.39, 0.02),
        "kin8nm": (0.10, 0.00, 0.90, 0.01),
        "naval-propulsion-plant": (0.01, 0.00, 3.73, 0.12),
        "power-plant": (4.33, 0.04, -2.89, 0.01),
        "protein-tertiary-structure": (4.84, 0.03, -2.99, 0.01),
        "wine-quality-red": (0.65, 0.01, -0.98, 0.01),
    },
    "pub. Concrete 2017": {
        "bostonHousing": (2.65, 0.17, -2.35, 0.05),
        "concrete": (4.46, 0.16, -3.12, 0.07),
        "kin8nm": (0.07, 0.00, 1.24, 0.00),
        "naval-propulsion-plant": (0.00, 0.00, 5.89, 0.05),
        "power-plant": (3.70, 0.04, -2.75, 0.01),
        "protein-tertiary-structure": (3.85, 0.02, -2.81, 0.00),
        "wine-quality-red": (0.62, 0.00, -0.94, 0.02),
    },
    "pub. MC dropout 2018": {
        "bostonHousing": (2.90, 0.18, -2.40, 0.04),
        "concrete": (4.82, 0.16, -2.93, 0.02),
        "kin8nm": (0.08, 0.00, 1.14, 0.01),
        "naval-propulsion-plant": (0.00, 0.00, 4.45, 0.00),
        "power-plant": (4.01, 0.04, -2.80, 0.01),
        "protein-tertiary-structure": (4.27, 0.02, -2.87, 0.00),
        "wine-quality-red": (0.62, 0.01, -0.93, 0.01),
    },
}
# paper 001's own MC-dropout baseline, on its two-hidden-layer network (Tables 3-4, "Dropout")
PUBLISHED_TWO_LAYERS: dict[str, tuple[float, float, float, float]] = {
    "bostonHousing": (2.80, 0.13, -2.34, 0.03),
    "concrete": (4.50, 0.18, -2.82, 0.02),
    "kin8nm": (0.08, 0.00, 1.10, 0.00),
    "naval-propulsion-plant": (0.00, 0.00, 4.32, 0.00),
    "power-plant": (3.63, 0.04, -2.67, 0.01),
    "protein-tertiary-structure": (3.62, 0.01, -2.70, 0.00),
    "wine-quality-red": (0.60, 0.01, -0.90, 0.01),
}
SOURCES = {
    "pub. MC dropout 2016": "MC dropout, Gal & Ghahramani 2016, Table 1",
    "pub. VI 2016": "mean-field VI (Graves 2011) as reported in Gal & Ghahramani 2016, Table 1",
    "pub. Concrete 2017": "Concrete dropout after the final M-step (CDropoutM), Gal, Hron & Kendall 2017, "
    "Tables 3-4 (two hidden layers of 50 units, §4.2; their own length-scales)",
    "pub. MC dropout 2018": "MC dropout, 2018 grid-search re-run with 10x epochs (the protocol run here)",
}
REFERENCE = "pub. MC dropout 2018"
PUBLISHED_DECIMALS = 2  # every published figure above is rounded to two decimals
