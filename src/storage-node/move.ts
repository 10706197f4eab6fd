/**
 * `triad admin repo move ORG/REPO --to NODE` (docs/storage.md): under the repository's push lock
 * (pushes, merges and tag creations wait; clones and reads go on), the target node copies the
 * repository from its node, the copy's refs are compared with the original's, the row is switched
 * to the target, and the source lets its copy go (requests already reading it end normally; new
 * ones are told it is not there and follow the row). Any failure before the switch removes the
 * copy and leaves the repository where it was.
 */
import type { RepoChanges } from '../repos/changes.ts';
import type { ReposService } from '../repos/service.ts';
import { nodePath, placed, readText, refusal, type StorageClient } from '../vcs/remote/client.ts';
import type { Snapshot } from '../vcs/driver.ts';
import { StorageNodes } from './service.ts';

export type MoveDeps = {
  repos: ReposService;
  changes: RepoChanges;
  nodes: StorageNodes;
  client: StorageClient;
};

export class MoveRefused extends Error {}

/** Longest a move may wait for the push lock. */
const LOCK_WAIT_MS = 5 * 60_000;

export async function moveRepository(
  d: MoveDeps,
  repoId: number,
  to: string,
): Promise<{ from: string; to: string }> {
  const repo = await d.repos.handleById(repoId);
  const nodes = await d.nodes.list();
  const target = nodes.find((n) => n.name === to);
  if (target === undefined) throw new MoveRefused(`no storage node named ${to}`);
  if (!StorageNodes.healthy(target))
    throw new MoveRefused(`storage node ${to} has not sent a heartbeat lately`);
  let from = '';
  await d.changes.change(
    repo,
    null,
    async () => {
      // the row as it is now, under the lock (a move before this one may have switched it)
      const current = await d.repos.storageNodeOf(repoId);
      if (current === undefined) throw new MoveRefused('the repository is not on a storage node');
      from = current;
      if (current === to) throw new MoveRefused(`the repository is already on ${to}`);
      const source = nodes.find((n) => n.name === current);
      if (source === undefined) throw new MoveRefused(`its node ${current} is not registered`);
      const name = placed(repo.path).repo;
      const original = nodePath(current, name);
      const copy = nodePath(to, name);
      const snapshot = async (dir: string) =>
        (await d.client.call(dir, repo.vcs, 'driver', 'snapshot', [], { exact: true })) as Snapshot;
      const before = await snapshot(original);
      const q = new URLSearchParams({ repo: name, kind: repo.vcs, from: source.address });
      const res = await d.client.send(to, { method: 'POST', path: `/internal/v1/import?${q.toString()}` });
      const text = await readText(res);
      if (res.statusCode !== 200) throw refusal(res, text);
      try {
        const after = await snapshot(copy);
        if (!sameRefs(before, after)) throw new Error('the copy does not have the refs of the original');
        await d.repos.setStorageNode(repoId, to);
      } catch (e) {
        await d.client
          .call(copy, repo.vcs, 'driver', 'remove', [{ keepBackup: true }], { exact: true })
          .catch(() => undefined);
        throw e;
      }
      await d.client.call(original, repo.vcs, 'driver', 'remove', [{ keepBackup: true }], { exact: true });
    },
    { signal: new AbortController().signal, deadline: Date.now() + LOCK_WAIT_MS },
  );
  return { from, to };
}

function sameRefs(a: Snapshot, b: Snapshot): boolean {
  const flat = (s: Snapshot) =>
    JSON.stringify([s.tip, s.mark, ...[s.branches, s.bookmarks, s.tags].map((m) => [...m].sort())]);
  return flat(a) === flat(b);
}
