r"""``MCDropout``: the front door for a trained network with dropout.

Three lines from a trained ``torch.nn.Module`` to MC-dropout predictions and their uncertainty,
built on :func:`~pyro_dropout.nn.from_module`, :class:`~pyro_dropout.guides.DropoutGuide` and
:func:`~pyro_dropout.prediction.predict` (each reachable as ``bnn.model``, ``bnn.guide``):

```python
bnn = MCDropout(trained_net, "classification")        # the net's own dropout, its trained weights
report = bnn.evaluate(x_test, y_test)                  # accuracy, NLL, ECE, misclassification AUROC
ood = bnn.ood(x_test, x_other)                         # AUROC of entropy, mutual information ...
bnn.fit(train_loader, epochs=1)                        # optional: refine by SVI (a DataLoader)
```
"""

from __future__ import annotations

import copy
import functools
import itertools
import math
import os
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, cast

import pyro
import torch
from pyro import poutine
from pyro.infer import SVI
from pyro.infer.autoguide.initialization import InitMessenger

from ..batches import batches, is_one_batch
from ..guides import DropoutGuide, init_to_fan_in
from ..guides.ownership import forget_on_collection
from ..infer import DropoutELBO
from ..metrics import aupr, auroc, evaluate, fpr_at_tpr, merge_reports, uncertainty_scores
from ..nn import dropout_off, from_module
from ..nn.converted.learned_rates import LearnedRateDropout, learned_dropouts, plain_dropouts
from ..nn.converted.likelihoods import check_targets
from ..ops import is_positive_int, is_positive_number
from ..prediction import Predictions, explain_chunks, predict
from ..runtime import progress_bar
from . import generation, pictures
from .generation import Generation, SequenceScores
from .keep import (
    FORMAT,
    check_options,
    example_inputs,
    input_spec,
    param_names,
    read_state,
    refined_module,
    restore_params,
    saved_params,
    write_state,
)
from .noise import NoiseLevel, held_out_tau

__all__ = ["MCDropout"]

_INSTANCES = itertools.count()
_LEARNED = "learned by fit (its maximum-likelihood point, with the weights)"
TAU_LR = 0.05  # Adam's step for log tau while fit learns it: about 100 steps across two decades
_OUTPUT_SITES = ("logits", "mean", "log_var", "output")  # a converted network's outputs (per point)
_TASKS = {
    "classification": "categorical",
    "segmentation": "segmentation",
    "regression": "normal",
    "heteroscedastic": "heteroscedastic",
}


def _check_fit(epochs: Any, lr: Any) -> None:
    if not is_positive_int(epochs):
        raise ValueError(f"MCDropout.fit: epochs must be a positive int, got {epochs!r}")
    if not is_positive_number(lr):
        raise ValueError(f"MCDropout.fit: lr must be a positive finite number, got {lr!r}")


def _data_size(loader: Any) -> int | None:
    """The examples in one pass of ``loader``: a DataLoader's ``len(dataset)``, a list's rows."""
    dataset = getattr(loader, "dataset", None)
    if dataset is not None:
        try:
            return len(dataset)
        except TypeError:  # an IterableDataset
            return None
    if isinstance(loader, list | tuple) and all(isinstance(b, list | tuple) and b for b in loader):
        return sum(len(b[0]) for b in loader if isinstance(b[0], torch.Tensor)) or None
    return None


def _batch_count(loader: Any) -> int | None:
    try:
        return len(loader)
    except TypeError:  # a generator
        return None


def _shown(data: Any, where: str) -> Iterable:
    """``batches(data)``, with a progress bar (a terminal only) where ``data`` is a loader."""
    if isinstance(data, torch.Tensor | dict) or (isinstance(data, tuple) and is_one_batch(data)):
        yield from batches(data, where)
        return
    with progress_bar(None, _batch_count(data), where) as bar:
        for batch in batches(data, where):
            yield batch
            bar.update()


def _shared_names(shared: Any, names: list[str], net: str) -> frozenset[str]:
    """The inputs declared shared, each checked to be one of the forward's parameters."""
    if isinstance(shared, str) or not all(isinstance(n, str) for n in shared):
        raise TypeError(f"MCDropout: shared must be a list of the forward's input names, got {shared!r}")
    unknown = sorted(set(shared) - set(names)) if names else []
    if unknown:
        raise ValueError(
            f"MCDropout: shared names {unknown}, which {net}.forward does not take (its inputs: "
            f"{', '.join(names)})"
        )
    return frozenset(shared)


class MCDropout:
    """A trained network with dropout as an MC-dropout posterior.

    :param net: the trained ``nn.Module`` (left as it is; a copy is converted).
    :param task: ``"classification"`` (the outputs are logits, ``[N, C]`` or a class per position
        ``[N, T, C]``), ``"segmentation"`` (a class per pixel, ``[N, C, H, W]``), ``"regression"``
        (one output, noise precision ``tau``), ``"heteroscedastic"`` (a mean and a log-variance),
        or a callable ``f -> distribution`` (:func:`~pyro_dropout.nn.from_module`'s likelihoods).
    :param num_samples: the draws of each prediction (T).
    :param device: where the converted copy and the guide live (``"cuda"``, say; the inputs go
        there too); the network given stays where it is. Default: where the network is.
    :param concrete: learn the rate of each dropout module that masks a layer's inputs (Concrete
        dropout on the network's own masks: a LoRA adapter's ``lora_dropout``, an ``nn.Dropout``
        before an ``nn.Linear``) in :meth:`fit`; predictions draw at the learned rates.
    :param shared: the names of the forward's inputs that are the same for every example, where
        their shape does not tell (a dense ``[N, N]`` adjacency). The inputs of every call are what
        the network's forward takes: one tensor ``x [N, ...]``, a tuple of positional inputs
        (``(x, t)``, ``(x, edge_index)``) or a dict of keyword inputs (``input_ids`` and
        ``attention_mask``); a tensor whose dim 0 is not the batch's (``edge_index [2, E]``) is
        shared by the examples (:mod:`~pyro_dropout.nn.converted.inputs`).
    :param kwargs: passed to :func:`~pyro_dropout.nn.from_module` (``tau``, ``keep``, ``last_layer``...).
        For ``"regression"`` without ``tau`` the noise level is not assumed: :meth:`fit` learns it,
        or :meth:`calibrate` picks it on held-out data, before anything is predicted
        (:attr:`noise` says which, and the value).
    """

    def __init__(
        self,
        net: torch.nn.Module,
        task: str | Callable = "classification",
        *,
        num_samples: int = 100,
        device: str | torch.device | None = None,
        shared: Iterable[str] = (),
        concrete: bool = False,
        **kwargs: Any,
    ) -> None:
        if not callable(task) and task not in _TASKS:
            raise ValueError(
                f"MCDropout: task must be one of {', '.join(_TASKS)} or a callable, got {task!r}"
            )
        if not is_positive_int(num_samples):
            raise ValueError(f"MCDropout: num_samples must be a positive int, got {num_samples!r}")
        self.task, self.num_samples = task, num_samples
        self.options = dict(kwargs)  # from_module's settings, as given (a kept file holds them)
        self.inputs: dict[str, Any] | None = None  # the first batch's inputs, described (keep.input_spec)
        self.model = from_module(net, task if callable(task) else _TASKS[task], **kwargs)
        self.model.shared = _shared_names(shared, self.model.input_names, type(net).__name__)
        if not isinstance(concrete, bool):
            raise TypeError(f"MCDropout: concrete must be True or False, got {concrete!r}")
        self.concrete = concrete
        self.learned = learned_dropouts(self.model) if concrete else {}
        # the converted copy on ``device`` (the user's network stays where it is); the guide's
        # parameters start from its buffers there, at the first batch (which must be there too)
        self.device = None if device is None else torch.device(device)
        if self.device is not None:
            self.model.to(self.device)
        given = kwargs.get("tau")
        self.noise: NoiseLevel | None = (
            (NoiseLevel(None, None) if given is None else NoiseLevel(float(given), "given (tau=)"))
            if task == "regression"
            else None
        )
        # a name of its own in Pyro's param store: several can live side by side, and the
        # store forgets its values once its guide is collected
        self.name = f"MCDropout{next(_INSTANCES)}"
        self.guide = DropoutGuide(self.model, name=self.name, concrete=concrete)
        forget_on_collection(self.guide, self.name)

    def __repr__(self) -> str:
        task = self.task if isinstance(self.task, str) else getattr(self.task, "__name__", "a callable")
        net = type(self.model.net).__name__
        said = [f"task={task!r}", f"num_samples={self.num_samples}", f"net={net}"]
        if self.noise is not None:
            said.append(f"noise: {self.noise}")
        return f"MCDropout({', '.join(said)})"

    def _need_noise(self, where: str) -> None:
        """A regression's predictions need its noise level: refused, naming the ways to it, while
        it is not known."""
        if self.noise is not None and self.noise.tau is None:
            raise ValueError(
                f"{where}: the regression's noise level is not known, and no default is assumed: give "
                "MCDropout(net, 'regression', tau=1 / sd**2), or call bnn.calibrate(x_val, y_val) (picks it "
                "by the held-out predictive log-likelihood) or bnn.fit(loader) (learns it with the weights)"
            )

    def calibrate(self, x: torch.Tensor, y: torch.Tensor, num_samples: int | None = None) -> NoiseLevel:
        """Set a regression's noise precision ``tau`` to the value that maximises the MC predictive
        log-likelihood of held-out ``(x, y)`` (not the training data: there the draws fit the noise);
        returns the :class:`~pyro_dropout.front.NoiseLevel`, also kept in :attr:`noise`."""
        if self.noise is None:
            raise ValueError(f"MCDropout.calibrate: the task {self.task!r} has no noise level to pick")
        if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor):
            raise TypeError("MCDropout.calibrate: x and y must be tensors of held-out points")
        self._ready(x, y)
        means = predict(self.model, self.guide, x, num_samples=self._draws(num_samples), return_sites=())
        rows = self.model.inputs(x).rows
        check_targets("normal", y, rows)
        tau = held_out_tau(means.means["obs"], y)
        self.model.tau = tau
        self.noise = NoiseLevel(tau, f"picked by the MC predictive log-likelihood of {rows} held-out points")
        return self.noise

    def _targets_like(self, x: Any) -> torch.Tensor:
        """Targets of the shape the network's outputs ask for (a class per token or pixel, say),
        from one pass of the network with its trained weights and its dropout off."""
        with torch.no_grad(), poutine.block(), pyro.validation_enabled(False), dropout_off():
            trace = poutine.trace(InitMessenger(init_to_fan_in)(self.model)).get_trace(x)
        return torch.zeros_like(cast(torch.Tensor, trace.nodes["obs"]["value"]))

    def _draws(self, num_samples: int | None) -> int:
        """The number of draws asked for (``None``: the default); ``0`` is refused by ``predict``,
        not taken as the default."""
        return self.num_samples if num_samples is None else num_samples

    def _ready(self, x: Any, y: torch.Tensor | None = None) -> None:
        """Each batch checked (finite inputs and targets: a NaN would reach Pyro as "Expected
        parameter logits"), and the guide set up at the first (on two rows of a tensor; on the
        whole batch of several inputs, whose shared ones may index its rows: a graph's edges)."""
        inputs = self.model.inputs(x)
        named = [
            ("x" if isinstance(x, torch.Tensor) else f"the input {n!r}", v)
            for n, v in zip(inputs.names, inputs.values, strict=True)
        ]
        for name, t in [*named, ("y", y)]:
            if isinstance(t, torch.Tensor) and t.is_floating_point() and not bool(torch.isfinite(t).all()):
                bad = int((~torch.isfinite(t)).sum())
                raise ValueError(f"MCDropout: {name} holds {bad} NaN or infinite values (of {t.numel()})")
        if self.guide.prototype_trace is None:  # set up with the data's structure (targets as observed)
            if isinstance(x, torch.Tensor):
                x, y = x[:2], None if y is None else y[:2]
            self.guide(x, y if y is not None else self._targets_like(x))
            self.inputs = input_spec(inputs, "MCDropout")
            for site, module in self.learned.items():  # the network's dropout reads the learned rate
                module.rate = functools.partial(self.guide.rate, site)

    def _example(self) -> Any:
        """Inputs of zeros shaped as the first batch's (two rows per example)."""
        if self.inputs is None:
            raise ValueError("MCDropout: nothing has run yet, so the inputs' shapes are not known")
        return example_inputs(self.inputs, self.device)

    def _state(self, where: str) -> dict[str, Any]:
        """What :meth:`save` keeps (the task may be a callable here: only a file cannot hold it)."""
        check_options(self.options, where)
        names = param_names(self.model, self.guide, self._example())
        noise = [None, None] if self.noise is None else [self.noise.tau, self.noise.source]
        return {
            "format": FORMAT,
            "task": self.task,
            "num_samples": self.num_samples,
            "options": self.options,
            "inputs": self.inputs,
            "shared": sorted(self.model.shared),
            "concrete": self.concrete,
            "noise": noise,
            "params": saved_params(names, self.name),
        }

    def save(self, path: str | os.PathLike) -> Path:
        """Keep the fitted front door in ``path`` (tensors and plain values only; atomic): the guide's
        parameters, the settings, the noise level. :meth:`load` with the same network puts it back."""
        if not isinstance(self.task, str):
            raise ValueError(
                "MCDropout.save: the task is a callable, which no file can hold: give a task name"
            )
        return write_state(path, self._state("MCDropout.save"))

    @classmethod
    def load(
        cls, path: str | os.PathLike, net: torch.nn.Module, device: str | torch.device | None = None
    ) -> MCDropout:
        """The front door kept by :meth:`save`, on ``net`` (the same architecture, e.g. the network it
        was made from), on ``device``. The file is read with ``weights_only=True``: it runs nothing."""
        state = read_state(path)
        if state["task"] not in _TASKS:
            raise ValueError(
                f"MCDropout.load: {path}: the task {state['task']!r} is not one of {', '.join(_TASKS)}"
            )
        return cls._from_state(state, net, device, path)

    @classmethod
    def _from_state(cls, state: dict[str, Any], net: torch.nn.Module, device: Any, where: Any) -> MCDropout:
        settings = {"num_samples": state["num_samples"], "device": device, "shared": state["shared"]}
        settings["concrete"] = state["concrete"]
        front = cls(net, state["task"], **settings, **state["options"])
        front.inputs = state["inputs"]
        x = front._example()
        front._ready(x)
        restore_params(state["params"], param_names(front.model, front.guide, x), front.name, where)
        tau, source = state["noise"] + [None] * (2 - len(state["noise"]))
        if front.noise is not None and isinstance(tau, float | int) and isinstance(source, str):
            front.model.tau = float(tau)
            front.noise = NoiseLevel(float(tau), source)
        return front

    def to(self, device: str | torch.device) -> MCDropout:
        """Move everything to ``device`` (the converted copy, the guide's parameters; the inputs go
        there at each call) and return ``self``. Before the first call the copy just moves; after,
        the front door is built again there from its state (as :meth:`load` would), the same draws
        under the same seed. The network given at the start stays where it is."""
        device = torch.device(device)
        if self.guide.prototype_trace is None:
            self.model.to(device)
            self.device = device
            return self
        if self.model.source_net is None:
            raise ValueError(
                "MCDropout.to: a front door made with masks='shared' keeps no copy of the network to build "
                "again: make it with device= (or move it before its first call)"
            )
        net = plain_dropouts(copy.deepcopy(self.model.source_net))  # the network as it was given
        moved = type(self)._from_state(self._state("MCDropout.to"), net, device, "MCDropout.to")
        self.__dict__.update(moved.__dict__)  # this object is the moved one; the old guide is collected
        return self

    def to_module(self) -> torch.nn.Module:
        """The network with its refined weights, a plain ``nn.Module`` (a copy, in eval mode): each
        converted layer's weights are the guide's means (the expected weights of the dropout posterior,
        what standard dropout predicts with); before any fit, the trained network's own."""
        if self.guide.prototype_trace is None:
            raise ValueError(
                "MCDropout.to_module: nothing has run yet (the guide is set up from the first batch): "
                "predict, evaluate or fit once first"
            )
        means = self.guide.median()
        return refined_module(self.model.source_net, self.model, means)

    def fit(
        self,
        loader: Iterable,
        epochs: int = 1,
        lr: float = 1e-3,
        loss: Any = None,
        num_data: int | None = None,
        progress: bool | None = None,
    ) -> list[float]:
        """Refine the network by SVI on a DataLoader of ``(x, y)`` batches (``loss``: default
        ``DropoutELBO()``), the likelihood scaled to the whole data set (``num_data``: its size,
        by default the loader's ``len(dataset)`` or a list's rows); returns each epoch's loss per
        example (each step's loss over ``num_data``, averaged over the epoch's examples: the
        same whatever the batch size). ``progress``: a bar of the steps (default: on in a terminal,
        off where ``CI`` is set or the output is not a terminal)."""
        _check_fit(epochs, lr)
        if self.model.own_dropout_only:
            net = type(self.model.source_net).__name__
            raise ValueError(
                f"MCDropout.fit: {net} has no layer the library can make Bayesian (nn.Linear, "
                "nn.Conv1d/2d/3d, nn.LSTM or nn.GRU: a graph convolution's own linear map is none of "
                "these), so there is nothing to refine; its own MC dropout predicts as it is (predict, "
                "evaluate, ood)"
            )
        n = _data_size(loader) if num_data is None else num_data
        if not is_positive_int(n):
            raise ValueError(
                "MCDropout.fit: the data set's size is not known (a generator or an IterableDataset) "
                f"or not a positive int ({n!r}): give num_data=, the examples in one epoch"
            )
        learning = self.noise is not None and self.noise.source in (None, _LEARNED)
        tau = f"{self.name}.log_tau"  # the param that holds log(tau) / scale while it is learned
        optim = cast(Any, pyro.optim).Adam({"lr": lr})
        svi, history, epoch_start = None, [], None
        count = _batch_count(loader)
        bar = progress_bar(progress, None if count is None else epochs * count, "MCDropout.fit")
        for epoch in range(epochs):
            total, seen = 0.0, 0
            if learning and self.model.tau_param is not None:
                epoch_start = self._tau_now()
            for x, y in batches(loader, f"MCDropout.fit (epoch {epoch + 1})"):
                if y is None:
                    raise ValueError(
                        "MCDropout.fit: the batches need targets: a DataLoader of (x, y) batches"
                    )
                if learning and self.model.tau_param is None:
                    epoch_start = self._learn_tau(tau, y, lr)
                self._ready(x, y)
                rows = self.model.inputs(x).rows
                svi = svi or SVI(self.model, self.guide, optim, loss or DropoutELBO())
                total += svi.step(x, y, num_data=n) * rows / n
                seen += rows
                bar.update()
            history.append(total / seen)
            bar.set_postfix(loss=f"{history[-1]:.4g}", refresh=False)
        bar.close()
        if learning:
            self._fix_tau(epoch_start, n)
        return history

    def _learn_tau(self, name: str, y: torch.Tensor, lr: float) -> float:
        """Make tau learned by the next steps, as ``exp(scale * u)`` of the param ``u`` named ``name``
        (``scale = TAU_LR / lr``: Adam's steps of about ``lr`` in ``u`` move log tau by about
        ``TAU_LR``); it starts where it stood, or at one over the targets' variance (the noise as
        wide as the data: the network explains nothing yet). Returns the start."""
        start = self.noise.tau if self.noise is not None else None
        if start is None:
            spread = float(y.detach().double().var()) if len(y) > 1 else 1.0
            start = 1.0 / spread if math.isfinite(spread) and spread > 0 else 1.0
        store = pyro.get_param_store()
        if name in store:  # an earlier fit's, at another scale
            del store[name]
        self.model.tau_scale = TAU_LR / lr
        pyro.param(name, torch.tensor(math.log(start) / self.model.tau_scale, device=y.device))
        self.model.tau_param = name
        return start

    def _tau_now(self) -> float:
        u = pyro.param(cast(str, self.model.tau_param)).detach()
        return math.exp(self.model.tau_scale * float(u))

    def _fix_tau(self, epoch_start: float | None, n: int) -> None:
        """Fix tau at its learned value (predictions use it, until the next fit) and say so; warn
        where it was still moving: in the last epoch by more than its own standard error from ``n``
        points (``sqrt(2 / n)`` in log tau, a Gaussian precision's maximum-likelihood estimate's)."""
        self.model.tau = self._tau_now()
        self.model.tau_param = None
        self.noise = NoiseLevel(self.model.tau, _LEARNED)
        if epoch_start is not None and abs(math.log(self.model.tau / epoch_start)) > math.sqrt(2 / n):
            warnings.warn(
                f"MCDropout.fit: the noise level was still moving in the last epoch ({epoch_start:.4g} -> "
                f"{self.model.tau:.4g}): fit for more epochs, or pick it on held-out data with calibrate",
                stacklevel=3,
            )

    def predict(self, x: Any, num_samples: int | None = None) -> Predictions:
        """MC-dropout draws at ``x`` (a tensor, or a DataLoader, streamed a batch at a time):
        ``pred.probs["obs"]`` ``[T, N, C]`` (classification; ``[T, N, *positions, C]`` with a class
        per token or pixel), ``pred.means["obs"]`` ``[T, N]`` (regression). A DataLoader's
        predictions hold the per-point sites (the likelihood's and the network's outputs)."""
        self._need_noise("MCDropout.predict")
        parts = []
        for xb, _ in _shown(x, "MCDropout.predict"):
            self._ready(xb)
            parts.append(predict(self.model, self.guide, xb, num_samples=self._draws(num_samples)))
        return parts[0] if isinstance(x, torch.Tensor) else Predictions.of_points(parts, _OUTPUT_SITES)

    def generate(
        self,
        input_ids: torch.Tensor,
        *,
        num_samples: int | None = None,
        max_new_tokens: int = 20,
        attention_mask: torch.Tensor | None = None,
        do_sample: bool = False,
        temperature: float = 1.0,
        top_k: int | None = None,
        eos_token_id: int | None = None,
        pad_token_id: int | None = None,
        chunk_size: int | None = None,
        score_samples: int | None = None,
        seed: int | None = None,
        progress: bool | None = None,
    ) -> Generation:
        """``T`` continuations of each prompt of a causal language model (``T = num_samples``), each
        from one draw of the network's own dropout held for the whole continuation, greedy or sampled
        (``do_sample``, ``temperature``, ``top_k``), stopped per row at ``eos_token_id`` (padded with
        ``pad_token_id`` after it); prompts padded on the left with their ``attention_mask``. Returns a
        :class:`~pyro_dropout.front.generation.Generation`: the continuations, each token's
        predictive entropy and mutual information, each continuation's MC sequence log-likelihood
        (under ``score_samples`` draws, default ``T``), the predictive entropy over sequences and the
        continuations' spread. ``seed``: the same seed, the same draws and continuations;
        ``chunk_size``: the draws of one pass (memory)."""
        options = {
            "num_samples": self._draws(num_samples),
            "max_new_tokens": max_new_tokens,
            "do_sample": do_sample,
            "temperature": temperature,
            "top_k": top_k,
            "eos_token_id": eos_token_id,
            "pad_token_id": pad_token_id,
            "chunk_size": chunk_size,
            "score_samples": score_samples,
            "seed": seed,
            "progress": progress,
        }
        return generation.generate(self, input_ids, attention_mask, **options)

    def score_continuations(
        self,
        input_ids: torch.Tensor,
        continuations: torch.Tensor,
        *,
        attention_mask: torch.Tensor | None = None,
        num_samples: int | None = None,
        eos_token_id: int | None = None,
        seed: int | None = None,
    ) -> SequenceScores:
        """The :class:`~pyro_dropout.front.generation.SequenceScores` of given continuations
        ``[T, N, K]`` of the prompts ``input_ids`` ``[N, P]`` under ``num_samples`` draws of the
        network's own dropout, each draw's masks shared by all the continuations of a prompt (a draw
        is one function of the text): per-token predictive entropy and mutual information, each
        continuation's MC sequence log-likelihood (to its first ``eos_token_id``), their spread."""
        draws = self._draws(num_samples)
        return generation.score(self, input_ids, continuations, attention_mask, draws, eos_token_id, seed)

    def explain(self) -> str:
        """How the draws run and why: the network's route at each input shape (its own forward on
        all the draws' rows together, or one pass per draw), each site of the guide (its rate, or why
        it is a point estimate), and prediction's chunks (recorded under a guard, or eager)."""
        parts = [self.model.explain()]
        if self.guide.prototype_trace is not None:
            parts.append(self.guide.explain())
        parts.append(explain_chunks(self.model, self.guide))
        return "\n".join(parts)

    def probs(self, x: Any, num_samples: int | None = None) -> torch.Tensor:
        """The class probabilities of each draw, ``[T, N, C]`` (``[T, N, *positions, C]``)."""
        pred = self.predict(x, num_samples)
        if "obs" not in pred.probs:
            raise ValueError(
                f"MCDropout.probs: the task is {self.task!r}, whose predictions have no class "
                "probabilities: use predict(x).means['obs'] (and .variances)"
            )
        return pred.probs["obs"]

    def evaluate(self, x: Any, y: torch.Tensor | None = None, num_samples: int | None = None) -> Any:
        """The report of :func:`~pyro_dropout.metrics.evaluate` on ``(x, y)``, or on a DataLoader of
        ``(x, y)`` batches, scored a batch at a time (:func:`~pyro_dropout.metrics.merge_reports`)."""
        self._need_noise("MCDropout.evaluate")
        data = [(x, y)] if y is not None else _shown(x, "MCDropout.evaluate")
        reports, targets = [], []
        for xb, yb in data:
            if yb is None:
                raise ValueError("MCDropout.evaluate: give the targets (y) or a DataLoader of (x, y) batches")
            self._ready(xb, yb)
            reports.append(evaluate(self.model, self.guide, xb, yb, num_samples=self._draws(num_samples)))
            targets.append(yb)
        return reports[0] if len(reports) == 1 else merge_reports(reports, torch.cat(targets))

    def ood(self, x_in: Any, x_out: Any, num_samples: int | None = None) -> dict[str, dict[str, float]]:
        """AUROC, AUPR and the FPR at 95% TPR of each uncertainty score (entropy, mutual information,
        variation ratio, 1 - max probability) at telling ``x_out`` (out of distribution) from
        ``x_in``; each a tensor or a DataLoader, streamed (a point's scores are kept, not its draws).
        With a class per position, each point's scores are its positions' mean."""
        scores = [self._scores(x, num_samples, "MCDropout.ood") for x in (x_in, x_out)]
        s_in, s_out = scores
        return {
            k: {
                "auroc": auroc(s_out[k], s_in[k]),
                "aupr": aupr(s_out[k], s_in[k]),
                "fpr95": fpr_at_tpr(s_out[k], s_in[k]),
            }
            for k in s_in
        }

    def dropout_rates(self) -> dict[str, dict[str, float]]:
        """What drops in the MC draws: ``"network"``, every dropout of the network with its rate (each
        acts in the draws as in the network's own MC dropout): its dropout modules, the dropout
        inside a module (an attention's, a recurrent layer's between its layers, a graph attention's:
        a module's ``dropout`` rate, named ``"name (inside)"``) and the ``F.dropout`` calls of its
        forward (``"forward: dropout_1"``, where torch.fx could trace it); ``"weights"``, the rate
        whose KL each weight's site gets in :meth:`fit` (0 where no dropout sits right before its
        layer)."""
        net = self.model.source_net if self.model.source_net is not None else self.model.net
        modules: tuple[type, ...] = (torch.nn.Dropout, torch.nn.Dropout1d, torch.nn.Dropout2d)
        modules += (torch.nn.Dropout3d, torch.nn.AlphaDropout, torch.nn.FeatureAlphaDropout)
        modules += (LearnedRateDropout,)
        network = {
            name: m.value() if isinstance(m, LearnedRateDropout) else float(cast(Any, m).p)
            for name, m in net.named_modules()
            if isinstance(m, modules)
        }
        for name, module in net.named_modules():
            inside = getattr(module, "dropout", None)  # nn.MultiheadAttention, nn.LSTM, GATConv ...
            if isinstance(inside, int | float) and not isinstance(inside, bool) and inside > 0:
                network[f"{name or type(module).__name__} (inside)"] = float(inside)
        network.update(self.model.functional_dropouts)
        weights = (
            {k: float(v) for k, v in self.guide.dropout_rates().items()}
            if self.guide.prototype_trace is not None
            else {}
        )
        return {"network": network, "weights": weights}

    def plot(self, kind: str, *args: Any, path: str | os.PathLike | None = None, **kwargs: Any) -> Any:
        """A picture of the predictive, returned as a matplotlib figure (and written to ``path``):
        ``plot("reliability", x, y)`` (classification: accuracy against confidence),
        ``plot("band", x, x_train=, y_train=, y_true=)`` (a regression on one feature: the mean ±
        2 predictive sd in half-sd shades), ``plot("ood", x_in, x_out, score="mutual_information")``
        (the score's histograms on both)."""
        figure = pictures.draw(self, kind, *args, **kwargs)
        if path is not None:
            pictures.save(figure, path)
        return figure

    def uncertainty(self, x: Any, num_samples: int | None = None) -> dict[str, torch.Tensor]:
        """Each input's uncertainty, unlabelled ``x`` (a tensor or a DataLoader): ``[N]`` per score,
        higher meaning less certain. Classification: predictive entropy, mutual information,
        variation ratio and 1 - max probability; regression: the epistemic sd (the draws' spread)
        and the total predictive sd."""
        if self.task in ("regression", "heteroscedastic"):
            pred = self.predict(x, num_samples)
            epistemic = pred.means["obs"].var(0, unbiased=False)
            total = epistemic + pred.variances["obs"].mean(0)
            return {"epistemic_sd": epistemic.sqrt(), "predictive_sd": total.sqrt()}
        return self._scores(x, num_samples, "MCDropout.uncertainty")

    def _scores(self, x: Any, num_samples: int | None, where: str) -> dict[str, torch.Tensor]:
        parts = []
        for xb, _ in _shown(x, where):
            parts.append(uncertainty_scores(self.probs(xb, num_samples)))
        return {k: torch.cat([p[k] for p in parts]) for k in parts[0]}
