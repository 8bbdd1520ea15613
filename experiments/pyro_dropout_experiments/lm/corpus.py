"""The two domains' text: the docstrings of Python's standard library and of PyTorch, read from
the installed packages (``inspect.getdoc`` of each module, its classes, functions and methods), as
ASCII characters (one token each: a vocabulary of 128)."""

from __future__ import annotations

import hashlib
import importlib
import inspect
from dataclasses import dataclass

import torch

__all__ = ["DOMAINS", "VOCABULARY", "Domain", "docstrings", "sequences", "shuffled"]

VOCABULARY = 128
DOMAINS = {
    "stdlib": (
        "argparse", "asyncio", "collections", "csv", "datetime", "decimal", "email", "fractions",
        "functools", "http.client", "inspect", "itertools", "json", "logging", "os", "pathlib",
        "random", "re", "shutil", "statistics", "string", "subprocess", "tarfile", "textwrap",
        "threading", "typing", "unittest", "urllib.request", "xml.etree.ElementTree", "zipfile",
    ),
    "torch": (
        "torch.nn", "torch.nn.functional", "torch.optim", "torch.distributions", "torch.utils.data",
        "torch.linalg", "torch.fft", "torch.special", "torch.autograd", "torch.nn.utils",
    ),
}  # fmt: skip


@dataclass(frozen=True)
class Domain:
    name: str
    text: str

    @property
    def digest(self) -> str:
        """The text's SHA-256 (the packages' versions change it: the results record it)."""
        return hashlib.sha256(self.text.encode()).hexdigest()


def docstrings(name: str) -> Domain:
    """The docstrings of the domain's modules and their members, each once, in a fixed order."""
    seen: set[str] = set()
    parts: list[str] = []
    for module_name in DOMAINS[name]:
        module = importlib.import_module(module_name)
        for doc in _docs(module):
            if doc not in seen and len(doc) > 40:
                seen.add(doc)
                parts.append(doc)
    text = "\n\n".join(parts).encode("ascii", "replace").decode("ascii")
    return Domain(name, text)


def _docs(module: object) -> list[str]:
    found = [inspect.getdoc(module) or ""]
    for _, member in sorted(inspect.getmembers(module), key=lambda kv: kv[0]):
        if getattr(member, "__module__", "") != module.__name__:  # type: ignore[attr-defined]
            continue
        found.append(inspect.getdoc(member) or "")
        if inspect.isclass(member):
            for _, method in sorted(vars(member).items()):
                if callable(method) or isinstance(method, property):
                    found.append(inspect.getdoc(method) or "")
    return found


def sequences(domain: Domain, length: int) -> torch.Tensor:
    """The text cut into sequences of ``length`` characters (token ids ``[M, length]``)."""
    codes = torch.tensor(list(domain.text.encode("ascii")), dtype=torch.long)
    count = len(codes) // length
    return codes[: count * length].reshape(count, length)


def shuffled(seqs: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Each sequence's characters in a random order: its letters, no language."""
    order = torch.stack([torch.randperm(seqs.shape[1], generator=generator) for _ in range(len(seqs))])
    return seqs.gather(1, order)
