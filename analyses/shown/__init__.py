"""What a command shows, assembled from the analyses before a renderer draws it.

A report's figures (``report_data.py``: the runs side by side, MPE, AMP, sweeps), the
explorable report's per-run extras (``html_runs.py``: a step's timeline, the critical
path, findings and scenarios, the kernel differences) and a Perfetto export's tracks
(``perfetto_tracks.py``) are small result objects: the renderers under
``traceviz/render/`` take them and draw, and call no analysis.
"""
