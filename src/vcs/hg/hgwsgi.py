"""Triad's hgweb worker: the Mercurial wire protocol for many requests, one at a time.

A long-lived process (src/vcs/wsgi.ts keeps a pool of them). Each request comes on stdin as a
4-byte big-endian length and a JSON object: `env` (the CGI variables of the request), `input`
(the path of the spooled body, or null), `repo` (the repository's path), `push` (Triad
authorised the request as a push) and, for a push to a repository with protected refs,
`protection` (its rules and the pusher: triadprotect.py refuses, in the push's transaction, what
they refuse; it is cleared after the request, so a pooled worker never applies it to the next). The answer goes to the process's original stdout as frames,
a type byte, a 4-byte length and data: `H` (JSON: status and headers) once, `B` (body bytes) any
number of times, then `E` (empty when the request was answered, else the error text). File
descriptor 1 itself points at stderr, so nothing Mercurial prints can garble the frames.

A wire command sent without the arguments it requires (`cmd=lookup` without `key`), or, for a
read, with arguments Mercurial cannot decode or nodes it does not know, is answered `400` in plain
text, and the reason goes to stderr on one line (Mercurial itself would raise out of the
application, a traceback and a server error): stock clients never send such requests.

Writes are allowed only for requests Triad authorised as pushes. The bundle2
"remote-changegroup" part (the server downloads a changegroup from a URL the pusher names) is
neither advertised nor accepted: a pusher could make the server fetch any URL. During a request,
os.environ holds its CGI variables (as it would for a CGI program), so hooks see them, and
temporary files go to the request's TMPDIR. A pushed bundle is applied straight from the spooled
body (`server.streamunbundle`): it is complete on disk before the worker sees the request.

Stream clones (the store's files sent as they are, which the client keeps without rebuilding
them) follow TRIAD_HG_STREAM_CLONES: `prefer` (the server advertises `stream-preferred`, so a
plain `hg clone` streams), `allow` (only `hg clone --stream`), `off`. Mercurial itself never
streams a repository that has secret changesets (a stream cannot leave them out); that is kept.
"""
import collections, io, json, os, struct, sys, tempfile, traceback

_out = os.fdopen(os.dup(1), 'wb')
os.dup2(2, 1)
_in = os.fdopen(os.dup(0), 'rb')
_null = os.open(os.devnull, os.O_RDONLY)
os.dup2(_null, 0)

from mercurial import demandimport
demandimport.enable()
from mercurial import bundle2, error, wireprotoserver, wireprotov1server
from mercurial import ui as uimod
from mercurial.hgweb import hgweb
import triadprotect

bundle2.capabilities.pop(b'remote-changegroup', None)
_params = bundle2.parthandlermapping[b'remote-changegroup'].params
def _refuse(op, inpart):
    raise error.Abort(b'remote-changegroup is not accepted by this server')
_refuse.params = _params
bundle2.parthandlermapping[b'remote-changegroup'] = _refuse



class BadWireRequest(Exception):
    """A wire command's arguments are missing or cannot be used: the client's error (400)."""

    def __init__(self, message, detail):
        super().__init__(message)
        self.message = message
        self.detail = detail


def _text(value):
    return value.decode('utf-8', 'replace') if isinstance(value, bytes) else str(value)


_getargs = wireprotoserver.httpv1protocolhandler.getargs
def _checked_getargs(self, args):
    try:
        return _getargs(self, args)
    except KeyError as e:
        cmd = _text(self._req.qsparams.get(b'cmd', b''))
        name = _text(e.args[0]) if e.args else '?'
        raise BadWireRequest('missing argument %r of wire command %r' % (name, cmd), repr(e))
wireprotoserver.httpv1protocolhandler.getargs = _checked_getargs

_dispatch = wireprotov1server.dispatch
def _checked_dispatch(repo, proto, command):
    # A read command that fails on what it was sent (a missing argument of a batched command, a
    # value that is not hex, a node of the wrong length or unknown here) is the client's error;
    # a push's failures stay server errors.
    try:
        return _dispatch(repo, proto, command)
    except (KeyError, ValueError) as e:
        if wireprotov1server.commands[command].permission != b'pull':
            raise
        cmd = _text(command)
        raise BadWireRequest('invalid arguments of wire command %r' % cmd, '%s: %r' % (cmd, e))
wireprotov1server.dispatch = _checked_dispatch

_base = uimod.ui.load()
_environ = dict(os.environ)
_stream = _environ.pop('TRIAD_HG_STREAM_CLONES', 'prefer')
_apps = collections.OrderedDict()
MAX_APPS = 8


def app_for(repo, push):
    """An hgweb application per repository and kind of request (it reloads a changed repository)."""
    key = (repo, push)
    app = _apps.pop(key, None)
    if app is None:
        u = _base.copy()
        u.setconfig(b'web', b'allow-push', b'*' if push else b'')
        u.setconfig(b'web', b'deny_push', b'' if push else b'*')
        u.setconfig(b'web', b'push_ssl', b'false')
        u.setconfig(b'web', b'allow-archive', b'')
        u.setconfig(b'ui', b'report_untrusted', b'false')
        # the body is a complete file Triad spooled already: unbundle reads it from there instead
        # of copying it to a temporary file of its own first
        u.setconfig(b'server', b'streamunbundle', b'true')
        u.setconfig(b'server', b'uncompressed', b'false' if _stream == 'off' else b'true')
        u.setconfig(b'server', b'preferuncompressed', b'true' if _stream == 'prefer' else b'false')
        u.setconfig(b'server', b'uncompressedallowsecret', b'false')
        if push:
            # protected refs: does nothing unless the request carries rules (`protection`)
            u.setconfig(b'hooks', b'pretxnclose.triad-protect', triadprotect.hook)
            u.setconfig(b'hooks', b'prepushkey.triad-protect', triadprotect.prepushkey)
        app = hgweb(os.fsencode(repo), baseui=u)
    _apps[key] = app
    while len(_apps) > MAX_APPS:
        _apps.popitem(last=False)
    return app


def frame(kind, data):
    _out.write(kind + struct.pack('>I', len(data)))
    _out.write(data)
    _out.flush()


def serve(req):
    env = {k: v for k, v in req['env'].items() if k != 'HTTP_EXPECT'}
    os.environ.clear()
    os.environ.update(_environ)
    os.environ.update(env)
    tempfile.tempdir = env.get('TMPDIR') or None
    body = open(req['input'], 'rb') if req.get('input') else io.BytesIO()
    environ = dict(env)
    environ.update({
        'wsgi.input': body,
        'wsgi.errors': sys.stderr,
        'wsgi.version': (1, 0),
        'wsgi.multithread': False,
        'wsgi.multiprocess': True,
        'wsgi.run_once': False,
        'wsgi.url_scheme': 'http',
    })
    state = {'head': None, 'sent': False}
    triadprotect.current = req.get('protection') if req.get('push') else None

    def write(data):
        if not state['sent']:
            status, headers = state['head']
            frame(b'H', json.dumps({'status': status, 'headers': headers}).encode())
            state['sent'] = True
        if data:
            frame(b'B', bytes(data))

    def start_response(status, headers, exc_info=None):
        if exc_info is not None and state['sent']:
            raise exc_info[1].with_traceback(exc_info[2])
        state['head'] = (status, [[str(k), str(v)] for k, v in headers])
        return write

    try:
        result = app_for(req['repo'], bool(req.get('push')))(environ, start_response)
        try:
            for chunk in result:
                write(chunk)
            if not state['sent']:
                write(b'')
        except BadWireRequest as e:
            if state['sent']:
                raise
            sys.stderr.write('bad wire-protocol request: %s\n' % e.detail)
            sys.stderr.flush()
            start_response('400 Bad Request', [('Content-Type', 'text/plain; charset=utf-8')])
            write(('%s\n' % e.message).encode('utf-8', 'replace'))
        finally:
            getattr(result, 'close', lambda: None)()
    finally:
        body.close()
        triadprotect.current = None
        tempfile.tempdir = None
        os.environ.clear()
        os.environ.update(_environ)


def main():
    while True:
        head = _in.read(4)
        if len(head) < 4:
            return
        (size,) = struct.unpack('>I', head)
        req = json.loads(_in.read(size))
        try:
            serve(req)
        except Exception:
            text = traceback.format_exc()
            sys.stderr.write(text)
            sys.stderr.flush()
            frame(b'E', text.encode('utf-8', 'replace')[-4000:])
            continue
        frame(b'E', b'')


main()
