"""Protected refs for Mercurial pushes: the rules of src/protection/rules.ts, in Python.

The hgweb workers (hgwsgi.py) run `hook` as an in-process `pretxnclose` hook of every push
transaction. For a push Triad found rules for, `current` holds the request's protection (the
rules and the pusher, as `BackendRequest.protection` carries them); between requests it is None
and the hook does nothing. A refused push raises `error.Abort` with the reason, so the
transaction rolls back and the client prints it.

The matcher and the refusal messages are a faithful copy of rules.ts (test/unit/
protection-python.test.ts feeds the same cases to both). Run as a script, this module reads a
JSON list of `[rules, update, pusher]` cases on stdin and prints the refusal of each (or null).

What a push moves, as Triad's push events see it (src/vcs/hg/refs.ts):
- every bookmark the transaction changed: created, moved or deleted; a move is a fast-forward
  when the new changeset descends from the old one;
- every named branch that gained changesets, or whose line head a bookmark change moved: its
  line head before and after, each the newest head of the branch without a bookmark (else its
  newest head); a fast-forward when the new one descends from the old one, so a new head on the
  branch (`hg push -f`) is not one, nor is deleting the bookmark of a second head. A branch that
  gained changesets beside an unchanged line head (a bookmarked head) is still an update of it
  for who may push. A branch the repository did not have is created. Tags are not protected.
"""
import json, re, sys

current = None

_cache = {}


def _tokens(pattern):
    """The pattern as tokens: a literal character, 1 (`*`, within a segment) or 2 (`**`)."""
    t = _cache.get(pattern)
    if t is None:
        t = []
        for part in re.split(r'(\*+)', pattern):
            if part == '':
                continue
            if part.startswith('*'):
                t.append(2 if len(part) >= 2 else 1)
            else:
                t.extend(part)
        if len(_cache) > 1000:
            _cache.clear()
        _cache[pattern] = t
    return t


def _closure(t, at):
    out = set()
    for i in at:
        out.add(i)
        while i < len(t) and isinstance(t[i], int):
            i += 1
            out.add(i)
    return out


def matches(pattern, name):
    """`*` within one `/`-separated segment, `**` across segments, anything else literally; in
    time proportional to the lengths' product (as rules.ts: no backtracking)."""
    t = _tokens(pattern)
    at = _closure(t, [0])
    for c in name:
        nxt = []
        for i in at:
            if i >= len(t):
                continue
            tok = t[i]
            if tok == 2 or (tok == 1 and c != '/'):
                nxt.append(i)
            elif tok == c:
                nxt.append(i + 1)
        if not nxt:
            return False
        at = _closure(t, nxt)
    return len(t) in at


def may_push(rule, pusher):
    push = rule['push']
    role = pusher.get('role')
    if push == 'owners':
        return role == 'owner'
    if push == 'members':
        return role in ('owner', 'member')
    return pusher['username'] in push['users']


def _who(push):
    if push == 'owners':
        return 'only organization owners may push to it'
    if push == 'members':
        return 'only organization members may push to it'
    users = push['users']
    return 'only %s may push to it' % ('nobody' if len(users) == 0 else ', '.join(users))


def refusal(rules, update, pusher):
    """Why the rules refuse `update` by `pusher` (the message of rules.ts), or None."""
    if update['type'] == 'tag':
        return None
    for rule in rules:
        if not matches(rule['pattern'], update['name']):
            continue
        what = '%s %s is protected by rule "%s"' % (update['type'], update['name'], rule['pattern'])
        if not may_push(rule, pusher):
            return '%s: %s' % (what, _who(rule['push']))
        if update['new'] is None and not rule['allow_deletion']:
            return '%s: it cannot be deleted' % what
        if (update['old'] is not None and update['new'] is not None and rule['fast_forward_only']
                and not update['fastForward']):
            return '%s: only fast-forward updates are allowed (this would rewrite its history)' % what
    return None


def first_refusal(rules, updates, pusher):
    if not rules:
        return None
    for u in updates:
        why = refusal(rules, u, pusher)
        if why is not None:
            return why
    return None


def _text(b):
    return b.decode('utf-8', 'surrogateescape')


def _line_head(heads, marked):
    """The newest head without a bookmark, else the newest head (heads sorted by revision)."""
    for r in reversed(heads):
        if r not in marked:
            return r
    return heads[-1] if heads else None


def updates(repo, tr):
    """The bookmarks and named branches the transaction `tr` moves, as RefUpdates."""
    from mercurial.node import hex as tohex
    urepo = repo.unfiltered()
    cl = urepo.changelog
    out = []
    changed = tr.changes.get(b'bookmarks') or {}
    for name, (old, new) in sorted(changed.items()):
        if old == new:
            continue
        ff = old is None or new is None or cl.isancestor(old, new)
        out.append({'name': _text(name), 'type': 'bookmark', 'old': None if old is None else tohex(old).decode(),
                    'new': None if new is None else tohex(new).decode(), 'fastForward': bool(ff)})
    start = tr.changes.get(b'origrepolen', len(cl))
    # every named branch that gained changesets (a bookmark on them does not take them out of
    # their branch), and the branches of the changesets whose bookmarks moved (a line head may
    # change with a bookmark alone: deleting the bookmark of a second head makes it the line head)
    gained = []
    for rev in range(start, len(cl)):
        b = cl.branchinfo(rev)[0]
        if b not in gained:
            gained.append(b)
    touched = list(gained)
    for old, new in changed.values():
        for n in (old, new):
            if n is not None and cl.hasnode(n):
                b = cl.branchinfo(cl.rev(n))[0]
                if b not in touched:
                    touched.append(b)
    if not touched:
        return out
    now = set(urepo._bookmarks.values())
    marked_after = {cl.rev(n) for n in now}
    before_nodes = set(now)
    for old, new in changed.values():
        if new is not None:
            before_nodes.discard(new)
        if old is not None:
            before_nodes.add(old)
    marked_before = {cl.rev(n) for n in before_nodes if cl.hasnode(n)}
    for b in touched:
        spec = b'literal:' + b
        old_heads = sorted(urepo.revs(b'heads(branch(%s) and :%d)', spec, start - 1)) if start > 0 else []
        new_heads = sorted(urepo.revs(b'heads(branch(%s))', spec))
        old = _line_head(old_heads, marked_before)
        new = _line_head(new_heads, marked_after)
        if old == new:
            if b in gained and new is not None:
                # changesets added beside the line head (a bookmarked head): who may push to the
                # branch is still judged, as for any changeset added to it
                node = tohex(cl.node(new)).decode()
                out.append({'name': _text(b), 'type': 'branch', 'old': node, 'new': node, 'fastForward': True})
            continue
        ff = old is None or (new is not None and cl.isancestorrev(old, new))
        out.append({'name': _text(b), 'type': 'branch', 'old': None if old is None else tohex(cl.node(old)).decode(),
                    'new': None if new is None else tohex(cl.node(new)).decode(), 'fastForward': bool(ff)})
    return out


def hook(ui, repo, **kwargs):
    """pretxnclose: refuses the transaction of a push the request's rules refuse."""
    p = current
    if p is None:
        return False
    tr = repo.currenttransaction()
    if tr is None:
        return False
    why = first_refusal(p['rules'], updates(repo, tr), p['pusher'])
    if why is not None:
        from mercurial import error
        raise error.Abort(why.encode('utf-8', 'surrogateescape'))
    return False


def prepushkey(ui, repo, namespace=b'', key=b'', old=b'', new=b'', **kwargs):
    """prepushkey: refuses a bookmark's `pushkey` (the wire command older clients send) up front,
    so the client gets Mercurial's `pushkey-abort: <reason>` (pretxnclose would refuse it too)."""
    p = current
    if p is None or namespace != b'bookmarks':
        return False
    from mercurial import error
    from mercurial.node import bin as tobin
    cl = repo.unfiltered().changelog
    ff = True
    if old and new:
        try:
            ff = cl.isancestor(tobin(old), tobin(new))
        except Exception:
            return False  # an unknown node: Mercurial refuses the pushkey itself
    update = {'name': _text(key), 'type': 'bookmark', 'old': _text(old) or None, 'new': _text(new) or None,
              'fastForward': bool(ff)}
    why = first_refusal(p['rules'], [update], p['pusher'])
    if why is not None:
        raise error.HookAbort(why.encode('utf-8', 'surrogateescape'))
    return False


if __name__ == '__main__':
    cases = json.load(sys.stdin)
    json.dump([refusal(rules, update, pusher) for rules, update, pusher in cases], sys.stdout)
