"""Two guides with the same parameter names in Pyro's global store: the older one, run again,
would silently take the newer one's values (before: it did, and reported them as its own)."""

import gc

import pyro
import pytest
import torch

from pyro_dropout import DropoutELBO, DropoutGuide, evaluate
from pyro_dropout.guides import GuideConflictError
from pyro_dropout.infer.batched_errors import BatchedDrawError
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


def test_a_step_of_the_older_guide_names_the_conflict_not_the_model():
    """A training step runs the model on batched draws; the conflict is the set-up's, and the
    error says so instead of blaming the model's layers (before: a BatchedDrawError)."""
    pyro.clear_param_store()
    old = _fit(0)
    pyro.clear_param_store()
    _fit(1)
    svi = pyro.infer.SVI(*old, pyro.optim.Adam({"lr": 0.1}), DropoutELBO())
    with pytest.raises(GuideConflictError, match=r"another guide.*name=\.\.\.") as caught:
        svi.step(X, Y)
    assert not isinstance(caught.value, BatchedDrawError)
    assert "batched" not in str(caught.value)


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


def test_a_new_guide_starts_from_its_own_values_and_a_loaded_store_of_other_shapes_is_named(tmp_path):
    """Before, a second model's guide took whatever the store held under its names: another
    model's weights, even of another shape (a 3-class network became a 1-output one)."""
    x, y, labels = torch.randn(20, 2), torch.randn(20), torch.randint(0, 3, (20,))
    first = DropoutGuide(MLP(2, hidden=(8,), tau=4.0), dropout=0.2)
    first(x, y)
    second = DropoutGuide(MLP(2, 3, hidden=(8,), likelihood="categorical"), dropout=0.2)
    second(x, labels)  # the first is alive: its names are freed, the second starts from its own
    assert pyro.get_param_store()["DropoutGuide.locs.output.weight"].shape == (3, 8)
    pyro.get_param_store().save(tmp_path / "three_classes.pt")
    del first, second
    DropoutGuide(MLP(2, hidden=(8,), tau=4.0), dropout=0.2)(x, y)  # their values are not a saved state
    pyro.get_param_store().load(tmp_path / "three_classes.pt")  # this one is
    with pytest.raises(
        ValueError, match=r"holds 'DropoutGuide.locs.output.weight' with shape \(3, 8\).*needs \(1, 8\)"
    ):
        DropoutGuide(MLP(2, hidden=(8,), tau=4.0), dropout=0.2)(x, y)


def test_a_new_guide_does_not_start_from_the_values_a_collected_guide_trained():
    """Before, a guide set up after an earlier one was collected (a loop over splits, a network
    converted again) silently started from the earlier one's trained values: split 2 from what
    split 1 learned, or one trained network's MC dropout predicting with another's weights."""
    pyro.clear_param_store()
    _, trained = _fit(0)
    trained_weight = trained.median()["hidden.0.weight"].clone()
    del trained, _
    gc.collect()
    pyro.set_rng_seed(1)
    model = MLP(2, hidden=(5,))
    guide = DropoutGuide(model)
    guide(X, Y)
    pyro.set_rng_seed(1)
    fresh_model = MLP(2, hidden=(5,))
    pyro.clear_param_store()
    fresh = DropoutGuide(fresh_model)
    fresh(X, Y)
    assert torch.equal(guide.median()["hidden.0.weight"], fresh.median()["hidden.0.weight"])
    assert not torch.equal(guide.median()["hidden.0.weight"], trained_weight)


def test_a_store_loaded_before_a_new_guide_is_set_up_is_taken(tmp_path):
    pyro.clear_param_store()
    _, guide = _fit(0)
    saved = guide.median()
    pyro.get_param_store().save(tmp_path / "params.pt")
    del guide, _
    gc.collect()
    pyro.get_param_store().load(tmp_path / "params.pt")
    again = DropoutGuide(MLP(2, hidden=(5,)))
    again(X, Y)
    assert all(torch.equal(saved[k], v) for k, v in again.median().items())


def test_guides_of_different_names_keep_apart_and_a_bad_name_is_refused():
    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    model_a = MLP(2, hidden=(5,))
    a = DropoutGuide(model_a, name="a")
    a(X, Y)
    before = a.median()
    pyro.set_rng_seed(1)
    b = DropoutGuide(MLP(2, hidden=(5,)), name="b")
    b(X, Y)
    evaluate(model_a, a, X, Y, num_samples=2)  # not refused: b took names of its own
    assert all(torch.equal(before[k], v) for k, v in a.median().items())
    assert {n.split(".")[0] for n in pyro.get_param_store().keys()} == {"a", "b"}
    for bad in ("", "a.b", 3):
        with pytest.raises(ValueError, match="name must be a non-empty string without dots"):
            DropoutGuide(MLP(2, hidden=(5,)), name=bad)
