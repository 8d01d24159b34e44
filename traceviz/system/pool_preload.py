"""Imported only by multiprocessing's fork server (``set_forkserver_preload``), to tie
the pool processes' lives to the CLI's: the server dies with its parent (the CLI), and
every worker it forks dies with the server, from its first instruction on (a worker
forked just as the CLI is killed would otherwise hold the CLI's pipes open for good).
The server's and workers' stderr go to /dev/null: when an import is interrupted while a
worker is being forked, that half-born worker's traceback is noise, not news (a worker's
real errors travel back to the CLI through the pool)."""

import os

from traceviz.system.pools import die_with_parent

die_with_parent()
if os.getppid() != int(os.environ.get("TRACEVIZ_POOL_PARENT", os.getppid())):
    os._exit(1)  # the CLI died while this server was starting, before the line above
_SERVER = os.getpid()


def _child_dies_with_server() -> None:
    die_with_parent()
    if os.getppid() != _SERVER:  # the server died before the line above took effect
        os._exit(1)


os.register_at_fork(after_in_child=_child_dies_with_server)
_null = os.open(os.devnull, os.O_WRONLY)
os.dup2(_null, 2)
os.close(_null)
