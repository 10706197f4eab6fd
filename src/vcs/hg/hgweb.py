"""Triad's hgweb CGI: the Mercurial wire protocol for one repository (TRIAD_HG_REPO).

Writes are allowed only for requests Triad authorised as pushes (TRIAD_HG_PUSH=1). The bundle2
"remote-changegroup" part (the server downloads a changegroup from a URL the pusher names) is
neither advertised nor accepted: a pusher could make the server fetch any URL.
"""
import os, sys
from mercurial import demandimport
demandimport.enable()
from mercurial import bundle2, error
from mercurial import ui as uimod
from mercurial.hgweb import hgweb, wsgicgi

bundle2.capabilities.pop(b'remote-changegroup', None)
_params = bundle2.parthandlermapping[b'remote-changegroup'].params
def _refuse(op, inpart):
    raise error.Abort(b'remote-changegroup is not accepted by this server')
_refuse.params = _params
bundle2.parthandlermapping[b'remote-changegroup'] = _refuse

u = uimod.ui.load()
push = os.environ.get('TRIAD_HG_PUSH') == '1'
u.setconfig(b'web', b'allow-push', b'*' if push else b'')
u.setconfig(b'web', b'deny_push', b'' if push else b'*')
u.setconfig(b'web', b'push_ssl', b'false')
u.setconfig(b'web', b'allow-archive', b'')
u.setconfig(b'ui', b'report_untrusted', b'false')
wsgicgi.launch(hgweb(os.environb[b'TRIAD_HG_REPO'], baseui=u))
