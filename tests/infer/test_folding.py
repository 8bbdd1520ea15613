"""The folds of a traced loss's arithmetic (pyro_dropout/infer/fast/folding.py and penalty_fold.py):
what each folds, what it leaves, and that the folded trace gives the recorded value and gradient
(relative tolerance 1e-5: the folds reorder float32 sums), at every call."""

import pyro
import pytest
import torch

from pyro_dropout import BBAlpha, DropoutELBO
from pyro_dropout.infer.fast import recording
from pyro_dropout.infer.fast.recording import trace_loss

from .models import graph_kinds as _kinds
from .models import only_trace, small_mlp_svi


def _check_same(fn, traced, *tensors, calls=4):
    """Value and gradients of the trace equal the function's, at each of ``calls`` calls (the
    graph executor specialises a graph after its first runs)."""
    eager = fn(*tensors)
    grads = torch.autograd.grad(eager, tensors)
    for _ in range(calls):
        value = traced(*tensors)
        traced_grads = torch.autograd.grad(value, tensors)
        assert value.item() == pytest.approx(eager.item(), rel=1e-5)
        for got, want in zip(traced_grads, grads, strict=True):
            assert torch.allclose(got, want, rtol=1e-5, atol=1e-5)


def test_constant_steps_around_a_full_sum_fold_into_one_addition():
    scale, half = torch.tensor(312.5), torch.tensor(-0.5, dtype=torch.float64)

    def fn(w):
        return (((w * w) * half - 0.9189) * scale).sum() / 10.0 + (3.0 * w).sum()

    w = torch.randn(5, 3, requires_grad=True)
    traced = trace_loss(fn, (w,))
    kinds = _kinds(traced)
    assert "aten::div" not in kinds and "aten::sub" not in kinds
    assert kinds.count("aten::mul") == 1  # w * w; the constant products are folded
    _check_same(fn, traced, w)


@pytest.mark.parametrize("case", ["sum over a dim", "a tensor factor", "a widening constant"])
def test_what_is_not_a_constant_step_around_a_full_sum_is_kept(case):
    other, wide = torch.randn(5, 3), torch.full((2, 1, 1), 0.5)

    def fn(w):
        if case == "sum over a dim":
            return (w * 2.0).sum(0).sum()
        return ((w * other) if case == "a tensor factor" else (w * wide)).sum() * 2.0

    w = torch.randn(5, 3, requires_grad=True)
    traced = trace_loss(fn, (w,))
    assert "aten::mul" in _kinds(traced)
    _check_same(fn, traced, w)


def test_kl_like_terms_fold_into_one_dot_product_and_the_negation_into_the_difference():
    constants = [torch.tensor(c) for c in (594.7, 45.9, 36.0, 0.92)]
    two = torch.tensor(2.0)

    def fn(w1, b1, w2, y):
        terms = [
            torch.addcdiv(constants[0], (w1 * w1 * 1.05).sum((-2, -1)), two),
            torch.addcdiv(constants[1], (b1 * b1).sum(-1), two),
            torch.addcdiv(constants[2], (w2 * w2 * 1.05).sum((-2, -1)), two),
        ]
        fit = -((y - w1.sum()) ** 2)
        return -(fit - (terms[0] + terms[1] + terms[2]))

    tensors = [torch.randn(5, 3, requires_grad=True), torch.randn(5, requires_grad=True)]
    tensors += [torch.randn(1, 5, requires_grad=True), torch.randn(())]
    traced = trace_loss(fn, tuple(tensors))
    kinds = _kinds(traced)
    assert "aten::dot" in kinds and "aten::addcdiv" not in kinds
    assert kinds.count("aten::neg") == 1  # the fit's; the loss's is folded into the difference
    _check_same(lambda *t: fn(*t, tensors[3]), lambda *t: traced(*t, tensors[3]), *tensors[:3])


def test_two_kl_terms_or_one_computed_constant_are_left_as_they_are():
    one, two, three = torch.tensor(1.0), torch.tensor(2.0), torch.tensor(3.0)

    def fn(w, b):
        computed = (b * 0).sum() + 1.0  # a constant computed from an input: not a graph constant
        return (
            torch.addcdiv(three, (w * w).sum(), two)
            + torch.addcdiv(computed, (b * b).sum(), two)
            + torch.addcdiv(one, (w * w * w).sum(), two)
        )

    tensors = (torch.randn(4, 2, requires_grad=True), torch.randn(4, requires_grad=True))
    traced = trace_loss(fn, tensors)
    assert "aten::dot" not in _kinds(traced)
    _check_same(fn, traced, *tensors)


@pytest.mark.parametrize("loss", ["elbo", "bbalpha"])
def test_the_traced_losses_fold_their_kl_and_give_the_eager_gradients(loss):
    x, y = torch.randn(16, 3), torch.randn(16)
    grads = {}
    for jit in (False, True):
        objective = DropoutELBO(jit=jit) if loss == "elbo" else BBAlpha(0.5, num_particles=3, jit=jit)
        svi, model, guide = small_mlp_svi(objective)
        for _ in range(4):
            svi.step(x, y, num_data=100)
        grads[jit] = []
        for step in range(4):  # same seed, same masks: the same gradients
            pyro.set_rng_seed(10 + step)
            objective.loss_and_grads(model, guide, x, y, num_data=100)
            store = pyro.get_param_store()
            grads[jit].append({n: store[n].unconstrained().grad.clone() for n in store})
            for name in store:
                store[name].unconstrained().grad = None
        if jit:
            kinds = _kinds(only_trace(objective))
            assert "aten::dot" in kinds and "aten::addcdiv" not in kinds
    for eager, traced_grads in zip(grads[False], grads[True], strict=True):
        for name, grad in eager.items():
            assert torch.allclose(traced_grads[name], grad, rtol=1e-4, atol=1e-4), name


@pytest.mark.parametrize("error", [RuntimeError, TypeError, IndexError])
def test_a_fold_that_fails_leaves_the_recorded_trace(monkeypatch, error):
    def failing(graph):
        raise error("a fold that fails")

    def fn(w):
        return -((w * 2.0).sum() - 1.0)

    monkeypatch.setattr(recording, "fold_negated_difference", failing)
    w = torch.randn(3, requires_grad=True)
    traced = trace_loss(fn, (w,))
    assert "aten::neg" in _kinds(traced)  # the recording, as it was recorded
    _check_same(fn, traced, w)


def test_a_folded_graph_that_fails_to_run_leaves_the_recorded_trace(monkeypatch):
    def unrunnable(graph):  # a node that uses a value computed after it: the graph cannot run
        nodes = [node for node in graph.nodes() if node.kind().startswith("aten::") and node.output().uses()]
        nodes[0].replaceInput(0, nodes[-1].output())

    def fn(w):
        return -((w * 2.0).sum() - 1.0)

    monkeypatch.setattr(recording, "fold_negated_difference", unrunnable)
    w = torch.randn(3, requires_grad=True)
    traced = trace_loss(fn, (w,))
    _check_same(fn, traced, w)
