import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
import { isDbId } from '../db/sql.ts';
import type { RepoTarget } from '../domain/repo.ts';
import { ApiError } from '../http/errors.ts';
import type { RepoChanges } from '../repos/changes.ts';
import type { ReposService } from '../repos/service.ts';
import type { BlobStore } from '../storage/index.ts';
import type { UsersService } from '../users/service.ts';
import type { Vcs } from '../vcs/index.ts';
import type { TransportServers } from '../vcs/transport.ts';
import * as db from './repository.ts';
import type { ReleaseJson } from './schemas.ts';

/** What the parts of the releases service share: dependencies, visibility, record building. */

export type ReleasesDeps = {
  em: () => EntityManager;
  log: Logger;
  baseUrl: () => string;
  blobs: BlobStore;
  users: Pick<UsersService, 'refs' | 'get'>;
  repos: Pick<ReposService, 'handle'>;
  changes: Pick<RepoChanges, 'change'>;
  vcs: Pick<Vcs, 'ops' | 'driver'>;
  /** Largest asset accepted. */
  assetMaxBytes: number;
  /** Downloads answer 302 to a presigned URL when the store can make one. */
  redirectDownloads: boolean;
  /** Source archives run under the clone URLs' concurrency cap and queue (`TransportServers.archive`). */
  archives: Pick<TransportServers, 'archive'>;
  /** `Retry-After` of the 503 a source archive gets when that queue is full. */
  retryAfterSeconds: number;
};

/** Who reads: org members also see drafts. */
export type Viewer = { drafts: boolean };

export type Shared = { json: (t: RepoTarget, rows: db.ReleaseRow[]) => Promise<ReleaseJson[]> };

export function repoUrl(base: string, t: RepoTarget): string {
  return `${base}/api/v1/repos/${encodeURIComponent(t.org.name)}/${encodeURIComponent(t.repo.name)}`;
}

/** The release a caller may see; 404 for a missing one and for a draft a non-member asks for. */
export async function visibleRelease(
  em: EntityManager,
  t: RepoTarget,
  id: number,
  v: Viewer,
): Promise<db.ReleaseRow> {
  const r = isDbId(id) ? await db.byId(em, t.repo.id, id) : undefined;
  if (r === undefined || (r.draft && !v.drafts)) throw ApiError.notFound('release');
  return r;
}
