import fs from 'node:fs/promises';
import path from 'node:path';

async function exists(p: string): Promise<boolean> {
  return fs
    .access(p)
    .then(() => true)
    .catch(() => false);
}

async function entries(dir: string): Promise<string[]> {
  return fs.readdir(dir).catch(() => []);
}

/** `*.lock` files under `dir`, recursively. */
async function lockFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await fs.readdir(dir, { withFileTypes: true }).catch(() => [])) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...(await lockFiles(p)));
    else if (e.name.endsWith('.lock')) out.push(p);
  }
  return out;
}

/**
 * The quarantine directory of a receive-pack's unaccepted objects: `tmp_objdir-incoming-XXXXXX`
 * (git 2.35 and later; other `tmp_objdir-*` prefixes belong to other commands, which may run
 * without the push lock), `incoming-XXXXXX` before.
 */
const QUARANTINE = /^(tmp_objdir-)?incoming-/;

/**
 * What a receive-pack (or the gc it runs) killed mid-way leaves behind: the quarantine
 * directories of unaccepted objects, temporary pack files, and lock files on refs, packed-refs,
 * HEAD, shallow and the pack indexes. A stale ref lock would make every later push to that branch
 * fail. Called only under the push lock, when no Triad push is running on the repository.
 */
export async function recover(dir: string): Promise<string[]> {
  const objects = path.join(dir, 'objects');
  const found: string[] = [];
  for (const n of await entries(objects)) if (QUARANTINE.test(n)) found.push(path.join(objects, n));
  for (const sub of ['pack', 'info']) {
    for (const n of await entries(path.join(objects, sub))) {
      if (n.startsWith('tmp_') || n.startsWith('.tmp-') || n.endsWith('.lock'))
        found.push(path.join(objects, sub, n));
    }
  }
  found.push(...(await lockFiles(path.join(dir, 'refs'))));
  for (const n of ['packed-refs.lock', 'HEAD.lock', 'shallow.lock']) {
    if (await exists(path.join(dir, n))) found.push(path.join(dir, n));
  }
  for (const p of found) await fs.rm(p, { recursive: true, force: true });
  return found.map((p) => path.relative(dir, p));
}
