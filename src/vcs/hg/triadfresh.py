"""Triad's extension for plain command servers (src/vcs/hg/cmdserver.ts, `runcommand`).

Before each `runcommand`, Mercurial invalidates the repository object the server holds, a
filtered view; caches kept on the unfiltered repository (tags, among them `tip`) would survive
and a command run with `--hidden` would print the state of an earlier command. This extension
drops those too, so every command sees the repository as it is on disk.
"""
from mercurial import commandserver

_orig = commandserver.server.capabilities[b'runcommand']


def _runcommand(self):
    if self.repo is not None:
        self.repo.unfiltered().invalidatecaches()
    return _orig(self)


def uisetup(ui):
    # the server dispatches through this table, not through the method
    commandserver.server.capabilities[b'runcommand'] = _runcommand
