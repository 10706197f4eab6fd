import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { promisify } from 'node:util';
import { runCgi, type CgiResult } from './cgi.ts';
import { FOSSIL_BACKOFFICE_OFF, type VcsKind } from './index.ts';

/** What a request to a repository's clone URL asks for. */
export type TransportOp = 'read' | 'write' | 'sync';

/**
 * The verdict on a request at a clone URL: a wire-protocol request (with the query string the
 * backend gets), a browser's plain visit (answered with a hint), or something else (refused).
 */
export type WireRequest =
  /** `mutates`: the request may change the repository (it runs under the push lock). */
  | { kind: 'wire'; op: TransportOp; mutates: boolean; query: string }
  | { kind: 'hint' }
  | { kind: 'refuse'; status: 400 | 404; message: string };

/** Mercurial wire-protocol commands (version 1, as in Mercurial 6.3) a client may send. */
const HG_COMMANDS = new Set([
  'batch',
  'between',
  'branches',
  'branchmap',
  'capabilities',
  'changegroup',
  'changegroupsubset',
  'clonebundles',
  'getbundle',
  'heads',
  'hello',
  'known',
  'listkeys',
  'lookup',
  'protocaps',
  'pushkey',
  'stream_out',
  'unbundle',
]);
const GIT_SERVICES = new Set(['git-upload-pack', 'git-receive-pack']);
const FOSSIL_TYPES = new Set(['application/x-fossil', 'application/x-fossil-uncompressed']);

const exec = promisify(execFile);

const notFound = { kind: 'refuse', status: 404, message: 'not found' } as const;

/**
 * Only the VCS wire protocols are served at a clone URL: git smart HTTP (`info/refs?service=`,
 * `git-upload-pack`, `git-receive-pack`), Mercurial requests naming a wire-protocol `cmd`, and
 * Fossil sync (POST of `application/x-fossil`). The web UIs of hgweb and Fossil, and git's dumb
 * protocol, are not reachable: they would serve pushed files (HTML, JavaScript) from the service's
 * own origin. A parameter the decision depends on may appear only once, and the backend gets the
 * query string re-encoded from what Triad read, so both agree on what the request does.
 */
export function wireRequest(
  vcs: VcsKind,
  method: string,
  subpath: string,
  query: URLSearchParams,
  contentType: string | undefined,
): WireRequest {
  const atRoot = subpath === '' || subpath === '/';
  const browsing = atRoot && (method === 'GET' || method === 'HEAD') && query.size === 0;
  switch (vcs) {
    case 'git': {
      const services = query.getAll('service');
      if (services.length > 1) return { kind: 'refuse', status: 400, message: 'repeated service parameter' };
      if (browsing) return { kind: 'hint' };
      const service = services[0];
      if (
        subpath === '/info/refs' &&
        method === 'GET' &&
        service !== undefined &&
        GIT_SERVICES.has(service)
      ) {
        // the ref advertisement of a push needs push rights but changes nothing
        const op = service === 'git-receive-pack' ? 'write' : 'read';
        return { kind: 'wire', op, mutates: false, query: new URLSearchParams({ service }).toString() };
      }
      if (method === 'POST' && GIT_SERVICES.has(subpath.slice(1))) {
        const push = subpath === '/git-receive-pack';
        return { kind: 'wire', op: push ? 'write' : 'read', mutates: push, query: '' };
      }
      return notFound;
    }
    case 'hg': {
      const cmds = query.getAll('cmd');
      if (cmds.length > 1) return { kind: 'refuse', status: 400, message: 'repeated cmd parameter' };
      if (browsing) return { kind: 'hint' };
      const cmd = cmds[0];
      if (!atRoot || cmd === undefined || !HG_COMMANDS.has(cmd)) return notFound;
      if (method !== 'GET' && method !== 'POST') return notFound;
      const push = cmd === 'unbundle' || cmd === 'pushkey';
      return { kind: 'wire', op: push ? 'write' : 'read', mutates: push, query: query.toString() };
    }
    case 'fossil': {
      if (browsing) return { kind: 'hint' };
      const type = (contentType ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
      if (method === 'POST' && (atRoot || subpath === '/xfer') && FOSSIL_TYPES.has(type)) {
        return { kind: 'wire', op: 'sync', mutates: true, query: '' };
      }
      return notFound;
    }
  }
}

/** What a browser visiting a clone URL is told. */
export function cloneHint(vcs: VcsKind, url: string): string {
  const how: Record<VcsKind, string> = {
    git: `git clone ${url}`,
    hg: `hg clone ${url}`,
    fossil: `fossil clone ${url} repo.fossil`,
  };
  return `This is the clone URL of a ${vcs === 'hg' ? 'Mercurial' : vcs === 'git' ? 'Git' : 'Fossil'} repository.\nClone it with: ${how[vcs]}\n`;
}

/**
 * The hgweb CGI. Writes are allowed only for requests Triad authorised as pushes. The bundle2
 * `remote-changegroup` part (the server downloads a changegroup from a URL the pusher names) is
 * neither advertised nor accepted: a pusher could make the server fetch any URL.
 */
const HG_CGI = `import os, sys
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
`;

/** Scripts written once per directory (atomically, so a concurrent request never sees half of one). */
const scripts = new Map<string, Promise<string>>();
function script(dir: string, name: string, content: string): Promise<string> {
  const file = path.join(dir, name);
  let p = scripts.get(file);
  if (p === undefined) {
    p = (async () => {
      await fs.mkdir(dir, { recursive: true });
      await fs.writeFile(`${file}.tmp`, content);
      await fs.rename(`${file}.tmp`, file);
      return file;
    })();
    scripts.set(file, p);
    p.catch(() => scripts.delete(file));
  }
  return p;
}

/** Turns Fossil's backoffice off in a repository created before Triad did so at creation. */
async function disableBackoffice(repoFile: string): Promise<void> {
  const env = { ...process.env, USER: 'triad' };
  const check = `SELECT count(*) FROM config WHERE name IN ('backoffice-disable', 'backoffice-nodelay') AND value = '1'`;
  const read = await exec('fossil', ['sql', '-R', repoFile, '--readonly', check], { env });
  if (read.stdout.trim() === '2') return;
  await exec('fossil', ['sql', '-R', repoFile, FOSSIL_BACKOFFICE_OFF], { env });
}

const backofficeOff = new Set<string>();
async function ensureBackofficeOff(repoFile: string): Promise<void> {
  if (backofficeOff.has(repoFile)) return;
  try {
    await disableBackoffice(repoFile);
    backofficeOff.add(repoFile);
  } catch {
    // busy: tried again on the next request
  }
}

export type BackendRequest = {
  vcs: VcsKind;
  repoPath: string;
  /** Path under the clone URL, starting with '/' or empty. */
  subpath: string;
  /** The public path of the clone URL (SCRIPT_NAME). */
  scriptName: string;
  query: string;
  remoteUser: string | undefined;
  /** Triad authorised this request to write (git receive-pack, hg unbundle/pushkey). */
  write: boolean;
  req: IncomingMessage;
  res: ServerResponse;
  input: { file: string; size: number } | undefined;
  output?: string;
  tmpDir: string;
  /** Where the CGI scripts live (hgweb.py, one Fossil script per repository). */
  scriptDir: string;
  signal: AbortSignal;
};

/** Serves one request with the VCS's own HTTP backend (git http-backend, hgweb, fossil CGI). */
export async function serveBackend(b: BackendRequest): Promise<CgiResult> {
  const base = {
    req: b.req,
    res: b.res,
    scriptName: b.scriptName,
    queryString: b.query,
    remoteUser: b.remoteUser,
    input: b.input,
    tmpDir: b.tmpDir,
    signal: b.signal,
    ...(b.output === undefined ? {} : { output: b.output }),
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
          GIT_CONFIG_COUNT: '2',
          GIT_CONFIG_KEY_0: 'http.receivepack',
          GIT_CONFIG_VALUE_0: b.write ? 'true' : 'false',
          // an automatic gc after a push stays in the foreground, inside the run's process group
          GIT_CONFIG_KEY_1: 'gc.autoDetach',
          GIT_CONFIG_VALUE_1: 'false',
        },
      });
    case 'hg':
      return runCgi({
        ...base,
        command: '/usr/bin/python3',
        args: [await script(b.scriptDir, 'hgweb.py', HG_CGI)],
        pathInfo: '/',
        env: {
          TRIAD_HG_REPO: b.repoPath,
          TRIAD_HG_PUSH: b.write ? '1' : '0',
          HGPLAIN: '1',
          HGENCODING: 'UTF-8',
        },
      });
    case 'fossil':
      await ensureBackofficeOff(b.repoPath);
      return runCgi({
        ...base,
        command: 'fossil',
        args: [await script(b.scriptDir, `${path.basename(b.repoPath)}.cgi`, `repository: ${b.repoPath}\n`)],
        pathInfo: '/',
        env: {},
      });
  }
}
