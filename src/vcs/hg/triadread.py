"""Triad contents reader for "hg serve --cmdserver pipe": the "triadread" server command
answers one contents read (a JSON line, then for "blob" the raw file bytes)."""
import json
import os

from mercurial import commandserver, context, error, extensions, localrepo, match as matchmod, node as nodemod, patch, registrar, scmutil

cmdtable = {}
command = registrar.command(cmdtable)
_orders = {}
# History is immutable: parsed manifests (by manifest node) and changeset fields (by node) are
# kept across commands in this process; tags are looked up per read since they can move.
_manifests = {}
_entries = {}
# file sizes by (path, file node): a node names one content for good, so entries never go stale.
# Mercurial reads a file's whole first revision to answer its size (it looks for copy metadata),
# which made every tree listing beside a large file as slow as reading that file.
_sizes = {}


def _remember(cache, key, value, limit):
    cache[key] = value
    while len(cache) > limit:
        del cache[next(iter(cache))]
    return value


def _manifest(ctx):
    key = ctx.manifestnode()
    mf = _manifests.pop(key, None)
    if mf is None:
        mf = ctx.manifest()
    return _remember(_manifests, key, mf, 16)


def _size(ctx, path, fnode):
    key = (path, fnode)
    size = _sizes.get(key)
    if size is None:
        size = _remember(_sizes, key, ctx.filectx(path, fileid=fnode).size(), 100000)
    return size


# small files' contents by (path, file node), which name one content for good: reads of a file at
# nearby revisions mostly find the same file revision, rebuilt from its deltas only once. Bounded
# by bytes, since every repository with a live reader has its own process.
_texts = {}
_TEXT_MAX = 32 * 1024
_TEXTS_BYTES = 2 * 1024 * 1024
_texts_bytes = [0]


def _data(ctx, path, fnode):
    key = (path, fnode)
    data = _texts.pop(key, None)
    if data is None:
        data = ctx.filectx(path, fileid=fnode).data()
        if len(data) > _TEXT_MAX:
            return data
        _texts_bytes[0] += len(data)
        while _texts and _texts_bytes[0] > _TEXTS_BYTES:
            _texts_bytes[0] -= len(_texts.pop(next(iter(_texts))))
    _texts[key] = data
    return data


# file logs by path: Mercurial makes a new one for every file context (reading its index again, a
# third of a changeset diff's time); what they hold changes only with the changelog, when _fresh
# drops them all. A log keeps the full text of the revision it read last: after each read, the
# logs it used forget a text larger than _TEXT_MAX, so the cache holds at most about
# 128 x (32 KiB + Mercurial's 64 KiB chunk cache) besides the indexes.
_filelogs = {}
_used = set()


def _file(orig, self, f):
    fl = _filelogs.get(f)
    if fl is None:
        fl = _remember(_filelogs, f, orig(self, f), 128)
    _used.add(f)
    return fl


def _trim():
    for f in _used:
        store = getattr(_filelogs.get(f), '_revlog', None)
        text = getattr(store, '_revisioncache', None)
        if text is not None and len(text[2]) > _TEXT_MAX:
            store._revisioncache = None
    _used.clear()


def _s(b):
    return b.decode('utf-8', 'replace')


def _ctx(repo, rev):
    try:
        ctx = scmutil.revsymbol(repo, rev)
    except (error.Abort, error.RepoError, error.LookupError, error.FilteredIndexError, ValueError, KeyError):
        return None, 'revision'
    r = ctx.rev()
    if r is None or r < 0 or r == nodemod.wdirrev:
        if rev == b'tip' and len(repo) == 0:
            return None, 'empty'
        return None, 'revision'
    return ctx, None


def _entry(repo, node):
    e = _entries.get(node)
    if e is None:
        ctx = repo[node]
        e = _remember(_entries, node, {
            'id': _s(ctx.hex()),
            'user': _s(ctx.user()),
            'time': ctx.date()[0],
            'desc': _s(ctx.description()),
            'branch': _s(ctx.branch()),
        }, 50000)
    e = dict(e)
    e['tags'] = [_s(t) for t in repo.nodetags(node) if t != b'tip']
    return e


def _out(ui, obj, data=None):
    head = json.dumps(obj, separators=(',', ':')).encode('utf-8') + b'\n'
    return head if data is None else head + data


def _refs(repo, kind):
    """(name, node) of the refs of one kind, by name: the open named branches at the head their
    name resolves to (as `hg branches` lists them), the bookmarks, the tags but `tip`."""
    if kind == b'branch':
        pairs = [(name, tip) for name, _heads, tip, closed in repo.branchmap().iterbranches() if not closed]
    elif kind == b'bookmark':
        pairs = [(name, node) for name, node in repo._bookmarks.items() if node in repo]
    else:
        pairs = [(name, node) for name, node in repo.tags().items() if name != b'tip' and node in repo]
    return sorted(pairs)


def _answer(ui, repo, op, rev, *args):
    if op == b'refs':
        pairs = _refs(repo, args[0])
        offset, limit = int(args[1]), int(args[2])
        return _out(ui, {'total': len(pairs), 'refs': [[_s(n), _entry(repo, node)] for n, node in pairs[offset:offset + limit]]})
    if op == b'revs':
        # full ids -> revision numbers (the earlier API variant's `rev`); unknown ids left out
        cl = repo.changelog
        found = []
        for h in args:
            try:
                found.append([_s(h), cl.rev(nodemod.bin(h))])
            except (error.LookupError, error.FilteredIndexError, TypeError, ValueError, KeyError):
                pass
        return _out(ui, {'revs': found})
    ctx, err = _ctx(repo, rev)
    if ctx is None:
        return _out(ui, {'error': err})
    if op == b'resolve':
        return _out(ui, {'id': _s(ctx.hex())})
    if op == b'tree':
        path = args[0] if args else b''
        mf = _manifest(ctx)
        if path and path in mf:
            return _out(ui, {'error': 'directory'})
        prefix = path + b'/' if path else b''
        dirs = set()
        files = []
        if prefix and not mf.hasdir(path):
            return _out(ui, {'error': 'path'})
        for f in mf.walk(_prefixmatcher(repo, path)):
            rest = f[len(prefix):]
            slash = rest.find(b'/')
            if slash >= 0:
                dirs.add(rest[:slash])
            else:
                files.append([_s(rest), _size(ctx, f, mf[f])])
        if not files and not dirs and not prefix:
            return _out(ui, {'error': 'empty', 'entries': []})
        return _out(ui, {'dirs': sorted(_s(d) for d in dirs), 'files': files})
    if op == b'blob':
        path = args[0]
        limit = int(args[1]) if len(args) > 1 else -1
        mf = _manifest(ctx)
        if path not in mf:
            return _out(ui, {'error': 'file' if mf.hasdir(path) else 'path'})
        data = _data(ctx, path, mf[path])
        size = len(data)
        if 0 <= limit < size:
            data = data[:limit]
        return _out(ui, {'ok': True, 'size': size}, data)
    if op == b'file':
        # a raw download's check: the file exists (its data is read by triadcat.py, once); a file
        # whose stored revision is at most INLINE bytes (the data is never longer) comes whole
        path = args[0]
        inline = int(args[1]) if len(args) > 1 else -1
        mf = _manifest(ctx)
        if path not in mf:
            return _out(ui, {'error': 'file' if mf.hasdir(path) else 'path'})
        fnode = mf[path]
        flog = repo.file(path)
        # the stored revision's size from the revlog's index (the file's own size() may read it)
        store = getattr(flog, '_revlog', flog)
        if inline < 0 or store.rawsize(flog.rev(fnode)) > inline:
            return _out(ui, {'id': _s(ctx.hex()), 'node': _s(nodemod.hex(fnode))})
        data = _data(ctx, path, fnode)
        if len(data) > inline:  # a flag processor's data (not the stored revision's) may be larger
            return _out(ui, {'id': _s(ctx.hex()), 'node': _s(nodemod.hex(fnode))})
        return _out(ui, {'id': _s(ctx.hex()), 'node': _s(nodemod.hex(fnode)), 'size': len(data)}, data)
    if op == b'log':
        offset, limit = int(args[0]), int(args[1])
        cl = repo.changelog
        node = ctx.node()
        order = _orders.pop(node, None)
        if order is None:
            # Ancestors newest first (descending revision number, as hg log -r 'reverse(::REV)');
            # history is immutable, so the list is kept for a few start revisions.
            order = list(cl.ancestors([ctx.rev()], inclusive=True))
        _orders[node] = order
        while len(_orders) > 8:
            del _orders[next(iter(_orders))]
        node_of = cl.node
        entries = [_entry(repo, node_of(r)) for r in order[offset:offset + limit]]
        return _out(ui, {'total': len(order), 'entries': entries})
    if op == b'changeset':
        e = _entry(repo, ctx.node())
        e.update(_capped_diff(ui, repo, ctx, int(args[0]), int(args[1])))
        return _out(ui, e)
    if op == b'compare':
        # REV is the base; ARGS: head, offset, limit, and the diff caps (-1: no diff)
        head, err = _ctx(repo, args[0])
        if head is None:
            return _out(ui, {'error': err})
        anc, revs = _range(repo, ctx, head)
        offset, limit = int(args[1]), int(args[2])
        node_of = repo.changelog.node
        out = {
            'mergeBase': None if anc == nodemod.nullid else _s(nodemod.hex(anc)),
            'total': len(revs),
            'entries': [_entry(repo, node_of(r)) for r in revs[offset:offset + limit]],
        }
        filemax, totalmax = int(args[3]), int(args[4])
        if filemax >= 0:
            out.update(_capped_diff(ui, repo, head, filemax, totalmax, repo[anc]))
        return _out(ui, out)
    return _out(ui, {'error': 'op'})


# three-dot ranges by (base node, head node): their common ancestor and the revisions only the
# head reaches, oldest first (dropped with the file logs when the changelog changes)
_ranges = {}


def _range(repo, base, head):
    key = (base.node(), head.node())
    r = _ranges.pop(key, None)
    if r is None:
        cl = repo.changelog
        r = (cl.ancestor(base.node(), head.node()), sorted(cl.findmissingrevs([base.rev()], [head.rev()])))
    return _remember(_ranges, key, r, 16)


def _gitmode(flags):
    return b'120000' if b'l' in flags else b'100755' if b'x' in flags else b'100644'


def _capped_diff(ui, repo, ctx, filemax, totalmax, base=None):
    """The git-style diff against the first parent (or `base`) under Triad's caps (the rules of its
    DiffBuilder): a file whose either version is larger than filemax is shown by its header only,
    without being diffed; so is a file whose section is larger than filemax; the first section
    that would take the whole past totalmax is left out with every later one."""
    p1 = ctx.p1() if base is None else base
    st = repo.status(p1, ctx)
    files = sorted(st.modified + st.added + st.removed)
    big = {}
    for f in files:
        old = p1[f] if f in p1 else None
        new = ctx[f] if f in ctx else None
        if max(old.size() if old else 0, new.size() if new else 0) <= filemax:
            continue
        head = [b'diff --git a/%s b/%s' % (f, f)]
        if old is None:
            head.append(b'new file mode %s' % _gitmode(new.flags()))
        elif new is None:
            head.append(b'deleted file mode %s' % _gitmode(old.flags()))
        elif old.flags() != new.flags():
            head.append(b'old mode %s' % _gitmode(old.flags()))
            head.append(b'new mode %s' % _gitmode(new.flags()))
        big[f] = b'\n'.join(head) + b'\n'
    state = {'parts': [], 'total': 0, 'full': False, 'cut': []}

    def add(path, header, body):
        if state['full']:
            return
        section = header if body is None else header + body
        headeronly = body is None
        if not headeronly and len(section) > filemax:
            section, headeronly = header, True
        if state['total'] + len(section) > totalmax:
            state['full'] = True
            return
        state['parts'].append(section)
        state['total'] += len(section)
        if headeronly:
            state['cut'].append(_s(path))

    opts = patch.diffallopts(ui, {b'git': True})
    # The status is computed once and handed on (diffhunks would compute it again), without the
    # files shown by header only. Copies are only ever recorded on files new to the parent, so
    # without added files there is nothing for copy tracing to find.
    keep = lambda fs: [f for f in fs if f not in big]
    changes = [keep(st.modified), keep(st.added), keep(st.removed)]
    copy = None if changes[1] else {}
    pending = sorted(big)
    hunks_of = patch.diffhunks(repo, p1, ctx, changes=changes, opts=opts, copy=copy) if any(changes) else []
    for fctx1, fctx2, hdr, hunks in hunks_of:
        path = (fctx2 if fctx2 is not None else fctx1).path()
        while pending and pending[0] < path:
            f = pending.pop(0)
            add(f, big[f], None)
        if state['full']:
            break
        body, size, over = [], 0, False
        for _range, lines in hunks:
            for line in lines:
                body.append(line)
                size += len(line)
            if size > filemax:
                over = True
                break
        text = b''.join(body)
        if not (hdr and (text or len(hdr) > 1)) and not text:
            continue
        header = b'\n'.join(hdr) + b'\n' if hdr and (text or len(hdr) > 1) else b''
        add(path, header, None if over else text)
    for f in pending:
        add(f, big[f], None)
    return {
        'diff': _s(b''.join(state['parts'])),
        'diff_truncated': state['full'] or bool(state['cut']),
        'diff_truncated_files': state['cut'],
    }


@command(b'triad-read', [], b'OP REV [ARGS]...', norepo=False, intents={b'readonly'})
def triadread(ui, repo, op, rev, *args):
    """the same answers on the command line (for debugging)"""
    ui.write(_answer(ui, repo, op, rev, *args))


_stamp = [None]
_STAMPED = ((True, b'00changelog.i'), (True, b'obsstore'), (True, b'phaseroots'), (False, b'bookmarks'), (False, b'localtags'))


def _fresh(repo):
    """The repository, reloaded only when a file that names changesets changed (a push)."""
    st = []
    for store, name in _STAMPED:
        try:
            s = os.stat((repo.svfs if store else repo.vfs).join(name))
            st.append((s.st_size, s.st_mtime_ns, s.st_ino))
        except OSError:
            st.append(None)
    if st != _stamp[0]:
        repo.invalidateall()
        _filelogs.clear()
        _ranges.clear()
        _stamp[0] = st
    return repo.filtered(b'visible')


def _serverread(self):
    """Command-server command "triadread": one NUL-separated request (OP REV ARGS...), one
    result frame (a JSON line, then a blob's bytes). No dispatch, no ui copy, no templating."""
    args = self._readlist()
    try:
        repo = _fresh(self.repo)
        out = _answer(repo.ui, repo, *args)
    except Exception as e:  # a read must never take the server down
        out = json.dumps({'error': 'internal', 'message': str(e)}).encode('utf-8') + b'\n'
    finally:
        _trim()
    self.cresult.write(out)


def _filedata(orig, self):
    # A committed file context names one content for good: a diff asks for it twice (whether it
    # is binary, then the lines), which made Mercurial rebuild it from its deltas twice.
    data = self.__dict__.get('_triaddata')
    if data is None:
        data = self._triaddata = orig(self)
    return data


def uisetup(ui):
    commandserver.server.capabilities[b'triadread'] = _serverread
    extensions.wrapfunction(context.filectx, 'data', _filedata)
    extensions.wrapfunction(localrepo.revlogfilestorage, 'file', _file)


def _prefixmatcher(repo, path):
    if not path:
        return matchmod.always()
    return matchmod.match(repo.root, b'', [b'path:' + path])
