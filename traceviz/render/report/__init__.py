"""``traceviz report``'s writers: a report's figures, assembled before
(``analyses/shown/``), drawn as Markdown or one explorable HTML file.

``run_sections.py`` (``build_report``: the runs side by side, MPE, AMP) and
``sweep_sections.py`` turn the figures into sections, ``job_sections.py`` a job's;
``report_section.py`` holds the section and writes it as Markdown or HTML.
``html_page.py`` is the explorable page (Bokeh), with a run's tables in ``kernel_tables.py``,
its step in ``step_timeline.py`` and its user ranges in ``range_tracks.py``.
"""

from traceviz.render.report.report_section import Section, md_table, section_html, to_markdown
from traceviz.render.report.run_sections import build_report

__all__ = ["Section", "build_report", "md_table", "section_html", "to_markdown"]
