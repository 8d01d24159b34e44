"""Imported only by multiprocessing's fork server (``set_forkserver_preload``): ties the
server's life to its parent's, so a killed ``traceviz import`` leaves no server behind
(the decode workers it forks tie theirs to it: ``jsonstream.worker_init``), and sends
the server's and workers' stderr to /dev/null: when an import is interrupted while a
worker is being forked, that half-born worker's traceback is noise, not news (a worker's
real errors travel back to the CLI through the pool)."""

import os

from traceviz.parsers.jsonstream import die_with_parent

die_with_parent()
_null = os.open(os.devnull, os.O_WRONLY)
os.dup2(_null, 2)
os.close(_null)
