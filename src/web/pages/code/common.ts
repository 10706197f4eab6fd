/**
 * What the code pages share: their services, the revision and path of a URL (with the fallback
 * for a hand-typed branch name holding `/`), the ref lists of the ref switcher, READMEs.
 */
import { ApiError } from '../../../http/errors.ts';
import type { ContentsService } from '../../../repos/contents-service.ts';
import type { RefsService } from '../../../repos/refs.ts';
import type { ReposService } from '../../../repos/service.ts';
import type { ReleasesService } from '../../../releases/service.ts';
import type { TreeEntry } from '../../../vcs/reader.ts';
import type { PageCtx } from '../../context.ts';
import { MARKDOWN_MAX_BYTES, readmeKind } from '../../markdown.ts';
import { loadRepo, type RepoPage } from '../../repo-page.ts';
import type { RefLists } from '../../views/code/refs.ts';

export type CodeDeps = {
  repos: ReposService;
  contents: ContentsService;
  refs: RefsService;
  releases: ReleasesService;
};

/** A page at a revision: the repository, the revision as named, its commit, and a path. */
export type At = { p: RepoPage; rev: string; commit: string; path: string };

/** How many more path segments are tried as part of a revision name (`release/1.0/src`). */
const MAX_REV_SEGMENTS = 4;

/** The commit `rev` names, or undefined (also for an empty repository). */
export async function commitOf(d: CodeDeps, p: RepoPage, rev: string): Promise<string | undefined> {
  try {
    return await d.contents.commit(p.target, rev);
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) return undefined;
    throw e;
  }
}

/**
 * The repository, revision and path of a URL `/-/<kind>/:rev/*path`. When `rev` names nothing,
 * a branch with a literal `/` was typed: longer prefixes of the path are tried as the revision
 * (`/-/tree/release/1.0/src`: `release/1.0`, then `src`), a few cheap resolves, before the 404.
 */
export async function resolveAt(ctx: PageCtx, d: CodeDeps): Promise<At> {
  const p = await loadRepo(ctx, d.repos);
  const rev = ctx.params.rev ?? p.repo.default_branch;
  const path = ctx.params.path ?? '';
  const commit = await commitOf(d, p, rev);
  if (commit !== undefined) return { p, rev, commit, path };
  const segs = path.split('/').filter((s) => s !== '');
  for (let k = 1; k <= Math.min(segs.length, MAX_REV_SEGMENTS); k++) {
    const longer = [rev, ...segs.slice(0, k)].join('/');
    const c = await commitOf(d, p, longer);
    if (c !== undefined) return { p, rev: longer, commit: c, path: segs.slice(k).join('/') };
  }
  throw ApiError.notFound('revision');
}

const PER_SWITCHER = 50;

/** The first 50 branches, bookmarks (Mercurial only) and tags, for the ref switcher. */
export async function refLists(d: CodeDeps, p: RepoPage): Promise<RefLists> {
  const q = { page: 1, per_page: PER_SWITCHER };
  const [branch, bookmark, tag] = await Promise.all([
    d.refs.list(p.target, 'branch', q),
    p.repo.vcs === 'hg' ? d.refs.list(p.target, 'bookmark', q) : Promise.resolve(undefined),
    d.refs.list(p.target, 'tag', q),
  ]);
  return { branch, bookmark, tag };
}

/** The README of a directory's entries, read (undefined when none, or not text). */
export async function readmeOf(
  d: CodeDeps,
  at: At,
  entries: readonly TreeEntry[],
): Promise<{ name: string; kind: 'markdown' | 'text'; text: string } | undefined> {
  const ranked = entries
    .filter((e) => !e.is_dir && readmeKind(e.name) !== undefined)
    .sort(
      (a, b) => (readmeKind(a.name) === 'markdown' ? 0 : 1) - (readmeKind(b.name) === 'markdown' ? 0 : 1),
    );
  const e = ranked[0];
  if (e === undefined) return undefined;
  const path = at.path === '' ? e.name : `${at.path}/${e.name}`;
  const blob = await d.contents.blob(at.p.target, path, at.commit);
  if (blob.encoding !== 'utf-8') return undefined;
  const kind = blob.content.length > MARKDOWN_MAX_BYTES ? 'text' : (readmeKind(e.name) ?? 'text');
  return { name: e.name, kind, text: blob.content };
}
