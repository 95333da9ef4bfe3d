"""Every widget draws its data in JupyterLab 4, ten renders in a row, and fits its box.

A notebook (``lab_harness.WIDGET_CELLS``) builds a small merge-on-read table (upserts, a
compaction scheduled and executed, a write stopped after its markers), a table two writers
raced on, a partial-update table three streams wrote and a table a Kafka sink's rounds
committed, and displays the timeline, file layout, transactions (of the raced table), markers,
provenance and Kafka monitor widgets and ``display(t)``, whose Timeline tab the test opens.
Each render is checked from the DOM: inside each widget's container plotly drew the points of
every trace each of the widget's figures holds (the test builds the same widgets from the
tables on disk to know them), with a non-zero size on screen, not empty axes, and each shown
figure is drawn no wider than its box. Renders alternate between a fresh run (kernel
restarted, every cell run through JupyterLab's command registry, the notebook saved with its
widget state) and a fresh page load of the executed notebook (the widget manager restores every
model from the kernel at once). A console error from the widgets (``[anywidget] Failed to
initialize model``) or any page error fails the test (``lab_harness.assert_widgets_render``;
``tests/widgets/test_notebook7.py`` does the same in Notebook 7)."""

from __future__ import annotations

import pytest
from lab_harness import assert_widgets_render, require_lab

pytestmark = pytest.mark.browser


def test_every_widget_draws_its_data_in_jupyterlab_ten_renders_in_a_row(tmp_path):
    require_lab("lab")
    assert_widgets_render(tmp_path, "lab")
