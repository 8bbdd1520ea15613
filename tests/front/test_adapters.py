"""MCDropout on a PEFT LoRA model: its own MC dropout (the adapters' ``lora_dropout`` included) is
the predictive, the base layers PEFT froze stay as they are, and ``fit`` refines the adapters only."""

from __future__ import annotations

import copy

import pyro
import pytest
import torch

from pyro_dropout import BBAlpha, MCDropout

from ..nn.conformance import compare_draws
from .test_generation import CausalLM

peft = pytest.importorskip("peft", reason="PEFT (an optional extra)")


def _lora(net: torch.nn.Module, targets: list[str], **options) -> torch.nn.Module:
    config = peft.LoraConfig(r=4, lora_alpha=8, lora_dropout=0.2, target_modules=targets, **options)
    model = peft.get_peft_model(net, config)
    torch.manual_seed(1)
    for name, parameter in model.named_parameters():
        if "lora_B" in name:  # as if fine-tuned: PEFT starts B at zero, which would hide the adapter
            torch.nn.init.normal_(parameter, std=0.3)
    return model.eval()


def _own_logits(net: torch.nn.Module, ids: torch.Tensor, draws: int) -> torch.Tensor:
    net = copy.deepcopy(net).train()
    with torch.no_grad():
        out = net(ids.expand(draws, *ids.shape).reshape(draws * len(ids), -1))
    logits = out if isinstance(out, torch.Tensor) else out.logits
    return logits.reshape(draws, len(ids), *logits.shape[1:])


def test_a_lora_models_predictive_is_its_own_mc_dropout():
    torch.manual_seed(0)
    model = _lora(CausalLM(), ["out", "linear1"])
    ids = torch.tensor([[2, 5, 7, 3], [4, 4, 9, 10]])
    pyro.set_rng_seed(0)
    lib = MCDropout(model, num_samples=1500).predict(ids).samples["logits"]
    torch.manual_seed(2)
    result = compare_draws(lib, _own_logits(model, ids, 1500))
    assert result.passed and 0.9 < result.sd_ratio < 1.1, result


@pytest.mark.parametrize("loss", [None, "bbalpha"])
def test_fit_refines_the_adapters_and_leaves_the_base_as_it_was(loss):
    """Under DropoutELBO (the default) and BB-alpha (alpha = 0.5) alike."""
    torch.manual_seed(0)
    model = _lora(CausalLM(), ["out", "linear1"])
    base = {k: v.clone() for k, v in model.named_parameters() if "lora_" not in k}
    bnn = MCDropout(model, num_samples=4)
    ids = torch.randint(0, 12, (16, 6))
    objective = BBAlpha(0.5) if loss == "bbalpha" else None
    bnn.fit([(ids[:8], ids[:8]), (ids[8:], ids[8:])], epochs=3, lr=1e-2, loss=objective, progress=False)
    rates = bnn.dropout_rates()["weights"]
    assert rates and all("lora_" in site for site in rates), rates  # only the adapters are sites
    refined = dict(bnn.to_module().named_parameters())
    assert all(torch.equal(refined[k], v) for k, v in base.items())  # bit-identical
    assert all(torch.equal(p, base[k]) for k, p in model.named_parameters() if "lora_" not in k)  # the user's
    moved = [k for k, p in model.named_parameters() if "lora_" in k and not torch.equal(refined[k], p)]
    assert moved, "no adapter changed"


def test_a_hugging_face_lora_model_converts_and_generates():
    hf = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = hf.GPT2Config(vocab_size=12, n_embd=16, n_layer=2, n_head=2, n_positions=32)
    model = _lora(hf.GPT2LMHeadModel(config), ["c_attn"], fan_in_fan_out=True)
    bnn = MCDropout(model, num_samples=4)
    out = bnn.generate(torch.tensor([[2, 5, 7]]), max_new_tokens=3, seed=0)
    assert out.tokens.shape == (4, 1, 3)
    assert set(bnn.dropout_rates()["weights"]) == {
        f"net.base_model.model.transformer.h.{i}.attn.c_attn.lora_{ab}.default.weight"
        for i in (0, 1)
        for ab in "AB"
    }


def test_concrete_learns_each_adapters_rate_and_keeps_it(tmp_path):
    """concrete=True: each adapter's lora_dropout rate is a Concrete-dropout variational parameter
    (its KL the weight's at that rate, its masks relaxed in training); fit moves it, the draws use
    it, the network given and its base stay, and a kept front door and to_module() carry it."""
    torch.manual_seed(0)
    model = _lora(CausalLM(), ["out", "linear1"])
    bnn = MCDropout(model, num_samples=4, concrete=True)
    ids = torch.randint(0, 12, (64, 6))
    bnn.fit(
        [(ids[i : i + 16], ids[i : i + 16]) for i in range(0, 64, 16)], epochs=10, lr=1e-2, progress=False
    )
    learned = bnn.guide.dropout_rates()
    adapters = {site: float(rate) for site, rate in learned.items() if "lora_A" in site}
    assert len(adapters) == 2 and all(abs(rate - 0.2) > 0.01 for rate in adapters.values()), adapters
    network = bnn.dropout_rates()["network"]
    for site, rate in adapters.items():
        module = site.removeprefix("net.").replace("lora_A.default.weight", "lora_dropout.default")
        assert network[module] == pytest.approx(rate)  # the draws' dropout is at the learned rate
        assert float(model.get_submodule(module).p) == pytest.approx(0.2)  # the user's stays
    deployed = dict(bnn.to_module().named_modules())
    assert all(
        isinstance(deployed[m], torch.nn.Dropout) and deployed[m].p == pytest.approx(adapters[s])
        for s in adapters
        for m in [s.removeprefix("net.").replace("lora_A.default.weight", "lora_dropout.default")]
    )
    kept = MCDropout.load(bnn.save(tmp_path / "front.pt"), model)
    assert kept.concrete and all(
        float(kept.guide.dropout_rates()[s]) == pytest.approx(r) for s, r in adapters.items()
    )


def test_concrete_on_a_network_whose_dropout_masks_no_layer_alone_is_refused():
    net = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    with pytest.raises(
        ValueError, match=r"MCDropout\(concrete=True\): no dropout module .* no rate to learn"
    ):
        MCDropout(net, concrete=True)
    plain = torch.nn.Sequential(
        torch.nn.Linear(3, 8), torch.nn.ReLU(), torch.nn.Dropout(0.3), torch.nn.Linear(8, 2)
    )
    bnn = MCDropout(plain, concrete=True)  # a traced network's dropout before a layer: learned too
    x, y = torch.randn(40, 3), torch.randint(0, 2, (40,))
    bnn.fit([(x, y)], epochs=30, lr=5e-2, progress=False)
    assert abs(float(bnn.guide.dropout_rates()["net.3.weight"]) - 0.3) > 0.005
