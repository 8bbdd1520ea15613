"""Folding a traced loss's KL, summed over weight sites, into one product.

Each weight site's KL is a scalar ``addcdiv(c, sum(m * m), d, value=v)`` (summed over the
particles where they are vectorised, and divided by their number), and the sites' terms are
added one by one: on a small network these scalar operations, each a node of the backward pass,
cost more than the network's own arithmetic (``benchmarks/svi_step.py``). Their sum is
``dot(stack(sum(m * m)), w) + C`` with constant ``w`` and ``C``: three backward nodes in all.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import torch

from .folding import constant_value, known_sizes, number, scalar, scalar_tensor, single_use

__all__ = ["fold_penalty_sum"]


class Term(NamedTuple):
    """One site's KL in the sum: ``weight * squares + constant``."""

    squares: Any  # the graph value sum(m * m), one element
    source: Any  # m where the sum covers all of its elements, else None
    weight: float  # the term is weight * squares + constant
    constant: float
    like: torch.Tensor  # a constant of the term (its dtype and device)


def _is_sum_add(node: Any) -> bool:
    return node.kind() == "aten::add" and node.inputsSize() == 3 and number(node.inputsAt(2)) == 1.0


def _summands(value: Any) -> list[Any]:
    """The summands of a tree of ``a + b`` whose inner sums are used once."""
    node = value.node()
    if _is_sum_add(node):
        return [t for i in range(2) for t in _inner(node.inputsAt(i))]
    return [value]


def _inner(value: Any) -> list[Any]:
    return _summands(value) if single_use(value) and _is_sum_add(value.node()) else [value]


def _one_element(value: Any) -> bool:
    sizes = known_sizes(value)
    return sizes is not None and math.prod(sizes) == 1


def _broadcast_copy(value: Any) -> Any:
    """``x`` where ``value`` is ``narrow(expand(x, ...), dim, 0, 1)`` holding each element of ``x``
    once (a particle's slice of weights expanded over the particles), else ``value``."""
    node = value.node()
    if node.kind() != "aten::narrow" or number(node.inputsAt(3)) != 1.0:
        return value
    expanded = node.inputsAt(0).node()
    if expanded.kind() != "aten::expand":
        return value
    source, out = expanded.inputsAt(0), known_sizes(value)
    before = known_sizes(source)
    if out is None or before is None or len(out) < len(before):
        return value
    lead = len(out) - len(before)
    return source if out[:lead] == [1] * lead and out[lead:] == before else value


def _squares_of(value: Any) -> tuple[Any, Any]:
    """``(value, m)`` where ``value`` is ``sum(m' * m')`` over all of ``m'``'s elements and ``m``
    has them once (``m'`` itself, or what it was broadcast from); ``(value, None)`` otherwise."""
    node = value.node()
    if node.kind() != "aten::sum" or not single_use(value) or not _one_element(value):
        return value, None
    if constant_value(node.inputsAt(node.inputsSize() - 1)) is not None:  # a dtype: not a plain sum
        return value, None
    product = node.inputsAt(0)
    inner = product.node()
    if inner.kind() != "aten::mul" or inner.inputsSize() != 2 or not single_use(product):
        return value, None
    if inner.inputsAt(0).unique() != inner.inputsAt(1).unique():
        return value, None
    return value, _broadcast_copy(inner.inputsAt(0))


def _term(value: Any) -> Term | None:
    """A summand as a :class:`Term`: ``addcdiv(c, s, d, value=v)`` of one element with constant
    ``c``, ``d`` and ``v``, or the sum of its expansion over particles, used once; else None."""
    copies, node = 1, value.node()
    plain_sum = (
        node.kind() == "aten::sum" and node.inputsSize() == 2 and constant_value(node.inputsAt(1)) is None
    )
    if plain_sum and single_use(value):
        expanded = node.inputsAt(0)
        if expanded.node().kind() != "aten::expand" or not single_use(expanded):
            return None
        sizes = known_sizes(expanded)
        value, copies = expanded.node().inputsAt(0), math.prod(sizes) if sizes else 0
        node = value.node()
    if node.kind() != "aten::addcdiv" or not single_use(value) or not copies or not _one_element(value):
        return None
    c, d, v = scalar_tensor(node.inputsAt(0)), scalar_tensor(node.inputsAt(2)), number(node.inputsAt(3))
    if c is None or d is None or v is None or float(d) == 0.0 or not _one_element(node.inputsAt(1)):
        return None
    squares, source = _squares_of(node.inputsAt(1))
    return Term(squares, source, copies * v / float(d), copies * float(c), c)


def _absorbed_divisor(node: Any) -> tuple[Any, float]:
    """The node whose output the folded sum replaces, and the factor it applies: ``node``, or
    the division of its sum by a constant that is its one use (BB-alpha's mean over particles)."""
    uses = node.output().uses()
    if len(uses) == 1 and uses[0].user.kind() == "aten::div" and uses[0].offset == 0:
        div = uses[0].user
        k = scalar(div.inputsAt(1), integer_tensors=True) if div.inputsSize() == 2 else None
        if k and div.output().type() == node.output().type():  # neither None nor 0
            return div, 1.0 / k
    return node, 1.0


def fold_penalty_sum(graph: Any) -> None:
    """The sum of three or more KL :class:`Term`\\ s of one dtype and device as
    ``dot(stack(squares), weights) + constant``, the whole sum 0-d."""
    for node in list(graph.nodes()):
        if not _is_sum_add(node) or any(_is_sum_add(use.user) for use in node.output().uses()):
            continue
        found = [_term(value) for value in _summands(node.output())]
        terms = [term for term in found if term is not None]
        if len(terms) < 3 or len(terms) < len(found) or known_sizes(node.output()) != []:
            continue
        if any(t.source is None and known_sizes(t.squares) != [] for t in terms):
            continue  # a term whose squares cannot be made 0-d: no stack of them
        if (
            len({(t.like.dtype, t.like.device) for t in terms}) == 1
            and node.output().type().dtype() == terms[0].like.dtype
            and all(t.squares.type().dtype() == terms[0].like.dtype for t in terms)
        ):
            replaced, factor = _absorbed_divisor(node)
            _replace_by_dot(graph, replaced, terms, factor)


def _full_square_sum(graph: Any, term: Term) -> Any:
    """A 0-d ``sum(m * m)`` of the term's source (made before ``term.squares``), else its squares
    where they are already 0-d."""
    if term.source is None:
        return term.squares
    with graph.insert_point_guard(term.squares.node()):
        product = graph.insertNode(graph.create("aten::mul", [term.source, term.source]))
        product.output().setType(term.source.type())
        total = graph.insertNode(graph.create("aten::sum", [product.output(), graph.insertConstant(None)]))
    total.output().setType(term.squares.type().with_sizes([]))
    return total.output()


def _replace_by_dot(graph: Any, node: Any, terms: list[Term], factor: float) -> None:
    squares = [_full_square_sum(graph, term) for term in terms]
    dtype, device = terms[0].like.dtype, terms[0].like.device
    weights = torch.tensor([factor * t.weight for t in terms], dtype=dtype, device=device)
    constant = torch.tensor(factor * math.fsum(t.constant for t in terms), dtype=dtype, device=device)
    with graph.insert_point_guard(node):
        listed = graph.insertNode(graph.create("prim::ListConstruct", squares))
        listed.output().setType(torch._C.ListType.ofTensors())
        stacked = graph.insertNode(graph.create("aten::stack", [listed.output(), graph.insertConstant(0)]))
        product = graph.insertNode(
            graph.create("aten::dot", [stacked.output(), graph.insertConstant(weights)])
        )
        one = graph.insertConstant(1)
        total = graph.insertNode(
            graph.create("aten::add", [product.output(), graph.insertConstant(constant), one])
        )
    stacked.output().setType(node.output().type().with_sizes([len(terms)]))  # differentiable, as the sum
    for made in (product, total):
        made.output().setType(node.output().type())
    node.output().replaceAllUsesWith(total.output())  # the old nodes, now unused, go in the dead code pass
