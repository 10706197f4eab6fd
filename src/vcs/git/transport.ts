import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { GIT } from '../constants.ts';
import { cloneHint, notFound, wireParam, type VcsTransport } from '../transport.ts';

const SERVICES = new Set(['git-upload-pack', 'git-receive-pack']);

const PRE_RECEIVE = fileURLToPath(new URL('../../protection/git-pre-receive.ts', import.meta.url));

/**
 * The hooks directory of pushes to protected repositories: a `pre-receive` that runs
 * src/protection/git-pre-receive.ts with this server's Node. Looked for on every such push and
 * written when missing (a directory without the hook would let every push through).
 */
async function hooksDir(scriptDir: string): Promise<string> {
  const d = path.join(scriptDir, 'git-hooks');
  const hook = path.join(d, 'pre-receive');
  const present = await fs.access(hook, fs.constants.X_OK).then(
    () => true,
    () => false,
  );
  if (present) return d;
  await fs.mkdir(d, { recursive: true });
  const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  // Node's compile cache (there) halves the hook's start: ~35 ms instead of ~70 (bench/README.md)
  const cache = path.join(d, '.compile-cache');
  const script = `#!/bin/sh\nNODE_COMPILE_CACHE=${quote(cache)} exec ${quote(process.execPath)} --no-warnings ${quote(PRE_RECEIVE)}\n`;
  const tmp = path.join(d, `.pre-receive.${process.pid}.${randomBytes(4).toString('hex')}`);
  await fs.writeFile(tmp, script, { mode: 0o755 });
  await fs.rename(tmp, hook);
  return d;
}

/**
 * Git smart HTTP: `info/refs?service=`, `git-upload-pack`, `git-receive-pack`, served by
 * `git http-backend`; receive-pack is enabled only for requests Triad authorised as pushes.
 */
export const transport: VcsTransport = {
  classify(method, subpath, query) {
    const p = wireParam(method, subpath, query, 'service');
    if ('verdict' in p) return p.verdict;
    const service = p.value;
    if (subpath === '/info/refs' && method === 'GET' && service !== undefined && SERVICES.has(service)) {
      // the ref advertisement of a push needs push rights but changes nothing
      const op = service === 'git-receive-pack' ? 'write' : 'read';
      return { kind: 'wire', op, mutates: false, query: new URLSearchParams({ service }).toString() };
    }
    if (method === 'POST' && SERVICES.has(subpath.slice(1))) {
      const push = subpath === '/git-receive-pack';
      return { kind: 'wire', op: push ? 'write' : 'read', mutates: push, query: '' };
    }
    return notFound;
  },

  cloneHint: (url) => cloneHint(GIT.label, `git clone ${url}`),

  remoteUser: (username) => username,

  // Before a pack larger than its post buffer, git sends receive-pack a body of one flush packet
  // ("0000": no ref updates) to find out whether credentials are needed; it changes nothing.
  inert: async (input) =>
    input === undefined || (input.size === 4 && (await fs.readFile(input.file, 'latin1')) === '0000'),

  backend: async (b) => {
    const env: Record<string, string> = {
      GIT_PROJECT_ROOT: path.dirname(b.repoPath),
      GIT_HTTP_EXPORT_ALL: '1',
      GIT_HTTP_MAX_REQUEST_BUFFER: '100M',
      GIT_CONFIG_COUNT: '2',
      GIT_CONFIG_KEY_0: 'http.receivepack',
      GIT_CONFIG_VALUE_0: b.write ? 'true' : 'false',
      // an automatic gc after a push stays in the foreground, inside the run's process group
      GIT_CONFIG_KEY_1: 'gc.autoDetach',
      GIT_CONFIG_VALUE_1: 'false',
    };
    if (b.protection !== undefined && b.write) {
      // protected refs: the pre-receive hook judges the ref updates before any of them moves
      Object.assign(env, {
        GIT_CONFIG_COUNT: '3',
        GIT_CONFIG_KEY_2: 'core.hooksPath',
        GIT_CONFIG_VALUE_2: await hooksDir(b.scriptDir),
        TRIAD_PROTECTION: JSON.stringify(b.protection),
      });
    }
    return {
      command: GIT.bin,
      args: ['http-backend'],
      pathInfo: `/${path.basename(b.repoPath)}${b.subpath}`,
      env,
    };
  },
};
