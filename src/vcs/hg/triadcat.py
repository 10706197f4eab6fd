"""Triad's raw file reader for Mercurial: writes one file's data at one changeset, as `hg cat`
prints it, preceded by its size in decimal and a newline, so the server knows the Content-Length
before it sends a byte and the file is read once.

    python3 triadcat.py REPO NODE PATH [HEAD]

With HEAD (a byte count), the server may hand the response's connection to this process: after
the size line it writes only the first HEAD bytes and waits for one line on standard input.
`socket` -> the whole file is written to fd 3 (the client's connection, the response's headers
already sent; the descriptor is non-blocking, shared with the server: a full socket buffer is
waited for with poll); `pipe` -> the rest goes to standard output as without HEAD.

NODE is the full changeset id the contents reader resolved; PATH is relative to the repository
root. The size is that of the data itself: a file's first revision may carry copy metadata, and a
file whose data starts with the bytes "\\1\\n" is stored behind an empty metadata block, so the
revlog's own size of such a revision is not the file's size.
"""
import os
import select
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
    if len(sys.argv) < 5:
        out.write(data)
        out.flush()
        return
    head = int(sys.argv[4])
    out.write(data[:head])
    out.flush()
    told = sys.stdin.buffer.readline()
    if told == b'socket\n':
        write_all(3, data)
    elif told == b'pipe\n':
        out.write(data[head:])
        out.flush()
    else:
        sys.exit(1)


def write_all(fd, data):
    """Writes every byte to a non-blocking descriptor, polling while its buffer is full."""
    view = memoryview(data)
    poll = select.poll()
    poll.register(fd, select.POLLOUT)
    while view:
        try:
            n = os.write(fd, view)
        except BlockingIOError:
            poll.poll()
            continue
        view = view[n:]


if __name__ == '__main__':
    main()
