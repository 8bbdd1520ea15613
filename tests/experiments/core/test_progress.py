"""The commands' bars leave a slow first step (a compile) out of their rate and time left."""

import io
import time

from tqdm import tqdm

from pyro_dropout_experiments.core.progress import Progress


def _left_after_a_slow_first_step(kind):
    bar = kind(total=1000, file=io.StringIO(), mininterval=0, miniters=1)
    time.sleep(0.5)  # the first step compiles
    bar.update()
    for _ in range(3):  # then every step is fast
        bar.update()
    d = bar.format_dict
    rate = d["rate"] or (d["n"] - d["initial"]) / d["elapsed"]
    bar.close()
    return (d["total"] - d["n"]) / rate


def test_the_time_left_leaves_the_first_step_out():
    assert _left_after_a_slow_first_step(tqdm) > 10  # tqdm's own: the first step still in its average
    assert _left_after_a_slow_first_step(Progress) < 2  # what the fast steps take


def test_a_disabled_bar_stays_quiet():
    out = io.StringIO()
    with Progress(total=3, disable=True, file=out) as bar:
        bar.update()
        bar.update()
    assert out.getvalue() == ""
