/**
 * Incremental backups of the repositories a storage node holds, to the blob store, and their exact
 * restore. Everything of repository `id` lives under `repos/<id>/`: data objects
 * `data/<seq>.<ext>` (git bundles, hg bundles, fossil repository files) and `manifest.json`, which
 * names the objects a restore applies, in order, and the refs it must end with. The manifest is put
 * last, after every object it names, so a backup that stops half-way leaves the previous manifest,
 * and so the previous state, intact. Per kind: backup/git.ts, backup/hg.ts, backup/fossil.ts;
 * docs/backups.md for what a restore guarantees.
 *
 * Objects no manifest names any more (earlier Fossil files) stay in the store: compacting a
 * repository's backup into fewer objects is not done here.
 *
 * Callers hold the repository's exclusive lock during `backupRepository` (no writer runs), and
 * one repository's backups never run concurrently.
 */
import { randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { BlobStore } from '../storage/blob.ts';
import type { VcsKind } from '../vcs/constants.ts';
import { withTempDir } from '../vcs/process/run.ts';
import { fossilBackup } from './backup/fossil.ts';
import { gitBackup } from './backup/git.ts';
import { hgBackup } from './backup/hg.ts';
import {
  BackupNotFound,
  dataKey,
  downloadFile,
  readManifest,
  uploadFile,
  writeManifest,
  type KindBackup,
  type Manifest,
  type Objects,
} from './backup/manifest.ts';

export { BackupNotFound } from './backup/manifest.ts';

export type BackupTarget = { blob: BlobStore; repoId: number; kind: VcsKind; dir: string; tmpDir: string };

/** A manifest without its kind and refs: what every kind's backup shares. */
type Common = Omit<Manifest, 'kind' | 'refs'>;

/**
 * One kind's backup: captures what changed, uploads the data object (if any) and answers the next
 * manifest's fields. Nothing is written to the manifest key here.
 */
async function step<R>(
  t: BackupTarget,
  kind: KindBackup<R>,
  prev: (Common & { refs: R }) | undefined,
  work: string,
): Promise<{ common: Common; refs: R; bytes: number; objects: number }> {
  const captured = await kind.capture(t.dir, prev, work);
  let seq = prev?.seq ?? 0;
  let objects = prev?.objects ?? [];
  let digests = prev?.digests ?? {};
  let bytes = 0;
  if (captured.data !== undefined) {
    seq += 1;
    const key = dataKey(t.repoId, seq, kind.ext);
    const up = await uploadFile(t.blob, key, captured.data);
    bytes += up.size;
    objects = kind.replaces ? [key] : [...objects, key];
    digests = Object.fromEntries(objects.map((k) => [k, k === key ? up.sha256 : digests[k]!]));
  }
  const common: Common = {
    version: 1,
    repoId: t.repoId,
    at: new Date().toISOString(),
    seq,
    objects,
    digests,
    heads: captured.heads,
  };
  return { common, refs: captured.refs, bytes, objects: captured.data === undefined ? 0 : 1 };
}

/**
 * Writes what changed since the last backup of this repository, then the new manifest. Answers the
 * bytes put (data objects and the manifest), how many data objects were put (0 or 1) and the time
 * it took.
 */
export async function backupRepository(
  t: BackupTarget,
): Promise<{ bytes: number; objects: number; ms: number }> {
  const started = performance.now();
  const prev = await readManifest(t.blob, t.repoId, t.kind);
  return withTempDir(t.tmpDir, 'backup-', async (work) => {
    let manifest: Manifest;
    let written: { bytes: number; objects: number };
    // One branch per kind, so that each kind's refs keep their type into the manifest.
    switch (t.kind) {
      case 'git': {
        const r = await step(t, gitBackup, prev?.kind === 'git' ? prev : undefined, work);
        manifest = { ...r.common, kind: 'git', refs: r.refs };
        written = r;
        break;
      }
      case 'hg': {
        const r = await step(t, hgBackup, prev?.kind === 'hg' ? prev : undefined, work);
        manifest = { ...r.common, kind: 'hg', refs: r.refs };
        written = r;
        break;
      }
      case 'fossil': {
        const r = await step(t, fossilBackup, prev?.kind === 'fossil' ? prev : undefined, work);
        manifest = { ...r.common, kind: 'fossil', refs: r.refs };
        written = r;
        break;
      }
    }
    const bytes = written.bytes + (await writeManifest(t.blob, manifest));
    return { bytes, objects: written.objects, ms: Math.round(performance.now() - started) };
  });
}

async function exists(p: string): Promise<boolean> {
  return fs.lstat(p).then(
    () => true,
    () => false,
  );
}

/**
 * Rebuilds the repository at `dest` (must not exist) from the store exactly as the last manifest
 * says; throws BackupNotFound when there is none. The repository is built beside `dest` and renamed
 * into place once its refs were checked against the manifest, so a failed restore leaves nothing
 * at `dest`.
 */
export async function restoreRepository(t: {
  blob: BlobStore;
  repoId: number;
  kind: VcsKind;
  dest: string;
  tmpDir: string;
}): Promise<void> {
  if (await exists(t.dest)) throw new Error(`restore: ${t.dest} already exists`);
  const m = await readManifest(t.blob, t.repoId, t.kind);
  if (m === undefined) throw new BackupNotFound(`no backup of ${t.kind} repository ${t.repoId}`);
  const parent = path.dirname(t.dest);
  await fs.mkdir(parent, { recursive: true });
  // Hidden, and on the same file system as `dest` for the rename.
  const stage = path.join(parent, `.${path.basename(t.dest)}.restoring-${randomUUID().slice(0, 8)}`);
  const objects: Objects = {
    keys: m.objects,
    fetch: (key, file) => downloadFile(t.blob, key, file, m.digests[key]!),
  };
  try {
    await withTempDir(t.tmpDir, 'restore-', async (work) => {
      switch (m.kind) {
        case 'git':
          return gitBackup.restore(stage, objects, m, work);
        case 'hg':
          return hgBackup.restore(stage, objects, m, work);
        case 'fossil':
          return fossilBackup.restore(stage, objects, m, work);
      }
    });
    if (await exists(t.dest)) throw new Error(`restore: ${t.dest} appeared during the restore`);
    await fs.rename(stage, t.dest);
  } finally {
    await fs.rm(stage, { recursive: true, force: true, maxRetries: 3 });
  }
}

/** The repository ids that have a backup (from the keys `repos/<id>/manifest.json`), ascending. */
export async function backedUpRepositories(blob: BlobStore): Promise<number[]> {
  const ids = new Set<number>();
  for await (const o of blob.list('repos/')) {
    const match = /^repos\/(\d+)\/manifest\.json$/.exec(o.key);
    if (match !== null) ids.add(Number(match[1]));
  }
  return [...ids].sort((a, b) => a - b);
}
