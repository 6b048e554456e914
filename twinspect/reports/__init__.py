"""Report writers shared by every capability.

* :func:`twinspect.reports.table.print_table` — a rich table on the terminal.
* :func:`twinspect.reports.write_report` — one entry point writing ``json`` (any capability) or a
  capability-specific format through a registered writer, always atomically.

Capabilities register extra formats (SARIF and HTML for clone reports, PNG side-by-side images for
deviated inputs) in their own modules; the atomic-write machinery lives in :mod:`twinspect._io`.
"""

from twinspect.reports.table import print_table, render_table

__all__ = ["print_table", "render_table"]
