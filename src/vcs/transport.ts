import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { runCgi, type CgiResult } from './cgi.ts';
import type { VcsKind } from './index.ts';

/** What a request to a repository's clone URL asks for. */
export type TransportOp = 'read' | 'write' | 'sync';

/**
 * Classifies a request at a clone URL. `sync` is Fossil's single POST endpoint, which carries
 * both clone and push: Fossil itself decides, from the REMOTE_USER capabilities Triad passes.
 */
export function classify(vcs: VcsKind, method: string, subpath: string, query: URLSearchParams): TransportOp {
  switch (vcs) {
    case 'git':
      return subpath.endsWith('/git-receive-pack') || query.get('service') === 'git-receive-pack'
        ? 'write'
        : 'read';
    case 'hg': {
      const cmd = query.get('cmd');
      return cmd === 'unbundle' || cmd === 'pushkey' ? 'write' : 'read';
    }
    case 'fossil':
      return method === 'POST' ? 'sync' : 'read';
  }
}

/** Does this request change the repository (so it takes the push lock and raises events)? */
export function mutates(vcs: VcsKind, method: string, op: TransportOp): boolean {
  if (op === 'sync') return true;
  return op === 'write' && (vcs !== 'git' || method === 'POST');
}

const HG_CGI = `import os, sys
from mercurial import demandimport
demandimport.enable()
from mercurial import ui as uimod
from mercurial.hgweb import hgweb, wsgicgi
u = uimod.ui.load()
# Only requests Triad authorised as pushes may write (unbundle, pushkey, or a batch of them).
u.setconfig(b'web', b'allow-push', b'*' if os.environ.get('TRIAD_HG_PUSH') == '1' else b'')
u.setconfig(b'web', b'deny_push', b'' if os.environ.get('TRIAD_HG_PUSH') == '1' else b'*')
u.setconfig(b'web', b'push_ssl', b'false')
u.setconfig(b'web', b'allow-archive', b'')
u.setconfig(b'ui', b'report_untrusted', b'false')
wsgicgi.launch(hgweb(os.environb[b'TRIAD_HG_REPO'], baseui=u))
`;

let scratch: Promise<string> | undefined;
function scratchDir(): Promise<string> {
  scratch ??= fs.mkdtemp(path.join(os.tmpdir(), 'triad-cgi-'));
  return scratch;
}

async function hgScript(): Promise<string> {
  const file = path.join(await scratchDir(), 'hgweb.py');
  await fs.writeFile(file, HG_CGI);
  return file;
}
let hgScriptFile: Promise<string> | undefined;

const fossilScripts = new Map<string, Promise<string>>();

/** One CGI script per repository, written once (atomically), so concurrent requests never see it half-written. */
function fossilScript(repoFile: string): Promise<string> {
  let p = fossilScripts.get(repoFile);
  if (p === undefined) {
    p = (async () => {
      const file = path.join(await scratchDir(), `${path.basename(repoFile)}.cgi`);
      const tmp = `${file}.${process.pid}.tmp`;
      await fs.writeFile(tmp, `repository: ${repoFile}\n`);
      await fs.rename(tmp, file);
      return file;
    })();
    fossilScripts.set(repoFile, p);
    p.catch(() => fossilScripts.delete(repoFile));
  }
  return p;
}

export type BackendRequest = {
  vcs: VcsKind;
  repoPath: string;
  /** Path under the clone URL, starting with '/' or empty. */
  subpath: string;
  /** The public path of the clone URL (SCRIPT_NAME). */
  scriptName: string;
  remoteUser: string | undefined;
  /** Triad authorised this request to write (git receive-pack, hg unbundle/pushkey). */
  write: boolean;
  req: IncomingMessage;
  res: ServerResponse;
  buffer?: boolean;
};

/** Serves one request with the VCS's own HTTP backend (git http-backend, hgweb, fossil CGI). */
export async function serveBackend(b: BackendRequest): Promise<CgiResult> {
  const base = {
    req: b.req,
    res: b.res,
    scriptName: b.scriptName,
    remoteUser: b.remoteUser,
    buffer: b.buffer === true,
  };
  switch (b.vcs) {
    case 'git':
      return runCgi({
        ...base,
        command: 'git',
        args: ['http-backend'],
        pathInfo: `/${path.basename(b.repoPath)}${b.subpath}`,
        env: {
          GIT_PROJECT_ROOT: path.dirname(b.repoPath),
          GIT_HTTP_EXPORT_ALL: '1',
          GIT_HTTP_MAX_REQUEST_BUFFER: '100M',
          GIT_CONFIG_COUNT: '1',
          GIT_CONFIG_KEY_0: 'http.receivepack',
          GIT_CONFIG_VALUE_0: b.write ? 'true' : 'false',
        },
      });
    case 'hg':
      hgScriptFile ??= hgScript();
      return runCgi({
        ...base,
        command: '/usr/bin/python3',
        args: [await hgScriptFile],
        pathInfo: b.subpath === '' ? '/' : b.subpath,
        env: {
          TRIAD_HG_REPO: b.repoPath,
          TRIAD_HG_PUSH: b.write ? '1' : '0',
          HGPLAIN: '1',
          HGENCODING: 'UTF-8',
        },
      });
    case 'fossil':
      return runCgi({
        ...base,
        command: 'fossil',
        args: [await fossilScript(b.repoPath)],
        pathInfo: b.subpath === '' ? '/' : b.subpath,
        env: {},
      });
  }
}
