"""Two guides with the same parameter names in Pyro's global store: the older one, run again,
would silently take the newer one's values (before: it did, and reported them as its own)."""

import pyro
import pytest
import torch

from pyro_dropout import DropoutELBO, DropoutGuide, evaluate
from pyro_dropout.nn import MLP

X, Y = torch.randn(20, 2, generator=torch.Generator().manual_seed(0)), torch.randn(20)


def _fit(seed):
    pyro.set_rng_seed(seed)
    model = MLP(2, hidden=(5,))
    guide = DropoutGuide(model)
    svi = pyro.infer.SVI(model, guide, pyro.optim.Adam({"lr": 0.1}), DropoutELBO())
    for _ in range(5):
        svi.step(X, Y)
    return model, guide


def test_an_older_guide_on_a_newer_ones_parameters_is_refused():
    pyro.clear_param_store()
    old = _fit(0)
    pyro.clear_param_store()
    new = _fit(1)
    evaluate(*new, X, Y, num_samples=3)
    with pytest.raises(RuntimeError, match=r"another guide, set up after this one.*module_local_params=True"):
        evaluate(*old, X, Y, num_samples=3)
    del new  # its values stay in the store: still refused
    with pytest.raises(RuntimeError, match="another guide"):
        evaluate(*old, X, Y, num_samples=3)


def test_after_clearing_the_store_the_older_guide_runs_on_its_own_values():
    pyro.clear_param_store()
    old = _fit(0)
    before = old[1].median()
    pyro.clear_param_store()
    _fit(1)
    pyro.clear_param_store()
    evaluate(*old, X, Y, num_samples=3)
    assert all(torch.equal(before[k], v) for k, v in old[1].median().items())


def test_a_saved_store_loaded_back_is_taken(tmp_path):
    pyro.clear_param_store()
    model, guide = _fit(0)
    pyro.get_param_store().save(tmp_path / "params.pt")
    saved = guide.median()
    _fit_more = pyro.infer.SVI(model, guide, pyro.optim.Adam({"lr": 0.1}), DropoutELBO())
    for _ in range(3):
        _fit_more.step(X, Y)
    pyro.get_param_store().load(tmp_path / "params.pt")
    evaluate(model, guide, X, Y, num_samples=3)
    assert all(torch.equal(saved[k], v) for k, v in guide.median().items())


@pyro.settings.context(module_local_params=True)
def test_module_local_params_need_no_check():
    old, new = _fit(0), _fit(1)
    evaluate(*old, X, Y, num_samples=3)
    evaluate(*new, X, Y, num_samples=3)


def test_a_new_guide_starts_from_its_own_values_and_a_stale_store_of_other_shapes_is_named():
    """Before, a second model's guide took whatever the store held under its names: another
    model's weights, even of another shape (a 3-class network became a 1-output one)."""
    import pyro

    from pyro_dropout.nn import MLP

    x, y, labels = torch.randn(20, 2), torch.randn(20), torch.randint(0, 3, (20,))
    first = DropoutGuide(MLP(2, hidden=(8,), tau=4.0), dropout=0.2)
    first(x, y)
    second = DropoutGuide(MLP(2, 3, hidden=(8,), likelihood="categorical"), dropout=0.2)
    second(x, labels)  # the first is alive: its names are freed, the second starts from its own
    assert pyro.get_param_store()["DropoutGuide.locs.output.weight"].shape == (3, 8)
    del first, second
    with pytest.raises(
        ValueError, match=r"holds 'DropoutGuide.locs.output.weight' with shape \(3, 8\).*needs \(1, 8\)"
    ):
        DropoutGuide(MLP(2, hidden=(8,), tau=4.0), dropout=0.2)(x, y)
