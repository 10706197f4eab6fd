"""Triad repository operations for "hg serve --cmdserver pipe".

Adds the command-server command "triadops": one request (a JSON object with "op"), one result
frame (a JSON line). Merges run in memory (an overlay working context, as "rebase" does in
memory), so no working directory is written and nothing is left behind; new changesets are made
with memctx/commitctx inside one transaction, public, and bookmarks move in that transaction.
Every name arrives as JSON data and is looked up in dictionaries (bookmarks, branches, tags) or
as a hex node prefix, never through revsets or command lines. Pull request refs: see _ref.
"""
import json

from mercurial import (
    context,
    error,
    merge as mergemod,
    mergestate as mergestatemod,
    scmutil,
    simplemerge,
)
from mercurial import commandserver
from mercurial.node import hex, nullrev
from mercurial.utils import dateutil, stringutil

# In-memory merges raise at the first file they cannot merge; the full list of conflicting files
# is then computed from the merge actions (see _conflicts).
_CONFLICT_ACTIONS = (
    mergestatemod.ACTION_CHANGED_DELETED,
    mergestatemod.ACTION_DELETED_CHANGED,
    mergestatemod.ACTION_PATH_CONFLICT,
)


class _Outcome(Exception):
    """A typed answer (not found, moved, conflict...) that ends an operation early."""

    def __init__(self, answer):
        Exception.__init__(self, answer.get('kind'))
        self.answer = answer


def _b(s):
    return s.encode('utf-8')


def _s(b):
    return b.decode('utf-8', 'replace')


def _overrides(repo):
    return repo.ui.configoverride(
        {
            (b'ui', b'quiet'): b'true',
            (b'ui', b'interactive'): b'false',
            (b'ui', b'forcemerge'): b':merge',
            (b'ui', b'timeout'): b'20',
            (b'phases', b'new-commit'): b'public',
        },
        b'triadops',
    )


def _fresh(server):
    repo = server.repo.unfiltered()
    # Cheap when nothing changed on disk: the file caches re-read only files whose stat changed.
    repo.invalidateall()
    return repo.filtered(b'visible')


def _known(repo, node):
    """True for the node of a visible changeset (not the null or working-directory ids)."""
    try:
        return repo.changelog.rev(node) >= 0
    except (error.LookupError, error.WdirUnsupported, KeyError, IndexError):
        return False


def _bookmark(repo, name):
    node = repo._bookmarks.get(_b(name))
    if node is not None and _known(repo, node):
        return repo[node]
    return None


def _commit(repo, rev):
    """A changeset named by a full hex id, a bookmark, a branch, a tag or a hex prefix."""
    b = _b(rev)
    if len(b) == 40:
        try:
            node = bytes.fromhex(rev)
            if _known(repo, node):
                return repo[node]
        except ValueError:
            pass
    if b in repo._bookmarks:
        return _bookmark(repo, rev)
    tip = repo.branchtip(b, ignoremissing=True)
    if tip is not None:
        return repo[tip]
    tags = repo.tags()
    if b != b'tip' and b in tags:
        return repo[tags[b]]
    if 4 <= len(b) < 40 and all(c in b'0123456789abcdef' for c in b.lower()):
        try:
            node = scmutil.resolvehexnodeidprefix(repo, b.lower())
        except (error.LookupError, error.WdirUnsupported):  # ambiguous
            return None
        if node is not None and _known(repo, node):
            return repo[node]
    return None


def _counts(repo, src, tgt):
    cl = repo.changelog
    ahead = len(cl.findmissingrevs([tgt.rev()], [src.rev()]))
    behind = len(cl.findmissingrevs([src.rev()], [tgt.rev()]))
    return ahead, behind


def _same_files(a, b):
    """True when changesets a and b have the same files (content and flags)."""
    ma, mb = a.manifest(), b.manifest()
    for f in ma.diff(mb):
        fa = a[f] if f in ma else None
        fb = b[f] if f in mb else None
        if fa is None or fb is None or fa.flags() != fb.flags() or fa.data() != fb.data():
            return False
    return True


def _conflicts(repo, p1, p2):
    """The files an in-memory merge of p2 into p1 cannot merge by itself, from the merge actions."""
    wctx = context.overlayworkingctx(repo)
    wctx.setbase(p1)
    pas = [p1.ancestor(p2)]
    mresult = mergemod.calculateupdates(repo, wctx, p2, pas, True, False, False, True)
    files = set(f for f, _a, _m in mresult.getactions(_CONFLICT_ACTIONS))
    for f, args, _m in mresult.getactions([mergestatemod.ACTION_MERGE]):
        f1, f2, fa, _move, anc = args
        if f1 is None or f2 is None:
            files.add(f)
            continue
        local, other = p1[f1], p2[f2]
        actx = repo[anc]
        base = actx[fa] if fa in actx else None
        ld, od = local.data(), other.data()
        bd = base.data() if base is not None else b''
        if ld == od and local.flags() == other.flags():
            continue
        bflags = base.flags() if base is not None else b''
        if local.flags() != other.flags() and local.flags() != bflags and other.flags() != bflags:
            files.add(f)
            continue
        if ld == od:
            continue
        if b'l' in local.flags() + other.flags() or stringutil.binary(ld) or stringutil.binary(od):
            if ld != bd and od != bd:
                files.add(f)
            continue
        m3 = simplemerge.Merge3Text(bd, ld, od)
        if any(group[0] == b'conflict' for group in m3.merge_groups()):
            files.add(f)
    if not files:
        # The merge failed on something the actions do not show: name every file it had to merge.
        files = set(f for f, _a, _m in mresult.getactions([mergestatemod.ACTION_MERGE]))
    return sorted(_s(f) for f in files)


def _merge_in_memory(repo, p1, p2, linear):
    """An overlay working context holding the merge of p2 into p1 (parents not set yet)."""
    wctx = context.overlayworkingctx(repo)
    wctx.setbase(p1)
    try:
        mergemod._update(repo, p2.node(), branchmerge=True, force=False, mergeancestor=linear, wc=wctx)
    except error.InMemoryMergeConflictsError:
        raise _Outcome({'kind': 'conflict', 'conflictedFiles': _conflicts(repo, p1, p2)})
    wctx._compact()
    return wctx


def _branch_head(repo, branch):
    """The head a named branch stands for: its newest head without a bookmark (a bookmarked head
    is a line of its own, as "hg merge" sees it), else its newest head; closed heads count. None
    when there is no such branch."""
    heads = sorted(repo.branchheads(branch, closed=True), key=repo.changelog.rev)
    marked = set(repo._bookmarks.values())
    plain = [h for h in heads if h not in marked]
    return repo[(plain or heads)[-1]] if heads else None


def _ref(repo, name, role=None):
    """A pull request ref as (changeset, how): a bookmark (it wins a clash); else '@' as the default
    named branch's head ('mainline': a merge creates '@'); else a named branch's head ('branch').
    (None, None), or ref_not_found for `role`, when the name names nothing."""
    b = _b(name)
    if b in repo._bookmarks:
        ctx, how = _bookmark(repo, name), 'bookmark'
    elif b == b'@':
        ctx, how = _branch_head(repo, b'default'), 'mainline'
    else:
        ctx, how = _branch_head(repo, b), 'branch'
    if ctx is not None:
        return ctx, how
    if role is not None:
        raise _Outcome({'kind': 'ref_not_found', 'role': role})
    return None, None


def op_resolve(repo, req):
    ctx, _how = _ref(repo, req['name'])
    return {'id': _s(ctx.hex()) if ctx is not None else None}


def op_commit(repo, req):
    ctx = _commit(repo, req['rev'])
    return {'id': _s(ctx.hex()) if ctx is not None else None}


def op_check(repo, req):
    src, _how = _ref(repo, req['source'], 'source')
    tgt, _how = _ref(repo, req['target'], 'target')
    ahead, behind = _counts(repo, src, tgt)
    out = {
        'commitsAhead': ahead,
        'commitsBehind': behind,
        'sourceHead': _s(src.hex()),
        'targetHead': _s(tgt.hex()),
        'conflictedFiles': [],
    }
    if ahead == 0:
        out['state'] = 'behind'
    elif behind == 0:
        out['state'] = 'empty' if _same_files(tgt, src) else 'clean'
    else:
        try:
            wctx = _merge_in_memory(repo, tgt, src, False)
        except _Outcome as o:
            out['state'] = 'conflict'
            out['conflictedFiles'] = o.answer['conflictedFiles']
            return out
        out['state'] = 'clean' if wctx._cache else 'empty'
    return out


def _author(req):
    a = req['author']
    return b'%s <%s>' % (_b(a['name']), _b(a['email']))


def op_merge(repo, req):
    """A bookmark target moves to the result, '@' standing for the default branch is created there,
    a named branch gets it as its newest head (never a fast-forward: the target is a head)."""
    src, _how = _ref(repo, req['source'], 'source')
    tgt, how = _ref(repo, req['target'], 'target')
    if req.get('expectedHead') is not None and req['expectedHead'] != _s(src.hex()):
        return {'kind': 'head_moved', 'head': _s(src.hex())}
    if req.get('expectedTargetHead') is not None and req['expectedTargetHead'] != _s(tgt.hex()):
        return {'kind': 'target_moved', 'head': _s(tgt.hex())}
    ahead, behind = _counts(repo, src, tgt)
    if ahead == 0:
        return {'kind': 'nothing_to_merge'}
    style = req['style']
    linear = behind == 0
    fast = linear and style != 'squash' and src.branch() == tgt.branch() and how != 'branch'
    if style == 'ff-only' and not fast:
        return {'kind': 'not_fast_forward'}
    wctx = None
    if not fast:
        wctx = _merge_in_memory(repo, tgt, src, linear)
        if style == 'squash' and not wctx._cache:
            return {'kind': 'nothing_to_merge'}
    with repo.wlock(), repo.lock():
        # The locks re-read the repository: the target must still be where the checks saw it.
        now, how = _ref(repo, req['target'])
        if now is None or now.node() != tgt.node():
            return {'kind': 'target_moved', 'head': _s(now.hex()) if now is not None else ''}
        mark = None if how == 'branch' else _b(req['target'])
        with repo.transaction(b'triad-merge') as tr:
            if fast:
                repo._bookmarks.applychanges(repo, tr, [(mark, src.node())])
                return {'kind': 'merged', 'mergeCommit': _s(src.hex()), 'fastForward': True}
            if style == 'squash':
                wctx.setparents(tgt.node())
            else:
                wctx.setparents(tgt.node(), src.node())
            mem = wctx.tomemctx(
                _b(req['message']), branch=tgt.branch(), user=_author(req), date=dateutil.makedate()
            )
            node = repo.commitctx(mem)
            if mark is not None:
                repo._bookmarks.applychanges(repo, tr, [(mark, node)])
    return {'kind': 'merged', 'mergeCommit': _s(hex(node)), 'fastForward': False}


def op_delete(repo, req):
    ctx = _bookmark(repo, req['name'])
    if ctx is None:
        return {'kind': 'not_found'}
    if req.get('expectedHead') is not None and req['expectedHead'] != _s(ctx.hex()):
        return {'kind': 'moved'}
    with repo.wlock(), repo.lock(), repo.transaction(b'triad-bookmark') as tr:
        repo._bookmarks.applychanges(repo, tr, [(_b(req['name']), None)])
    return {'kind': 'deleted'}


def _tag_parent(repo, target):
    """Where the .hgtags change goes: on '@' when the target is in its history ('@' moves), else
    on the newest head of the target's named branch that descends from it (bookmarks on that
    head move along)."""
    cl = repo.changelog
    at = _bookmark(repo, '@')
    if at is not None and cl.isancestorrev(target.rev(), at.rev()):
        return at, [b'@']
    heads = [repo[h] for h in repo.branchheads(target.branch(), closed=True)]
    heads = [h for h in heads if cl.isancestorrev(target.rev(), h.rev())]
    parent = max(heads, key=lambda h: h.rev()) if heads else target
    return parent, [m for m, n in repo._bookmarks.items() if n == parent.node()]


def op_tag(repo, req):
    name = _b(req['name'])
    try:
        scmutil.checknewlabel(repo, name, b'tag')
    except error.Abort as e:
        return {'kind': 'invalid_name', 'message': _s(stringutil.forcebytestr(e))}
    tags = repo.tags()
    if name in tags:
        return {'kind': 'tag_exists', 'commit': _s(hex(tags[name]))}
    target = _commit(repo, req['target'])
    if target is None:
        return {'kind': 'not_found'}
    with repo.wlock(), repo.lock(), repo.transaction(b'triad-tag') as tr:
        parent, marks = _tag_parent(repo, target)
        data = parent[b'.hgtags'].data() if b'.hgtags' in parent else b''
        if data and not data.endswith(b'\n'):
            data += b'\n'
        data += b'%s %s\n' % (target.hex(), name)

        def filectx(repo_, mctx, path):
            return context.memfilectx(repo_, mctx, path, data)

        text = req.get('message') or 'Added tag %s for changeset %s' % (req['name'], _s(target.hex()[:12]))
        mem = context.memctx(
            repo,
            (parent.node(), None),
            _b(text),
            [b'.hgtags'],
            filectx,
            user=_author(req),
            date=dateutil.makedate(),
            branch=parent.branch(),
        )
        node = repo.commitctx(mem)
        repo._bookmarks.applychanges(repo, tr, [(m, node) for m in marks])
    return {'kind': 'created', 'name': req['name'], 'commit': _s(target.hex()), 'tagCommit': _s(hex(node))}


def op_isancestor(repo, req):
    try:
        a, b = bytes.fromhex(req['ancestor']), bytes.fromhex(req['descendant'])
    except ValueError:
        return {'result': False}
    if len(a) != 20 or len(b) != 20 or not _known(repo, a) or not _known(repo, b):
        return {'result': False}
    return {'result': bool(repo.changelog.isancestor(a, b))}


_OPS = {
    'resolve': op_resolve,
    'commit': op_commit,
    'check': op_check,
    'merge': op_merge,
    'delete': op_delete,
    'tag': op_tag,
    'isancestor': op_isancestor,
}


def _serverops(self):
    """Command-server command "triadops": a JSON request, a JSON line in the result frame."""
    req = None
    try:
        req = json.loads(self._readstr().decode('utf-8'))
        repo = _fresh(self)
        # No hooks: this process then never starts another one (merges run in memory with the
        # internal merge tool), so killing it on a timeout ends all of an operation's work.
        callhooks, repo.ui.callhooks = repo.ui.callhooks, False
        try:
            with _overrides(repo):
                out = _OPS[req['op']](repo, req)
        except _Outcome as o:
            out = o.answer
        finally:
            repo.ui.callhooks = callhooks
    except Exception as e:  # an operation must never take the server down
        out = {'kind': 'error', 'message': '%s: %s' % (type(e).__name__, _s(stringutil.forcebytestr(e)))}
    self.cresult.write(json.dumps(out, separators=(',', ':')).encode('utf-8') + b'\n')


def uisetup(ui):
    commandserver.server.capabilities[b'triadops'] = _serverops
