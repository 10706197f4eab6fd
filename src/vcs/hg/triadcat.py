"""Triad's raw file reader for Mercurial: writes one file's data at one changeset, as `hg cat`
prints it, preceded by its size in decimal and a newline, so the server knows the Content-Length
before it sends a byte and the file is read once.

    python3 triadcat.py REPO NODE PATH

NODE is the full changeset id the contents reader resolved; PATH is relative to the repository
root. The size is that of the data itself: a file's first revision may carry copy metadata, and a
file whose data starts with the bytes "\\1\\n" is stored behind an empty metadata block, so the
revlog's own size of such a revision is not the file's size.
"""
import os
import sys

from mercurial import demandimport

demandimport.enable()

from mercurial import hg, node as nodemod, ui as uimod  # noqa: E402


def main():
    repo_path, node, path = (os.fsencode(a) for a in sys.argv[1:4])
    u = uimod.ui.load()
    u.setconfig(b'ui', b'report_untrusted', b'false')
    repo = hg.repository(u, repo_path)
    ctx = repo[nodemod.bin(node)]
    data = ctx.filectx(path).data()
    out = sys.stdout.buffer
    out.write(b'%d\n' % len(data))
    out.write(data)
    out.flush()


if __name__ == '__main__':
    main()
