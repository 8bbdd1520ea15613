"""Image and tabular networks of the conformance battery, written as their authors write them
(pytorch/examples, torchvision's blocks, blog-post U-Nets), small enough to run 2,000 MC passes."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class MnistNet(nn.Module):
    """pytorch/examples' MNIST network (smaller images): dropout on conv features, then on fc1's."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, 8, 3, 1), nn.Conv2d(8, 16, 3, 1)
        self.dropout1, self.dropout2 = nn.Dropout(0.25), nn.Dropout(0.5)
        self.fc1, self.fc2 = nn.Linear(16 * 4 * 4, 32), nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv2(F.relu(self.conv1(x)))), 2)
        x = torch.flatten(self.dropout1(x), 1)
        return F.log_softmax(self.fc2(self.dropout2(F.relu(self.fc1(x)))), dim=1)


class BasicBlock(nn.Module):
    """torchvision's ResNet BasicBlock."""

    def __init__(self, cin: int, cout: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + (x if self.down is None else self.down(x)))


class ResNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU())
        self.layer1, self.layer2 = BasicBlock(8, 8), BasicBlock(8, 16, 2)
        self.pool, self.drop, self.fc = nn.AdaptiveAvgPool2d(1), nn.Dropout(0.3), nn.Linear(16, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.pool(self.layer2(self.layer1(self.stem(x))))
        return self.fc(self.drop(torch.flatten(h, 1)))


class InvertedResidual(nn.Module):
    """MobileNetV2's block: expand 1x1, depthwise 3x3 (groups = channels), project 1x1, residual."""

    def __init__(self, c: int, expand: int = 4) -> None:
        super().__init__()
        hidden = c * expand
        self.conv = nn.Sequential(
            nn.Conv2d(c, hidden, 1, bias=False),
            nn.BatchNorm2d(hidden),
            nn.ReLU6(inplace=True),
            nn.Conv2d(hidden, hidden, 3, 1, 1, groups=hidden, bias=False),
            nn.BatchNorm2d(hidden),
            nn.ReLU6(inplace=True),
            nn.Conv2d(hidden, c, 1, bias=False),
            nn.BatchNorm2d(c),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(x)


class MobileNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.ReLU6(), InvertedResidual(8))
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(8, 4))  # torchvision's

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(nn.functional.adaptive_avg_pool2d(self.features(x), 1).flatten(1))


class UNet(nn.Module):
    """A two-level U-Net: skip concatenation, Dropout2d at the bottleneck, a class per pixel."""

    def __init__(self, classes: int = 3) -> None:
        super().__init__()
        self.down1 = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU())
        self.down2 = nn.Sequential(nn.Conv2d(4, 8, 3, padding=1), nn.ReLU(), nn.Dropout2d(0.3))
        self.up = nn.ConvTranspose2d(8, 4, 2, stride=2)
        self.mix = nn.Sequential(nn.Conv2d(8, 4, 3, padding=1), nn.ReLU(), nn.Dropout2d(0.2))
        self.out = nn.Conv2d(4, classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d1 = self.down1(x)
        d2 = self.down2(F.max_pool2d(d1, 2))
        return self.out(self.mix(torch.cat([self.up(d2), d1], dim=1)))


class Dropout2dCNN(nn.Module):
    """Channel dropout before a convolution (its input channels) and before a linear layer."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, 6, 3), nn.Conv2d(6, 8, 3)
        self.drop1, self.drop2 = nn.Dropout2d(0.2), nn.Dropout2d(0.3)
        self.fc = nn.Linear(8 * 2 * 2, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.drop1(F.relu(self.conv1(x)))
        h = F.max_pool2d(F.relu(self.conv2(h)), 2)
        return self.fc(self.drop2(h).view(h.size(0), -1))


class Conv1dNet(nn.Module):
    """Conv1d + BatchNorm1d with ``x.view(x.size(0), -1)``."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.bn = nn.Conv1d(2, 4, 3), nn.BatchNorm1d(4)
        self.drop, self.fc = nn.Dropout(0.2), nn.Linear(4 * 8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.bn(self.conv(x)))
        return self.fc(self.drop(h.view(h.size(0), -1)))


class FunctionalRegressor(nn.Module):
    """``F.dropout(h, p, training=self.training)`` in the forward, a regression head."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.c = nn.Linear(4, 32), nn.Linear(32, 32), nn.Linear(32, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.dropout(F.relu(self.a(x)), 0.2, training=self.training)
        h = F.dropout(torch.tanh(self.b(h)), 0.3, training=self.training)  # before tanh's output
        return self.c(h)


class DropoutTwice(nn.Module):
    """One dropout module called twice (a common idiom): on the hidden layer and before the head."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2, self.head = nn.Linear(5, 24), nn.Linear(24, 24), nn.Linear(24, 3)
        self.dropout = nn.Dropout(0.4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.dropout(F.relu(self.fc1(x)))
        return self.head(self.dropout(F.relu(self.fc2(h))))


class Tabular(nn.Module):
    """Two inputs (numbers, a category) as such nets are written."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(6, 4)
        self.body = nn.Sequential(nn.Linear(3 + 4, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 1))

    def forward(self, numbers: torch.Tensor, category: torch.Tensor) -> torch.Tensor:
        return self.body(torch.cat([numbers, self.embed(category)], dim=1))


class OneInput(nn.Module):
    """The wrapper the library's error names: one tensor in, split inside."""

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x[:, :3], x[:, 3].long())


class TwoHeads(nn.Module):
    """A heteroscedastic MC-dropout net: a mean head and a log-variance head."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Dropout(0.2))
        self.mean, self.log_var = nn.Linear(16, 1), nn.Linear(16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.body(x)
        return torch.cat([self.mean(h), self.log_var(h)], dim=1)


class ResidualMLP(nn.Module):
    """Dropout inside residual branches, layer norm, a reused layer."""

    def __init__(self) -> None:
        super().__init__()
        self.inp, self.norm = nn.Linear(3, 16), nn.LayerNorm(16)
        self.block = nn.Sequential(nn.Linear(16, 16), nn.GELU(), nn.Dropout(0.2))
        self.out = nn.Linear(16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        h = h + self.block(self.norm(h))
        h = h + self.block(self.norm(h))  # the same block again: its dropout draws again
        return self.out(h)


def trailing() -> nn.Module:
    return nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 2), nn.Dropout(0.3))


def selu_net() -> nn.Module:
    """A self-normalising network with alpha dropout (Klambauer et al.)."""
    return nn.Sequential(nn.Linear(4, 16), nn.SELU(), nn.AlphaDropout(0.2), nn.Linear(16, 1))


class LoopedDropout(nn.Module):
    """The issue's idiom: a loop over an nn.Sequential with F.dropout after every layer that is not
    an nn.Linear (``type(layer) != nn.Linear``): converted layers of other classes dropped after every
    layer (an MC sd 1.45x the network's own)."""

    def __init__(self, p: float = 0.1) -> None:
        super().__init__()
        self.p, self.nn = p, nn.Sequential(nn.Linear(8, 50), nn.ReLU(), nn.Linear(50, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.dropout(x, p=self.p, training=self.training)
        for layer in self.nn:
            x = layer(x)
            if type(layer) != nn.Linear:  # noqa: E721  (the idiom as users write it)
                x = F.dropout(x, p=self.p, training=self.training)
        return x


class UnscaledDepth(nn.Module):
    """Stochastic depth that does not rescale: each row keeps a residual branch with probability
    0.7, unscaled, in training (``torch.rand``, no dropout function); in eval the branch times 0.7.
    An operation not known to be a dropout is random all the same."""

    def __init__(self) -> None:
        super().__init__()
        self.inp, self.block, self.out = nn.Linear(4, 16), nn.Linear(16, 16), nn.Linear(16, 1)
        self.keep = 0.7

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.inp(x))
        branch = torch.relu(self.block(h))
        if self.training:
            kept = (torch.rand(h.shape[0], 1, device=h.device) < self.keep).to(h.dtype)
            h = h + kept * branch
        else:
            h = h + self.keep * branch
        return self.out(h)
