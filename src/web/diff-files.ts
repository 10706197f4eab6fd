/**
 * A changeset's unified diff (git-style sections, `diff --git a/P b/P`, for all three kinds: see
 * src/vcs/diff.ts) split into files with their added and removed line counts, and the parsed
 * changesets kept in a small LRU by repository and commit, so a file's diff loaded later (the
 * changeset page's collapsed files) is not parsed again.
 */
import type { Changeset } from '../vcs/reader.ts';
import { ByteLru } from './byte-lru.ts';

export type FileStatus = 'added' | 'deleted' | 'modified';

export type DiffFile = {
  /** Position in the changeset (the anchor `#file-N`). */
  index: number;
  path: string;
  status: FileStatus;
  /** A mode change line (`old mode` / `new mode`), when there is one. */
  mode: string | undefined;
  binary: boolean;
  /** Shown by its header only: a version of the file is too large (`diff_truncated_files`). */
  tooLarge: boolean;
  added: number;
  removed: number;
  /** The hunk lines (from the first `@@`), as in the diff. */
  lines: string[];
};

export type ParsedChangeset = {
  cs: Changeset;
  files: DiffFile[];
  /**
   * Files were left out of the diff at its total cap (their names are not known). Only certain
   * when no file is shown by its header only; with such files, files may be missing too.
   */
  cut: boolean;
};

/** `a/P b/P` -> P (both sides name the same path: the drivers show no renames). */
function pathOf(rest: string): string {
  const half = (rest.length - 5) / 2;
  if (Number.isInteger(half) && half > 0 && rest.startsWith('a/') && rest.slice(half + 3, half + 5) === 'b/')
    return rest.slice(2, 2 + half);
  const m = / b\/(.*)$/.exec(rest);
  return m?.[1] ?? rest.replace(/^a\//, '');
}

export function parseDiff(cs: Changeset): ParsedChangeset {
  const files: DiffFile[] = [];
  const truncated = new Set(cs.diff_truncated_files);
  let f: DiffFile | undefined;
  let inHunks = false;
  const text = cs.diff;
  let start = 0;
  while (start < text.length) {
    let end = text.indexOf('\n', start);
    if (end < 0) end = text.length;
    const line = text.slice(start, end);
    start = end + 1;
    if (line.startsWith('diff --git ')) {
      const path = pathOf(line.slice('diff --git '.length));
      f = {
        index: files.length,
        path,
        status: 'modified',
        mode: undefined,
        binary: false,
        tooLarge: truncated.has(path),
        added: 0,
        removed: 0,
        lines: [],
      };
      files.push(f);
      inHunks = false;
      continue;
    }
    if (f === undefined) continue;
    if (inHunks) {
      const c = line.charCodeAt(0);
      if (c === 43 /* + */) f.added++;
      else if (c === 45 /* - */) f.removed++;
      f.lines.push(line);
      continue;
    }
    if (line.startsWith('@@')) {
      inHunks = true;
      f.lines.push(line);
    } else if (line.startsWith('new file mode')) f.status = 'added';
    else if (line.startsWith('deleted file mode')) f.status = 'deleted';
    else if (line.startsWith('old mode ')) f.mode = line.slice('old mode '.length);
    else if (line.startsWith('new mode ')) f.mode = `${f.mode ?? '?'} → ${line.slice('new mode '.length)}`;
    else if (line.startsWith('Binary files ')) f.binary = true;
  }
  // a truncated file that has no section (never expected) is still named
  for (const path of truncated) {
    if (files.some((x) => x.path === path)) continue;
    files.push({
      index: files.length,
      path,
      status: 'modified',
      mode: undefined,
      binary: false,
      tooLarge: true,
      added: 0,
      removed: 0,
      lines: [],
    });
  }
  return { cs, files, cut: cs.diff_truncated && truncated.size === 0 };
}

const parsed = new ByteLru<string, ParsedChangeset>(
  64 * 1024 * 1024,
  (p) => 2 * p.cs.diff.length + 2 * p.cs.message.length + 200 * p.files.length + 1024,
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
  const p = parseDiff(await read());
  parsed.set(key, p);
  return p;
}
