"""Any network, exactly: networks written as people write them convert to a model whose forward runs
as written under batched draws, or are refused with an error naming the module.

For each network that converts (tolerance 1e-5, float32), in both modes of ``masks=``:
(a) the expected weights give ``net.eval()(x)``;
(d) SVI with ``DropoutELBO`` and ``BBAlpha(0.5)``, then ``predict``, ``evaluate`` and
    ``to_arviz``, all run.
With ``masks="shared"`` (a draw's masks shared by its rows, drawn by the guide), exactly:
(b) each MC draw of ``predict`` (its draws folded into the batch) equals the network's own pass
    with that draw's masks: the sampled weights loaded into the torch network (``W = M diag(z) /
    (1 - p)`` is the layer's input masked) and each dropout kept as a mask site applying its mask.
    For the recurrent layers' inter-layer dropout the shared masks are tied over time where torch
    draws one per step: loaded so, torch's own LSTM runs the tied masks;
(c) a point predicted alone equals the same point inside a batch, with the same draws.
With ``masks="own"`` the draws are the network's own MC dropout, which tests/nn/test_conformance.py
checks in distribution against the network itself.
"""

from __future__ import annotations

import copy
import re

import pyro
import pyro.distributions as dist
import pytest
import torch
from pyro import poutine
from pyro.infer import SVI
from torch import nn

from pyro_dropout import BBAlpha, DropoutELBO, DropoutGuide, evaluate, predict, predict_standard, to_arviz
from pyro_dropout.nn import from_module
from pyro_dropout.prediction import DRAWS_PLATE

from .any_modules import REFUSED, Case, cases

CASES = cases()
TOL = 1e-5


def _converted(case: Case, masks: str = "shared"):
    model = from_module(case.net, case.likelihood, masks=masks, **case.options)
    guide = DropoutGuide(model)
    guide(case.x, case.y)
    return model, guide


def _rows(case: Case, f: torch.Tensor) -> torch.Tensor:
    """The network's output in the model's terms (``mean`` is the first output of a regression)."""
    return f if case.likelihood == "categorical" else f[..., 0]


@pytest.mark.parametrize("masks", ["own", "shared"])
@pytest.mark.parametrize("name", list(CASES))
def test_a_the_expected_weights_give_the_network(name, masks):
    case = CASES[name]
    model, guide = _converted(case, masks)
    standard = predict_standard(model, guide, case.x).samples[case.output][0]
    with torch.no_grad():
        expected = case.net(case.x)
    assert torch.allclose(standard, _rows(case, expected), atol=TOL), (
        (standard - _rows(case, expected)).abs().max()
    )
    if case.likelihood == "heteroscedastic":
        log_var = predict_standard(model, guide, case.x).samples["log_var"][0]
        assert torch.allclose(log_var, expected[..., 1], atol=TOL)


def _torch_names(site: str) -> tuple[str, str]:
    """The torch name of a site: ``net.rnn.layers.1.ih.weight`` -> ``("rnn", "weight_ih_l1")``."""
    path = site.removeprefix("net.")
    found = re.fullmatch(r"(.+)\.layers\.(\d+)\.(ih|hh)\.(weight|bias)", path)
    if found:
        owner, k, part, what = found.groups()
        return owner, f"{what}_{part}_l{k}"
    owner, _, what = path.rpartition(".")
    return owner, what


def _own_pass(case: Case, model, draw: dict[str, torch.Tensor]) -> torch.Tensor:
    """The torch network with one draw's weights loaded and its kept dropouts applying their masks."""
    net = copy.deepcopy(case.net)
    for module in net.modules():
        if isinstance(module, nn.TransformerEncoderLayer | nn.TransformerEncoder):
            module.train()  # no fast path: the dropout hooks below must run
    for site, value in draw.items():
        if site.endswith(".mask"):
            owner = net.get_submodule(site.removeprefix("net.").removesuffix(".mask"))
            p = owner.p
            owner.register_forward_hook(lambda m, args, out, z=value, p=p: args[0] * z / (1 - p))
            continue
        owner_name, attribute = _torch_names(site)
        owner = net.get_submodule(owner_name)
        with torch.no_grad():
            getattr(owner, attribute).copy_(value)
            if isinstance(owner, nn.LSTM) and attribute.startswith("bias_ih"):  # the library's one bias
                getattr(owner, attribute.replace("_ih_", "_hh_")).zero_()
    with torch.no_grad():
        return _rows(case, net(case.x))


@pytest.mark.parametrize("name", list(CASES))
def test_b_each_draw_is_the_networks_own_pass_with_its_masks(name):
    case = CASES[name]
    model, guide = _converted(case)
    latent = list(guide.median())
    # 20 draws: a mask site of two units keeps both in all of them with probability 0.7 ** 40
    pred = predict(model, guide, case.x, num_samples=20, return_sites=[*latent, case.output])
    assert any(v.ne(v.new_ones(())).any() for k, v in pred.samples.items() if k.endswith(".mask")) or not any(
        k.endswith(".mask") for k in latent
    )
    for t in range(3):
        own = _own_pass(case, model, {k: pred.samples[k][t] for k in latent})
        assert torch.allclose(pred.samples[case.output][t], own, atol=TOL), (
            t,
            (pred.samples[case.output][t] - own).abs().max(),
        )


@pytest.mark.parametrize("name", list(CASES))
def test_c_a_point_alone_equals_the_point_in_a_batch(name):
    case = CASES[name]
    model, guide = _converted(case)
    with torch.no_grad(), pyro.plate(DRAWS_PLATE, 5, dim=-2):
        draws = poutine.trace(guide).get_trace(case.x, case.y)  # five draws of the weights and masks
        runs = [
            poutine.trace(poutine.replay(model, trace=draws)).get_trace(x).nodes[case.output]["value"][:, 0]
            for x in (case.x, case.x[:1])
        ]
    assert torch.allclose(runs[0], runs[1], atol=TOL), (runs[0] - runs[1]).abs().max()


@pytest.mark.parametrize("masks", ["own", "shared"])
@pytest.mark.parametrize("name", list(CASES))
def test_d_train_predict_evaluate_and_export(name, masks):
    case = CASES[name]
    model, guide = _converted(case, masks)
    for loss in (DropoutELBO(), BBAlpha(0.5, num_particles=3)):
        svi = SVI(model, guide, pyro.optim.Adam({"lr": 1e-3}), loss)
        for _ in range(2):
            assert torch.isfinite(torch.tensor(svi.step(case.x, case.y)))
    assert predict(model, guide, case.x, num_samples=7, chunk_size=3).samples[case.output].shape[:2] == (
        7,
        len(case.x),
    )
    evaluate(model, guide, case.x, case.y, num_samples=6, chunk_size=4)
    assert to_arviz(model, guide, case.x, case.y, num_samples=6, chunk_size=4) is not None


@pytest.mark.parametrize("name", list(REFUSED))
def test_refused_networks_are_named(name):
    make, options, words = REFUSED[name]
    with pytest.raises(ValueError, match=re.escape(words)):
        from_module(make(), "normal", **options)
    if options.get("masks") == "shared":  # the network's own dropout converts as it is
        from_module(make(), lambda f: dist.Normal(f, 1.0).to_event(1), **{**options, "masks": "own"})
