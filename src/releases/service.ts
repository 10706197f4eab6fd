import type { RepoTarget } from '../domain/repo.ts';
import type { Access, RepoNeeds } from '../http/auth.ts';
import { ApiError } from '../http/errors.ts';
import { ReleaseAssets } from './assets.ts';
import { ReleaseRecords } from './records.ts';
import * as db from './repository.ts';
import { releaseJson, type ReleaseJson } from './schemas.ts';
import { repoUrl, type ReleasesDeps, type Viewer } from './common.ts';

/** What reading releases needs (a private repository's releases: `releases:read`). */
export const RELEASES_READ: RepoNeeds = { scope: 'releases:read' };
/** What changing releases and uploading or deleting assets needs. */
export const RELEASES_WRITE: RepoNeeds = { scope: 'releases:write', role: 'member' };
/**
 * Who sees drafts: an org member whose credential reaches the repository (a personal token or a
 * session, an org token of its organization, a repository token of it) and may read releases
 * (`releases:read`, the scope of every release read). Everyone else gets 404 for a draft, also
 * in lists.
 */
const DRAFTS: RepoNeeds = { scope: 'releases:read', role: 'member' };

const SWEEP_EVERY_MS = 60 * 60_000;
/** Unfinished puts are abandoned this long after they started (the longest upload allowed). */
const INCOMPLETE_GRACE_MS = 24 * 60 * 60_000;

/**
 * Releases: records and tags (`records.ts`), assets and source archives (`assets.ts`), and the
 * sweeper that removes objects a crash left without their row.
 */
export class ReleasesService {
  readonly records: ReleaseRecords;
  readonly assets: ReleaseAssets;
  readonly assetMaxBytes: number;
  private readonly d: ReleasesDeps;
  private timer: NodeJS.Timeout | undefined;

  constructor(d: ReleasesDeps) {
    this.d = d;
    this.assetMaxBytes = d.assetMaxBytes;
    const shared = { json: (t: RepoTarget, rows: db.ReleaseRow[]) => this.json(t, rows) };
    this.records = new ReleaseRecords(d, shared);
    this.assets = new ReleaseAssets(d, shared);
  }

  /** Prepares the blob store (S3 bucket) and schedules the sweeper. A store not reachable yet is only logged. */
  async start(): Promise<void> {
    await this.d.blobs.init().catch((err: unknown) => this.d.log.warn({ err }, 'blob store not ready yet'));
    const run = () => {
      this.assets
        .sweep(this.assets.sweepGraceMs, INCOMPLETE_GRACE_MS)
        .catch((err: unknown) => this.d.log.warn({ err }, 'asset sweep failed'));
    };
    this.timer = setInterval(run, SWEEP_EVERY_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** Who reads: whether `access` sees the repository's drafts (the API's reads and the web's pages ask here). */
  async viewer(access: Access, t: RepoTarget): Promise<Viewer> {
    if (access.userId === undefined) return { drafts: false };
    return { drafts: await allows(access, t, DRAFTS) };
  }

  /** Whether `access` may create, change and delete releases and their assets (the pages show their forms only then). */
  async mayWrite(access: Access, t: RepoTarget): Promise<boolean> {
    return access.userId !== undefined && (await allows(access, t, RELEASES_WRITE));
  }

  /** Release records with their assets and people (three queries for any number of releases). */
  private async json(t: RepoTarget, rows: db.ReleaseRow[]): Promise<ReleaseJson[]> {
    const em = this.d.em();
    const assets = await db.assetsOf(
      em,
      rows.map((r) => r.id),
    );
    const people = await this.d.users.refs([
      ...rows.map((r) => r.author_id),
      ...assets.map((a) => a.uploader_id),
    ]);
    const persons = new Map([...people].map(([id, u]) => [id, { id: u.id, username: u.username }]));
    const url = repoUrl(this.d.baseUrl(), t);
    return rows.map((r) =>
      releaseJson(
        r,
        url,
        assets.filter((a) => a.release_id === r.id),
        persons,
      ),
    );
  }
}

/** Whether `needs` is met on `t` (a refusal is false; a failure to tell, such as the database, throws). */
async function allows(access: Access, t: RepoTarget, needs: RepoNeeds): Promise<boolean> {
  return access.authorize(t, needs).then(
    () => true,
    (e: unknown) => {
      if (e instanceof ApiError && e.status < 500) return false;
      throw e;
    },
  );
}
