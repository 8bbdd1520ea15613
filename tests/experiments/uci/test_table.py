"""The UCI results table and figure."""

import pytest

from pyro_dropout_experiments.uci import (
    label,
    markdown_table,
    parse_label,
    plot_uci,
    summarise,
    verdict,
)


def test_labels_and_results_made_before_the_setting():
    assert label("mc-dropout", True) == "mc-dropout" and label("mc-dropout", False) == "mc-dropout-per-draw"
    assert label("sgp", False) == "sgp" and label("mfvi", True) == "mfvi"  # no masks, one name
    assert parse_label("bbalpha-0.5-per-draw") == ("bbalpha-0.5", False, 1, True, False)
    assert parse_label("bbalpha-0.5") == ("bbalpha-0.5", True, 1, True, False)
    # more hidden layers than the protocol's one: a suffix after the masks'
    assert label("mc-dropout", False, 2) == "mc-dropout-per-draw-2-layers"
    assert label("sgp", True, 2) == "sgp"  # a GP has no layers
    assert label("mc-dropout", True, 1, False) == "mc-dropout-grid-network"
    for args in [("concrete", True, 2, True), ("mc-dropout", False, 3, False), ("hmc", True, 2, True)]:
        assert parse_label(label(*args)) == (*args, False)
    assert (
        label("mc-dropout", False, 2, False, True) == "mc-dropout-per-draw-2-layers-grid-network-own-tau-grid"
    )
    assert parse_label("mc-dropout-per-draw-2-layers-grid-network-own-tau-grid") == (
        "mc-dropout",
        False,
        2,
        False,
        True,
    )
    assert parse_label("mfvi") == ("mfvi", True, 1, True, False)
    # a result file without the setting was trained with one mask per draw
    row = {"dataset": "d", "method": "mc-dropout", "rmse": 1.0, "rmse_standard": 1.0, "test_ll": -1.0}
    assert set(summarise([{**row, "settings": {"seed": 0}}])) == {("d", "mc-dropout-per-draw")}


def test_wall_time_cells_say_which_runs_were_on_a_gpu():
    def row(split, device):
        settings = {"per_example_masks": True, "device": device}
        row = {"dataset": "d", "method": "sgp", "split": split, "rmse": 1.0, "rmse_standard": None}
        return row | {"test_ll": -1.0, "protocol_seconds": 120.0, "settings": settings}

    def timing_row(rows):
        return next(line for line in markdown_table(rows).splitlines() if line.startswith("| d | 2 · "))

    assert timing_row([row(0, "cpu"), row(1, "cpu")]) == "| d | 2 · 2.0 min |"
    assert timing_row([row(0, "cuda"), row(1, "cuda:0")]) == "| d | 2 · 2.0 min (GPU) |"
    assert timing_row([row(0, "cpu"), row(1, "cuda")]) == "| d | 2 · 2.0 min (1 split on a GPU) |"
    assert summarise([row(0, "cuda")])[("d", "sgp")]["gpu_splits"] == 1


def test_runs_made_in_several_groups_list_each_group():
    def row(split, seconds, resumed=0.0):
        settings = {"per_example_masks": True}
        row = {"dataset": "d", "method": "sgp", "split": split, "rmse": 1.0, "rmse_standard": None}
        row |= {"test_ll": -1.0, "protocol_seconds": seconds, "resumed_training_seconds": resumed}
        return row | {"settings": settings}

    # splits 0-2 and 5 trained in one command (90 s), 3-4 in another that resumed 30 s of training
    rows = [row(0, 90.0), row(1, 90.0), row(2, 90.0), row(5, 90.0), row(3, 150.0, 30.0), row(4, 150.0, 30.0)]
    s = summarise(rows)[("d", "sgp")]
    assert s["protocol_seconds"] == 240.0 and s["splits"] == 6
    assert [g["splits"] for g in s["groups"]] == [[0, 1, 2, 5], [3, 4]]
    table = markdown_table(rows)
    assert "| d | sgp | 2 | 0-2, 5: 1.5 min; 3-4: 2.5 min (0.5 before a resume) |" in table
    # one group: nothing to list
    assert "several groups" not in markdown_table(rows[:4])


def test_verdict_against_the_published_figures():
    naval = (0.00, 0.00, 4.45, 0.00)  # published, rounded to two decimals

    def ours(rmse, rmse_se, ll, ll_se):
        return {"rmse": (rmse, rmse_se), "test_ll": (ll, ll_se)}

    # 0.0017 rounds to the published 0.00; 0.006 does not, even within its standard error
    assert verdict(ours(0.0017, 0.0002, 4.45, 0.01), naval) == "RMSE ✓, LL ✓"
    assert verdict(ours(0.0060, 0.0005, 4.40, 0.01), naval) == "RMSE ✗, LL ✗"
    # within one standard error, or better, counts as a match
    boston = (2.90, 0.18, -2.40, 0.04)
    assert verdict(ours(3.00, 0.11, -2.43, 0.03), boston) == "RMSE ✓, LL ✓"
    assert verdict(ours(3.00, 0.09, -2.30, float("nan")), boston) == "RMSE ✗, LL ✓"


def test_a_cell_over_fewer_splits_says_how_many():
    def row(method, split, ll):
        return {
            "dataset": "kin8nm",
            "method": method,
            "split": split,
            "rmse": 0.08,
            "rmse_standard": 0.08,
            "test_ll": ll,
            "per_example_masks": True,
            "settings": {"per_example_masks": True},
        }

    rows = [row("mc-dropout", i, 1.1 + 0.01 * i) for i in range(4)] + [
        row("bbalpha-1", i, 1.2) for i in (0, 1)
    ]
    table = markdown_table(rows)
    ll_row = next(
        line for line in table[table.index("log-likelihood") :].splitlines() if line.startswith("| kin8nm |")
    )
    cells = ll_row.split(" | ")
    assert "(2/4)" in ll_row and "1.200 ± 0.000 (2/4)" in cells  # the partial column, marked
    assert "**1.115 ± 0.006**" in cells  # the full column, unmarked, and the best of the full runs


def test_cells_give_each_mean_to_the_precision_of_its_error():
    """A data set's decimals show its smallest standard error to one significant figure (2 to 5):
    naval-sized RMSEs must not all print as 0.001 ± 0.000 / 0.000 ± 0.000."""

    def row(dataset, method, split, rmse, ll):
        return {
            "dataset": dataset,
            "method": method,
            "split": split,
            "rmse": rmse,
            "rmse_standard": rmse,
            "test_ll": ll,
            "per_example_masks": True,
            "settings": {"per_example_masks": True},
        }

    rows = []
    for i in range(4):
        rows += [
            row("naval-propulsion-plant", "mc-dropout", i, 0.0008 + 0.0001 * (i % 2), 4.44 + 0.002 * i),
            row("naval-propulsion-plant", "ensemble", i, 0.0004, 7.4),  # equal values: se 0
            row("bostonHousing", "mc-dropout", i, 2.5 + 0.4 * i, -2.4 - 0.1 * i),
        ]
    table = markdown_table(rows)

    def cells(section, dataset):
        text = table[table.index(section) :]
        return next(line for line in text.splitlines() if line.startswith(f"| {dataset} |")).split(" | ")

    naval_rmse = cells("Test RMSE", "naval-propulsion-plant")
    # se of the mc-dropout RMSE is 0.0000289: five decimals; the ensemble's 0.0004 stays visible
    ensemble = cells("Test RMSE", "data set").index("ensemble")
    assert naval_rmse[1] == "0.00085 ± 0.00003" and naval_rmse[ensemble] == "**0.00040 ± 0.00000**"
    naval_ll = cells("log-likelihood", "naval-propulsion-plant")
    assert naval_ll[1] == "4.443 ± 0.001"  # se 0.00129: three decimals (not bold: 7.4 is best)
    assert cells("Test RMSE", "bostonHousing")[1] == "**3.10 ± 0.26**"  # se 0.258: the two-decimal floor
    assert cells("log-likelihood", "bostonHousing")[1] == "**-2.55 ± 0.06**"  # the only run: the best
    # the published columns stay at their own two decimals
    assert cells("Test RMSE", "bostonHousing")[-1] == "2.90 ± 0.18 |"
    # the standard-dropout table uses the RMSE row's decimals
    assert "| naval-propulsion-plant | 0.00085 ± 0.00003 | 0.00085 ± 0.00003 | 4 |" in table


def test_plot_uci_panels_and_errors():
    rows = [
        {"dataset": d, "method": m, "split": i, "rmse": 1.0 + i, "rmse_standard": 1.0, "test_ll": -1.0 - i}
        for d in ("bostonHousing", "other")
        for m in ("mc-dropout", "sgp")
        for i in range(3)
    ]
    fig = plot_uci(rows, "rmse")
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in visible] == ["bostonHousing", "other"]
    # the published band is drawn where the data set has one: 2.90 ± 0.18 for Boston
    assert [line.get_xdata()[0] for line in visible[0].lines if line.get_label().startswith("MC")] == [2.90]
    assert not [line for line in visible[1].lines if line.get_label().startswith("MC")]
    # one data set: the caption is inside the figure, not cut off at its edges
    single = plot_uci([r for r in rows if r["dataset"] == "other"])
    single.canvas.draw()
    (caption,) = [text for text in single.texts if text.get_text().startswith("test log-likelihood")]
    box, frame = caption.get_window_extent(), single.bbox
    assert frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0
    with pytest.raises(ValueError, match="metric"):
        plot_uci(rows, "nll")
    with pytest.raises(ValueError, match="no results"):
        plot_uci([])


def test_learned_rates_per_layer_in_split_order_and_their_figure():
    from pyro_dropout_experiments.uci import learned_rates, plot_learned_rates

    def row(dataset, split, p_in, p_out, method="concrete", masks=True):
        rates = {"hidden.0.weight": p_in, "output.weight": p_out}
        settings = {"per_example_masks": masks}
        return {
            "dataset": dataset,
            "method": method,
            "split": split,
            "learned_p": rates,
            "settings": settings,
        }

    rows = [
        row("a", 1, 1e-3, 0.3),
        row("a", 0, 2e-3, 0.2),
        row("b", 0, 0.0, 0.1),
        row("a", 0, 0.5, 0.5, masks=False),
    ]
    rows.append({"dataset": "a", "method": "mc-dropout", "split": 0, "settings": {"per_example_masks": True}})
    rates = learned_rates(rows)
    assert rates == {"a": {"hidden.0.weight": [2e-3, 1e-3], "output.weight": [0.2, 0.3]},
                     "b": {"hidden.0.weight": [0.0], "output.weight": [0.1]}}  # fmt: skip
    assert learned_rates(rows, "concrete-per-draw")["a"]["output.weight"] == [0.5]
    fig = plot_learned_rates(rows)
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in visible] == ["a", "b"]
    first = visible[0].lines
    assert [line.get_label() for line in first] == [
        "input layer (hidden.0.weight)",
        "output layer (output.weight)",
    ]
    assert list(visible[1].lines[0].get_ydata()) == [1e-8]  # p = 0 drawn at the axis floor
    with pytest.raises(
        ValueError, match=r"no results of method 'bbalpha-0.5'.*'concrete', 'concrete-per-draw'"
    ):
        learned_rates(rows, "bbalpha-0.5")


def test_a_copy_of_a_split_is_refused_not_averaged_twice_and_other_files_are_not_results(tmp_path):
    import json

    from pyro_dropout_experiments.uci.table import collect

    row = {"dataset": "d", "method": "sgp", "split": 0, "rmse": 5.0, "test_ll": -1.0, "settings": {}}
    (tmp_path / "d_sgp_split00.json").write_text(json.dumps(row))
    (tmp_path / "d_sgp_split01.json").write_text(json.dumps(row | {"split": 1, "rmse": 1.0}))
    # another command's results and a waiting grid search are not rows of the table
    (tmp_path / "results.json").write_text(json.dumps({"command": "mnist ood", "methods": {}}))
    (tmp_path / "d_sgp_split02.grid.json").write_text("{}")
    assert sorted(r["split"] for r in collect(tmp_path)) == [0, 1]
    (tmp_path / "copy").mkdir()
    (tmp_path / "copy" / "d_sgp_split00.json").write_text(json.dumps(row))
    with pytest.raises(ValueError, match=r"both hold split 0 of d sgp: the table would count it twice"):
        collect(tmp_path)


def test_the_headline_tables_bold_the_best_within_one_se_and_the_variants_follow():
    def row(method, split, rmse, ll, **settings):
        return {
            "dataset": "concrete",
            "method": method,
            "split": split,
            "rmse": rmse,
            "rmse_standard": rmse,
            "test_ll": ll,
            "settings": {"per_example_masks": True, **settings},
        }

    rows = []
    for i in range(4):
        rows += [
            row("mc-dropout", i, 5.2 + 0.2 * (i % 2), -3.0),  # rmse 5.3 +- 0.058: not within one se
            row(
                "concrete", i, 5.05, -2.9 + 0.02 * (i % 2)
            ),  # within one se of the best rmse? no: 5.05 > 5.1 - 0
            row("mfvi", i, 6.0, -3.2),
            row("mc-dropout", i, 4.0, -2.0, per_example_masks=False),  # a variant: best, but not a headline
        ]
    table = markdown_table(rows)
    head, variants = table.split("### Variants: test RMSE")
    rmse = next(
        line for line in head[head.index("Test RMSE") :].splitlines() if line.startswith("| concrete |")
    )
    cells = rmse.split(" | ")
    assert cells[1:4] == ["5.30 ± 0.06", "**5.05 ± 0.00**", "6.00 ± 0.00"]  # 5.30 - 0.06 > 5.05
    ll = next(
        line for line in head[head.index("log-likelihood") :].splitlines() if line.startswith("| concrete |")
    )
    assert ll.split(" | ")[2] == "**-2.890 ± 0.006**"
    assert "mc-dropout-per-draw" not in head and "| concrete | 4.00 ± 0.00 |" in variants


def test_a_quick_run_is_said_to_be_one_and_nothing_is_marked_best_or_checked():
    def row(method, split, rmse, settings):
        return {
            "dataset": "bostonHousing", "method": method, "split": split, "rmse": rmse,
            "rmse_standard": rmse, "test_ll": -2.4, "protocol_seconds": 60.0,
            "settings": {"per_example_masks": True, **settings},
        }  # fmt: skip

    full = {"epochs_multiplier": 100, "num_samples": 10_000}
    quick = {"epochs_multiplier": 10, "num_samples": 1000}
    rows = [row(m, s, 2.8 + s / 10, full) for m in ("mc-dropout", "sgp") for s in range(3)]
    table = markdown_table(rows)
    assert "Shorter runs than the protocol's" not in table and "**" in table and "RMSE ✓" in table
    table = markdown_table([row(m, s, 2.8 + s / 10, quick) for m in ("mc-dropout", "sgp") for s in range(3)])
    assert table.startswith("**Shorter runs than the protocol's** (`--quick`")
    assert "±" in table and "**2" not in table and "✓" not in table and "✗" not in table
    assert "Splits run and wall time" not in markdown_table(rows, full=False)


def test_a_panel_lists_only_the_methods_run_on_its_data_set():
    rows = [
        {"dataset": d, "method": m, "split": 0, "rmse": 1.0, "rmse_standard": 1.0, "test_ll": -1.0}
        for d, ms in {"bostonHousing": ("mc-dropout", "sgp", "hmc"), "other": ("sgp",)}.items()
        for m in ms
    ]
    fig = plot_uci(rows)
    labels = {
        ax.get_title(): [t.get_text() for t in ax.get_yticklabels()] for ax in fig.axes if ax.get_visible()
    }
    assert labels["other"] == ["sgp"] and len(labels["bostonHousing"]) == 3  # no empty rows
    assert all(len(ax.get_xticks()) <= 6 for ax in fig.axes if ax.get_visible())  # few, readable ticks
