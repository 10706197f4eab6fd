import type { EntityManager } from '@mikro-orm/postgresql';
import type { Snapshot } from '../vcs/driver.ts';
import * as db from './repository.ts';
import type { SnapshotJson } from './repository.ts';

/** A repository's refs as `repo_ref_states` records them (changes.ts), to and from JSON. */

export function toJson(s: Snapshot): SnapshotJson {
  const sorted = (m: Map<string, string>) => [...m].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return {
    tip: s.tip,
    branches: sorted(s.branches),
    bookmarks: sorted(s.bookmarks),
    tags: sorted(s.tags),
    mark: s.mark,
  };
}

export function fromJson(j: SnapshotJson): Snapshot {
  return {
    tip: j.tip,
    branches: new Map(j.branches),
    bookmarks: new Map(j.bookmarks),
    tags: new Map(j.tags),
    mark: j.mark,
  };
}

export async function loadState(tx: EntityManager, repoId: number): Promise<Snapshot | undefined> {
  const state = await db.refState(tx, repoId);
  return state === undefined ? undefined : fromJson(state);
}
