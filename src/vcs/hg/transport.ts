import { fileURLToPath } from 'node:url';
import { HG } from '../constants.ts';
import { atRoot, cloneHint, notFound, wireParam, type VcsTransport } from '../transport.ts';
import type { WsgiApp } from '../process/wsgi.ts';

/** Mercurial wire-protocol commands (version 1, as in Mercurial 6.3) a client may send. */
const COMMANDS = new Set([
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

/**
 * The pooled hgweb workers (hgwsgi.py next to this file). Their environment is as small as a
 * CGI program's: hooks see the request's CGI variables, never the server's own environment.
 */
const HGWEB: WsgiApp = {
  name: 'hgweb',
  command: HG.python,
  args: [fileURLToPath(new URL('./hgwsgi.py', import.meta.url))],
  env: {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: process.env.HOME ?? '/tmp',
    LANG: 'C.UTF-8',
    HGPLAIN: HG.env.HGPLAIN,
    HGENCODING: HG.env.HGENCODING,
  },
};

/** Requests naming a wire-protocol `cmd` at the clone URL, served by pooled hgweb workers. */
export const transport: VcsTransport = {
  classify(method, subpath, query) {
    const p = wireParam(method, subpath, query, 'cmd');
    if ('verdict' in p) return p.verdict;
    const cmd = p.value;
    if (!atRoot(subpath) || cmd === undefined || !COMMANDS.has(cmd)) return notFound;
    if (method !== 'GET' && method !== 'POST') return notFound;
    const push = cmd === 'unbundle' || cmd === 'pushkey';
    return { kind: 'wire', op: push ? 'write' : 'read', mutates: push, query: query.toString() };
  },

  cloneHint: (url) => cloneHint(HG.label, `hg clone ${url}`),

  remoteUser: (username) => username,

  backend: (b) =>
    Promise.resolve({
      wsgi: HGWEB,
      pathInfo: '/',
      env: { HGPLAIN: HG.env.HGPLAIN, HGENCODING: HG.env.HGENCODING },
      // protected refs: checked by the worker in the push's transaction (triadprotect.py)
      fields: { repo: b.repoPath, push: b.write, protection: b.write ? (b.protection ?? null) : null },
    }),
};
