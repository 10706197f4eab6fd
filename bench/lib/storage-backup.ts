/**
 * The backup's cost per push for bench/storage-nodes.ts: per kind, two copies of the generated
 * repository through one nodes-mode server, one on a node without a blob store and one on a node
 * backing up to MinIO; both get the same five-commit pushes (after one untimed push each, whose
 * backup puts the whole history), and the second node's metrics tell what each push put. For
 * Fossil also a clone by a token that may write (a sync that may push: every round trip goes the
 * push path, and so is backed up).
 */
import path from 'node:path';
import type { VcsKind } from '../../src/vcs/index.ts';
import type { ApiCall, ServerProcess } from './server.ts';
import { metricSum, registerOnNode, type NodeProcess } from './storage-setup.ts';
import { cloneOnce, median, pusher, sideBySide, type Target } from './storage-transport.ts';

export type BackupRow = {
  vcs: VcsKind;
  pushes: number;
  /** Median seconds of a five-commit push to the node without backups and to the one with. */
  off: number;
  on: number;
  backupsPerPush: number;
  /** Seconds the node spent writing backups, per push. */
  backupSeconds: number;
  bytesPerPush: number;
  /** Bytes of the first backup after the generated repository was copied in. */
  firstBytes: number;
  /** Fossil: one clone by a token that may write, to each node, and what the backing-up one did. */
  writerClone?: { off: number; on: number; backups: number; seconds: number; bytes: number };
};

/** What node `n` has backed up so far, of one kind. */
async function backedUp(n: NodeProcess, kind: VcsKind) {
  const text = await n.metrics();
  return {
    bytes: metricSum(text, 'triad_storage_backup_bytes_total', { kind }),
    count: metricSum(text, 'triad_storage_backup_duration_seconds_count', { kind }),
    seconds: metricSum(text, 'triad_storage_backup_duration_seconds_sum', { kind }),
  };
}

export async function measureBackup(o: {
  vcs: VcsKind;
  /** The generated repository. */
  from: string;
  /** Its name's stem (`<stem>-off`, `<stem>-on`). */
  stem: string;
  org: string;
  server: ServerProcess;
  api: ApiCall;
  sql: (text: string, values: unknown[]) => Promise<unknown>;
  /** Without a blob store, and with one. */
  plain: NodeProcess;
  backing: NodeProcess;
  pushes: number;
  work: string;
}): Promise<BackupRow> {
  const { vcs } = o;
  const target = async (name: string, node: NodeProcess): Promise<Target> => {
    await registerOnNode({
      server: o.server,
      api: o.api,
      org: o.org,
      name,
      vcs,
      from: o.from,
      node,
      sql: o.sql,
    });
    return { base: o.server.url, org: o.org, name, token: o.server.token };
  };
  const a = await target(`${o.stem}-off`, o.plain);
  const b = await target(`${o.stem}-on`, o.backing);
  const p = await pusher(vcs, o.from, path.join(o.work, `backup-${vcs}`));
  const m0 = await backedUp(o.backing, vcs);
  await p.fiveCommits('w');
  await p.push(a);
  await p.push(b);
  const m1 = await backedUp(o.backing, vcs);
  const pushes = await sideBySide({
    runs: o.pushes,
    a,
    b,
    step: p.push,
    before: (round) => p.fiveCommits(`b${round}`),
  });
  const m2 = await backedUp(o.backing, vcs);
  const row: BackupRow = {
    vcs,
    pushes: o.pushes,
    off: median(pushes.a.map((t) => t.s)),
    on: median(pushes.b.map((t) => t.s)),
    backupsPerPush: (m2.count - m1.count) / o.pushes,
    backupSeconds: (m2.seconds - m1.seconds) / o.pushes,
    bytesPerPush: (m2.bytes - m1.bytes) / o.pushes,
    firstBytes: m1.bytes - m0.bytes,
  };
  if (vcs === 'fossil') {
    const off = await cloneOnce(vcs, a, o.work, true);
    const on = await cloneOnce(vcs, b, o.work, true);
    const m3 = await backedUp(o.backing, vcs);
    row.writerClone = {
      off: off.s,
      on: on.s,
      backups: m3.count - m2.count,
      seconds: m3.seconds - m2.seconds,
      bytes: m3.bytes - m2.bytes,
    };
  }
  return row;
}
