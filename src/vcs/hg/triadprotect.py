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
- every named branch that gained changesets no moved bookmark covers (a bookmarked line is a
  line of its own): its line head before and after, each the newest head of the branch without a
  bookmark (else its newest head); a fast-forward when the new one descends from the old one,
  so a new head on the branch (`hg push -f`) is not one. A branch the repository did not have is
  created. Tags are not protected.
"""
import json, re, sys

current = None

_cache = {}


def pattern_regex(pattern):
    """`*` within one `/`-separated segment, `**` across segments, anything else literally."""
    rx = _cache.get(pattern)
    if rx is None:
        body = ''.join(
            '.*' if part == '**' else '[^/]*' if part == '*' else re.escape(part)
            for part in re.split(r'(\*\*|\*)', pattern)
        )
        rx = re.compile(body, re.S)
        if len(_cache) > 1000:
            _cache.clear()
        _cache[pattern] = rx
    return rx


def matches(pattern, name):
    return pattern_regex(pattern).fullmatch(name) is not None


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
    if start >= len(cl):
        return out
    moved = [cl.rev(new) for (old, new) in changed.values() if new is not None and old != new]
    covered = set(cl.ancestors(moved, stoprev=start, inclusive=True)) if moved else set()
    branches = []
    for rev in range(start, len(cl)):
        if rev in covered:
            continue
        b = cl.branchinfo(rev)[0]
        if b not in branches:
            branches.append(b)
    if not branches:
        return out
    now = set(urepo._bookmarks.values())
    marked_after = {cl.rev(n) for n in now}
    before_nodes = set(now)
    for old, new in changed.values():
        if new is not None:
            before_nodes.discard(new)
        if old is not None:
            before_nodes.add(old)
    marked_before = {cl.rev(n) for n in before_nodes}
    for b in branches:
        spec = b'literal:' + b
        old_heads = sorted(urepo.revs(b'heads(branch(%s) and :%d)', spec, start - 1)) if start > 0 else []
        new_heads = sorted(urepo.revs(b'heads(branch(%s))', spec))
        old = _line_head(old_heads, marked_before)
        new = _line_head(new_heads, marked_after)
        if old == new:
            continue
        ff = old is None or cl.isancestorrev(old, new)
        out.append({'name': _text(b), 'type': 'branch', 'old': None if old is None else tohex(cl.node(old)).decode(),
                    'new': tohex(cl.node(new)).decode(), 'fastForward': bool(ff)})
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
