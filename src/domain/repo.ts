/**
 * The three shapes of a repository outside its own feature:
 * - the row (`RepoRow`, repos/repository.ts): the record as stored;
 * - the target (`RepoTarget`): a repository and its organization as a route resolved and
 *   authorised them (ids, names, visibility; no storage);
 * - the handle (`RepoHandle`): a repository to read or change, with where it is stored and its
 *   VCS driver; what `RepoChanges`, pull requests, releases and CI work on.
 */
import type { VcsDriver } from '../vcs/driver.ts';
import type { VcsKind } from '../vcs/constants.ts';

export type OrgRef = { id: number; name: string };
export type RepoRef = { id: number; orgId: number; name: string; isPrivate: boolean };
/** A repository and its organization, as a route resolved and authorised them. */
export type RepoTarget = { org: OrgRef; repo: RepoRef };

/** A repository with its storage and driver (built by `ReposService.handle`). */
export type RepoHandle = RepoRef & {
  /** The organization's name. */
  org: string;
  vcs: VcsKind;
  defaultBranch: string;
  /** Where its storage is. */
  path: string;
  driver: VcsDriver;
};

/** The repository's file at each of some commits, in one read (`VcsDriver.filesAt` on its storage). */
export function filesAt(
  repo: Pick<RepoHandle, 'driver' | 'path'>,
  revs: readonly string[],
  file: string,
  maxBytes: number,
): ReturnType<VcsDriver['filesAt']> {
  return repo.driver.filesAt(repo.path, revs, file, maxBytes);
}

/** Which private repositories of an organization a caller may list: all, none, or the one its token targets. */
export type PrivateShown = 'all' | 'none' | { repoId: number };
