/**
 * `triad storage restore [--repo ID] [--force]` (docs/backups.md): rebuilds this node's
 * repositories from their backups in the blob store. By default every repository whose row names
 * this node and whose files are missing (a lost volume); `--repo` one of them, `--force` also
 * when its files exist (they are replaced). Each one is rebuilt beside the others and renamed
 * into place, so the node may keep serving meanwhile.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import type { BlobStore } from '../storage/blob.ts';
import type { VcsKind } from '../vcs/index.ts';
import { restoreRepository } from './backup.ts';
import { releaseRepository } from './copies.ts';

export type RestoreReport = {
  restored: number[];
  present: number[];
  failed: { id: number; error: string }[];
};

export async function restoreNode(o: {
  repos: { onNode(node: string): Promise<{ id: number; vcs: VcsKind }[]> };
  blob: BlobStore;
  root: string;
  node: string;
  repo?: number;
  force?: boolean;
}): Promise<RestoreReport> {
  const all = await o.repos.onNode(o.node);
  const wanted = o.repo === undefined ? all : all.filter((r) => r.id === o.repo);
  if (o.repo !== undefined && wanted.length === 0)
    throw new Error(`repository ${o.repo} is not on node ${o.node}`);
  const report: RestoreReport = { restored: [], present: [], failed: [] };
  const work = path.join(o.root, '.incoming');
  await fs.mkdir(work, { recursive: true });
  for (const r of wanted) {
    const name = `${r.id}.${r.vcs}`;
    const dest = path.join(o.root, name);
    const exists = await fs.stat(dest).then(
      () => true,
      () => false,
    );
    if (exists && o.force !== true) {
      report.present.push(r.id);
      continue;
    }
    const tmp = await fs.mkdtemp(path.join(work, `${name}-`));
    try {
      await restoreRepository({
        blob: o.blob,
        repoId: r.id,
        kind: r.vcs,
        dest: path.join(tmp, name),
        tmpDir: tmp,
      });
      if (exists) await releaseRepository(o.root, name);
      await fs.rename(path.join(tmp, name), dest);
      report.restored.push(r.id);
    } catch (e) {
      report.failed.push({ id: r.id, error: e instanceof Error ? e.message : String(e) });
    } finally {
      await fs.rm(tmp, { recursive: true, force: true });
    }
  }
  return report;
}
