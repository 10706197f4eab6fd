import fs from 'node:fs/promises';
import path from 'node:path';
import { FOSSIL } from '../constants.ts';
import { output } from '../refs.ts';
import { atRoot, browsing, cloneHint, notFound, type VcsTransport } from '../transport.ts';
import { BACKOFFICE_OFF } from './sql.ts';
import { refusalProgram, refusedSync } from './protect.ts';

const TYPES = new Set(['application/x-fossil', 'application/x-fossil-uncompressed']);

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
  const check = `SELECT count(*) FROM config WHERE name IN ('backoffice-disable', 'backoffice-nodelay') AND value = '1'`;
  const read = await output(FOSSIL.bin, ['sql', '-R', repoFile, '--readonly', check], FOSSIL.env);
  if (read.trim() === '2') return;
  await output(FOSSIL.bin, ['sql', '-R', repoFile, BACKOFFICE_OFF], FOSSIL.env);
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

/**
 * Fossil sync (POST of `application/x-fossil`) through a per-repository CGI script. Clone and
 * push are the same request, so the HTTP layer cannot tell them apart (`sync`): Fossil enforces
 * the rights of the repository user REMOTE_USER names (a reader or a writer).
 */
export const transport: VcsTransport = {
  classify(method, subpath, query, contentType) {
    if (browsing(method, subpath, query)) return { kind: 'hint' };
    const type = (contentType ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
    if (method === 'POST' && (atRoot(subpath) || subpath === '/xfer') && TYPES.has(type)) {
      return { kind: 'wire', op: 'sync', mutates: true, query: '' };
    }
    return notFound;
  },

  cloneHint: (url) => cloneHint(FOSSIL.label, `fossil clone ${url} repo.fossil`),

  remoteUser: (_username, canWrite) => (canWrite ? FOSSIL.writer : FOSSIL.reader),

  async backend(b) {
    await ensureBackofficeOff(b.repoPath);
    // protected refs: a push the rules refuse never reaches the repository (protect.ts)
    const refused = b.protection === undefined ? undefined : await refusedSync(b);
    if (refused !== undefined) return refusalProgram(b, refused);
    const name = `${path.basename(b.repoPath)}.cgi`;
    return {
      command: FOSSIL.bin,
      args: [await script(b.scriptDir, name, `repository: ${b.repoPath}\n`)],
      pathInfo: '/',
      env: {},
    };
  },
};
