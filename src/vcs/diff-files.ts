/**
 * A capped unified diff (git-style sections, `diff --git a/P b/P`, for all three kinds: see
 * diff.ts and hg/triadread.py) split into files with their added and removed line counts: what
 * the changeset and pull request pages show, and the file items of the compare API.
 */
import type { DiffResult } from './reader.ts';

export type FileStatus = 'added' | 'deleted' | 'modified' | 'renamed';

export type DiffFile = {
  /** Position in the diff (the anchor `#file-N`). */
  index: number;
  path: string;
  /** A renamed file's old path (Mercurial records renames; git and Fossil show a deletion and an addition). */
  previousPath: string | undefined;
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

export type ParsedDiff = {
  files: DiffFile[];
  /**
   * Files were left out of the diff at its total cap (their names are not known). Only certain
   * when no file is shown by its header only; with such files, files may be missing too.
   */
  cut: boolean;
  /** The diff is incomplete (`diff_truncated`): a file shown by its header only, or files left out. */
  truncated: boolean;
};

/** `a/P b/P` -> P (both sides name the same path; a rename's `rename to` line names the new one). */
function pathOf(rest: string): string {
  const half = (rest.length - 5) / 2;
  if (Number.isInteger(half) && half > 0 && rest.startsWith('a/') && rest.slice(half + 3, half + 5) === 'b/')
    return rest.slice(2, 2 + half);
  const m = / b\/(.*)$/.exec(rest);
  return m?.[1] ?? rest.replace(/^a\//, '');
}

function newFile(index: number, path: string, tooLarge: boolean): DiffFile {
  return {
    index,
    path,
    previousPath: undefined,
    status: 'modified',
    mode: undefined,
    binary: false,
    tooLarge,
    added: 0,
    removed: 0,
    lines: [],
  };
}

export function parseDiff(d: DiffResult): ParsedDiff {
  const files: DiffFile[] = [];
  const truncated = new Set(d.diff_truncated_files);
  let f: DiffFile | undefined;
  let inHunks = false;
  const text = d.diff;
  let start = 0;
  while (start < text.length) {
    let end = text.indexOf('\n', start);
    if (end < 0) end = text.length;
    const line = text.slice(start, end);
    start = end + 1;
    if (line.startsWith('diff --git ')) {
      const path = pathOf(line.slice('diff --git '.length));
      f = newFile(files.length, path, truncated.has(path));
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
    else if (line.startsWith('Binary files ') || line.startsWith('GIT binary patch')) f.binary = true;
    else if (line.startsWith('rename from ')) {
      f.status = 'renamed';
      f.previousPath = line.slice('rename from '.length);
    } else if (line.startsWith('copy from ')) f.status = 'added';
    else if (line.startsWith('rename to ') || line.startsWith('copy to ')) {
      f.path = line.slice(line.indexOf(' to ') + 4);
      f.tooLarge ||= truncated.has(f.path);
    }
  }
  // a truncated file that has no section (never expected) is still named
  for (const path of truncated) {
    if (files.some((x) => x.path === path)) continue;
    files.push(newFile(files.length, path, true));
  }
  return { files, cut: d.diff_truncated && truncated.size === 0, truncated: d.diff_truncated };
}

/** About the bytes a parsed diff holds in memory (for the caches that keep them). */
export function parsedSize(p: ParsedDiff, text: number): number {
  return 2 * text + 200 * p.files.length + 1024;
}
