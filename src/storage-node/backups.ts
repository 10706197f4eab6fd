import type { Logger } from 'pino';
import client from 'prom-client';
import type { BlobStore } from '../storage/blob.ts';
import type { VcsKind } from '../vcs/index.ts';
import { backupRepository } from './backup.ts';

/**
 * A node's backups (docs/backups.md): after each change, what changed goes to the blob store
 * (`backupRepository`) before the change is answered; a deleted repository's backup goes with it.
 */
export function nodeBackups(o: { blob: BlobStore; tmpDir: string; registry: client.Registry; log: Logger }) {
  const seconds = new client.Histogram({
    name: 'triad_storage_backup_duration_seconds',
    help: 'Backups written after a change, by kind',
    labelNames: ['kind'],
    buckets: [0.01, 0.03, 0.1, 0.3, 1, 3, 10, 30],
    registers: [o.registry],
  });
  const bytes = new client.Counter({
    name: 'triad_storage_backup_bytes_total',
    help: 'Bytes written to the blob store by backups, by kind',
    labelNames: ['kind'],
    registers: [o.registry],
  });
  return {
    backup: async (r: { id: number; kind: VcsKind; dir: string }) => {
      const out = await backupRepository({
        blob: o.blob,
        repoId: r.id,
        kind: r.kind,
        dir: r.dir,
        tmpDir: o.tmpDir,
      });
      seconds.observe({ kind: r.kind }, out.ms / 1000);
      bytes.inc({ kind: r.kind }, out.bytes);
      o.log.debug({ repo: r.id, ...out }, 'backup written');
    },
    drop: (id: number) => o.blob.deletePrefix(`repos/${id}/`),
  };
}
