import { fileURLToPath } from 'node:url';
import { HG } from '../constants.ts';
import { atRoot, cloneHint, notFound, wireParam, type VcsTransport } from '../transport.ts';

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

/** The hgweb CGI script shipped next to this file. */
const HGWEB = fileURLToPath(new URL('./hgweb.py', import.meta.url));

/** Requests naming a wire-protocol `cmd` at the clone URL, served by hgweb (hgweb.py). */
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
      command: HG.python,
      args: [HGWEB],
      pathInfo: '/',
      env: {
        TRIAD_HG_REPO: b.repoPath,
        TRIAD_HG_PUSH: b.write ? '1' : '0',
        HGPLAIN: HG.env.HGPLAIN,
        HGENCODING: HG.env.HGENCODING,
      },
    }),
};
