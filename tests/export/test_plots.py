import matplotlib
import torch

from pyro_dropout.export import (
    plot_regression,
    plot_reliability,
    plot_score_histograms,
    plot_softmax_scatter,
)
from pyro_dropout.metrics import reliability_diagram

matplotlib.use("Agg")


def _png(fig, path):
    fig.savefig(path)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_each_plot_renders_to_png(tmp_path):
    g = torch.Generator().manual_seed(0)
    x = torch.linspace(-3, 3, 50)
    _png(
        plot_regression(x, torch.sin(x), 0.1 + x.abs() / 5, x_train=x[10:30], y_train=torch.sin(x[10:30])),
        tmp_path / "a.png",
    )
    probs = torch.softmax(torch.randn(20, 100, 4, generator=g), -1)
    labels = torch.randint(0, 4, (100,), generator=g)
    _png(plot_reliability(reliability_diagram(probs, labels)), tmp_path / "b.png")
    _png(
        plot_score_histograms(
            torch.rand(100, generator=g), 1 + torch.rand(80, generator=g), "mutual information"
        ),
        tmp_path / "c.png",
    )
    _png(
        plot_softmax_scatter(
            torch.randn(50, 8, 10, generator=g), input_labels=[f"{15 * i}°" for i in range(8)]
        ),
        tmp_path / "d.png",
    )


def test_plot_regression_draws_into_a_given_panel(tmp_path):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2)
    x = torch.linspace(-3, 3, 50)
    for ax, title in zip(axes, ("left", "right"), strict=True):
        assert plot_regression(x, torch.sin(x), 0.1 + x.abs() / 5, ax=ax, title=title) is fig
    assert [ax.get_title() for ax in axes] == ["left", "right"]
    assert all(len(ax.collections) == 4 for ax in axes)  # one shade per half sd, to 2 sd
    _png(fig, tmp_path / "panels.png")


def test_the_softmax_scatter_shows_every_class_that_tops_an_input():
    """Class 3 is the most probable one at the last input only, with a low mean over the sequence:
    it is drawn (a printout naming it must find it in the figure), then the top means fill up."""
    logits = torch.zeros(5, 6, 10)
    logits[:, :, 0], logits[:, :, 1], logits[:, :, 2] = 4.0, 3.5, 3.0  # the highest means
    logits[:, 5, 3] = 9.0  # tops input 5 alone
    fig = plot_softmax_scatter(logits, top_k=3)
    labels = [t.get_text() for t in fig.axes[1].get_legend().get_texts()]
    assert labels == ["class 0", "class 3", "class 1"]


def test_the_true_function_is_labelled_as_such_not_as_observations():
    import matplotlib.pyplot as plt

    x = torch.linspace(-3, 3, 50)
    fig = plot_regression(x, torch.sin(x), torch.full((50,), 0.1), y_true=torch.sin(x), x_train=x, y_train=x)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    plt.close(fig)
    assert "true function" in labels and "observed" not in labels
