"""The in-between diagnostic: sd in the gaps between clusters of inputs against on them."""

import pytest
import torch

from pyro_dropout.metrics import gap_points, in_between


def _two_intervals(n=200, seed=0):
    g = torch.Generator().manual_seed(seed)
    side = torch.randint(0, 2, (n,), generator=g) * 2 - 1
    return (side * (1 + 3 * torch.rand(n, generator=g))).unsqueeze(-1)  # [-4, -1] and [1, 4]


def test_an_sd_that_grows_with_the_distance_to_the_data_is_wider_in_the_gap_and_a_flat_one_is_not():
    x = _two_intervals()
    grid = torch.linspace(-7, 7, 400).unsqueeze(-1)
    distance = torch.cdist(grid, x).min(1).values
    widens = in_between(x, grid, 0.1 + distance)
    assert widens.ratio > 5 and widens.on_data > 100 and widens.in_gaps > 10
    flat = in_between(x, grid, torch.full((400,), 0.3))
    assert flat.ratio == pytest.approx(1.0) and flat.sd_in_gaps == pytest.approx(0.3)
    # the gap queries lie in (-1, 1), well away from both intervals; none beyond the data (|x| > 4)
    assert flat.gap > flat.near


def test_a_gp_on_two_intervals_widens_in_the_gap():
    from pyro_dropout.baselines import fit_gp

    x = _two_intervals(60)
    y = (x * torch.sin(x)).squeeze(-1) + 0.3 * torch.randn(60, generator=torch.Generator().manual_seed(1))
    mean, std = x.mean(), x.std()
    model = fit_gp((x - mean) / std, (y - y.mean()) / y.std(), steps=300)
    grid = torch.linspace(-4, 4, 200).unsqueeze(-1)
    with torch.no_grad():  # the latent f's variance: the epistemic part
        _, var = model(((grid - mean) / std).double(), full_cov=False, noiseless=True)
    result = in_between(x, grid, var.sqrt())
    assert result.ratio > 1.5  # a stationary kernel's sd grows away from the data, between them too


def test_gap_points_in_two_dimensions_lie_between_clusters_and_far_from_them():
    g = torch.Generator().manual_seed(0)
    centres = torch.tensor([[-3.0, 0.0], [3.0, 0.0], [0.0, 4.0]])
    x = centres[torch.arange(300) % 3] + 0.3 * torch.randn(300, 2, generator=g)
    queries = gap_points(x, 200)
    assert 0 < len(queries) <= 200
    assert float(torch.cdist(queries, x).min()) > 0.5  # far from every training input
    assert bool((queries[:, 0].abs() < 3).all())  # between the clusters, not beyond them
    sd = torch.cdist(queries, x).min(1).values
    assert in_between(x, torch.cat([x[:50], queries]), torch.cat([torch.full((50,), 0.1), sd])).ratio > 5


def test_bad_inputs_are_named():
    x = _two_intervals()
    grid = torch.linspace(-7, 7, 40).unsqueeze(-1)
    with pytest.raises(ValueError, match="sd has 39 values for 40 query points"):
        in_between(x, grid, torch.ones(39))
    with pytest.raises(ValueError, match="sd holds negative values"):
        in_between(x, grid, -torch.ones(40))
    with pytest.raises(ValueError, match="sd contains NaN"):
        in_between(x, grid, torch.full((40,), float("nan")))
    with pytest.raises(ValueError, match="no query point lies in a gap"):
        in_between(x, x, torch.ones(200))
    with pytest.raises(ValueError, match=r"gap .* must be at least near"):
        in_between(x, grid, torch.ones(40), near=1.0, gap=0.5)
    with pytest.raises(ValueError, match="x_train needs at least 2 inputs"):
        in_between(x[:1], grid, torch.ones(40))
    with pytest.raises(ValueError, match=r"num must be an int in \[1, 1,000,000\]"):
        gap_points(x, 0)
