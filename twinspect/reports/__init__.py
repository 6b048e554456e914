"""Report writers shared by every capability.

* :mod:`twinspect.reports.table` — :func:`print_table` / :func:`render_table`: rich tables on the terminal.
* :mod:`twinspect.reports.plots` — :func:`heatmap`, :func:`scatter`, :func:`curves`: PNG figures
  (matplotlib from the ``plots`` extra, imported lazily), written atomically.

JSON goes through :func:`twinspect._io.write_json`; capability-specific formats (SARIF and HTML clone
reports, side-by-side PNGs of deviated inputs) live in each capability's own ``report`` module. All
writers write atomically through :mod:`twinspect._io`.
"""

from twinspect.reports.table import print_table, render_table

__all__ = ["print_table", "render_table"]
