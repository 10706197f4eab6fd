/**
 * A changeset's diff split into files (src/vcs/diff-files.ts), and the parsed changesets kept in
 * a small LRU by repository and commit, so a file's diff loaded later (the changeset page's
 * collapsed files) is not parsed again.
 */
import type { Changeset } from '../vcs/reader.ts';
import { ByteLru } from '../vcs/byte-lru.ts';
import { parseDiff, parsedSize, type ParsedDiff } from '../vcs/diff-files.ts';

export type { DiffFile, FileStatus } from '../vcs/diff-files.ts';

export type ParsedChangeset = ParsedDiff & { cs: Changeset };

const parsed = new ByteLru<string, ParsedChangeset>(
  64 * 1024 * 1024,
  (p) => parsedSize(p, p.cs.diff.length) + 2 * p.cs.message.length,
);

/** The parsed changeset of a commit of a repository, read once and kept. */
export async function parsedChangeset(
  repoId: number,
  commit: string,
  read: () => Promise<Changeset>,
): Promise<ParsedChangeset> {
  const key = `${repoId}:${commit}`;
  const kept = parsed.get(key);
  if (kept !== undefined) return kept;
  const cs = await read();
  const p = { ...parseDiff(cs), cs };
  parsed.set(key, p);
  return p;
}
