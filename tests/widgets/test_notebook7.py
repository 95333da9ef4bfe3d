"""Every widget draws its data in Notebook 7, ten renders in a row, and fits its box.

The JupyterLab test's check (``tests/widgets/test_jupyterlab.py``, ``lab_harness.
assert_widgets_render``) on ``jupyter notebook`` 7: the widget notebook open on its own page
(``/notebooks/widgets.ipynb``), run through Notebook 7's command registry
(``notebook:run-all-cells``; Notebook 7 is built from JupyterLab's components and exposes the
same ``window.jupyterapp``), every widget and ``display(t)``'s Timeline tab checked from the DOM
after each of ten renders (fresh runs and page loads in turn): plotly drew the points of every
trace each of a widget's figures holds (the provenance widget's heatmap a label per cell, the
Kafka monitor's two figures) with a non-zero size, and each figure is no wider than its box. A console error from the
widgets or a page error fails the test, but for one known race in Notebook 7's own shortcuts
plugin (``lab_harness.FRONT_ENDS``)."""

from __future__ import annotations

import pytest
from lab_harness import assert_widgets_render, require_lab

pytestmark = pytest.mark.browser


def test_every_widget_draws_its_data_in_notebook7_ten_renders_in_a_row(tmp_path):
    require_lab("notebook")
    assert_widgets_render(tmp_path, "notebook")
