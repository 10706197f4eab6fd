import { isUniqueViolation } from '../db/sql.ts';
import type { Actor } from '../domain/access.ts';
import type { RepoTarget } from '../domain/repo.ts';
import { ApiError } from '../http/errors.ts';
import { offsetOf, type Page, type PageQuery } from '../http/pagination.ts';
import { PushLockTimeout } from '../repos/changes.ts';
import { GateFull } from '../vcs/process/gate.ts';
import { InvalidRefName } from '../vcs/ops.ts';
import * as db from './repository.ts';
import type { CreateReleaseBody, ReleaseJson, UpdateReleaseBody } from './schemas.ts';
import { visibleRelease, type ReleasesDeps, type Shared, type Viewer } from './common.ts';

/** How long a tag creation waits for the repository's push lock. */
const LOCK_WAIT_MS = 30_000;

/**
 * Release records: list, read by id and by tag, create (creating the tag when asked), update,
 * delete with the asset objects. A tag is looked up and created under the repository's push lock
 * through `RepoChanges.change`, so a created tag gets its `tag` event and CI like a pushed one;
 * a draft's tag is created when the draft is published, never before.
 */
export class ReleaseRecords {
  private readonly d: ReleasesDeps;
  private readonly shared: Shared;
  /** How long a tag creation waits for the push lock held by another request or replica. */
  lockWaitMs = LOCK_WAIT_MS;
  /** How long it waits in this process's queue of changes to the repository. */
  queueWaitMs = 2 * LOCK_WAIT_MS;

  constructor(d: ReleasesDeps, shared: Shared) {
    this.d = d;
    this.shared = shared;
  }

  async list(t: RepoTarget, v: Viewer, q: PageQuery): Promise<Page<ReleaseJson>> {
    const { rows, total } = await db.list(this.d.em(), t.repo.id, v.drafts, q.per_page, offsetOf(q));
    return { items: await this.shared.json(t, rows), total, page: q.page, perPage: q.per_page };
  }

  async get(t: RepoTarget, id: number, v: Viewer): Promise<ReleaseJson> {
    return this.one(t, await visibleRelease(this.d.em(), t, id, v));
  }

  async byTag(t: RepoTarget, tag: string, v: Viewer): Promise<ReleaseJson> {
    const r = await db.byTag(this.d.em(), t.repo.id, tag);
    if (r === undefined || (r.draft && !v.drafts)) throw ApiError.notFound('release');
    return this.one(t, r);
  }

  /** The newest published release that is neither a draft nor a prerelease (404 when none is). */
  async latest(t: RepoTarget): Promise<ReleaseJson> {
    const r = await db.latest(this.d.em(), t.repo.id);
    if (r === undefined) throw ApiError.notFound('release');
    return this.one(t, r);
  }

  /**
   * A published release needs its tag: it is created now when `target_commitish` is given. A
   * draft's tag is only checked (it exists, or `target_commitish` names a commit) and created
   * when the draft is published, so nothing of a draft reaches clients of the repository.
   */
  async create(t: RepoTarget, actor: Actor, body: CreateReleaseBody): Promise<ReleaseJson> {
    if ((await db.byTag(this.d.em(), t.repo.id, body.tag_name)) !== undefined) throw taken(body.tag_name);
    const draft = body.draft ?? false;
    const commit = draft
      ? await this.planTag(t, body.tag_name, body.target_commitish)
      : await this.tag(t, actor, body.tag_name, body.target_commitish);
    const row = await db
      .insert(this.d.em(), {
        repo_id: t.repo.id,
        tag_name: body.tag_name,
        target_commitish: body.target_commitish ?? commit,
        name: body.name ?? '',
        body: body.body ?? '',
        draft,
        prerelease: body.prerelease ?? false,
        author_id: actor.id,
      })
      .catch((e: unknown) => {
        throw isUniqueViolation(e) ? taken(body.tag_name) : e;
      });
    if (row === undefined) throw taken(body.tag_name);
    return this.one(t, row);
  }

  /**
   * Changes the given fields. The tag is resolved again when it changes, when a draft is
   * published (its tag is created then, at the draft's `target_commitish` unless the request gives
   * another) and when a draft gets a new `target_commitish`; only a release that is published
   * after the change creates a tag. A published release's new tag needs its own
   * `target_commitish` unless it exists; a draft keeps the one it has.
   */
  async update(t: RepoTarget, actor: Actor, id: number, body: UpdateReleaseBody): Promise<ReleaseJson> {
    const current = await visibleRelease(this.d.em(), t, id, { drafts: true });
    const tagName = body.tag_name ?? current.tag_name;
    const retag = tagName !== current.tag_name;
    if (retag && (await db.byTag(this.d.em(), t.repo.id, tagName)) !== undefined) throw taken(tagName);
    const draft = body.draft ?? current.draft;
    const given = body.target_commitish ?? (current.draft ? current.target_commitish : undefined);
    let target: string | undefined;
    if (retag || (current.draft && !draft) || (draft && body.target_commitish !== undefined)) {
      const commit = draft ? await this.planTag(t, tagName, given) : await this.tag(t, actor, tagName, given);
      target = given ?? commit;
    }
    const row = await db
      .update(this.d.em(), current.id, {
        ...(retag ? { tag_name: tagName } : {}),
        target_commitish: target,
        name: body.name,
        body: body.body,
        draft: body.draft,
        prerelease: body.prerelease,
      })
      .catch((e: unknown) => {
        throw isUniqueViolation(e) ? taken(tagName) : e;
      });
    return this.one(t, row);
  }

  /** Deletes the release and its asset rows, then their objects (a failure there leaves them to the sweeper). */
  async remove(t: RepoTarget, id: number): Promise<void> {
    const r = await visibleRelease(this.d.em(), t, id, { drafts: true });
    const keys = (await db.assetsOf(this.d.em(), [r.id])).map((a) => a.blob_key);
    await this.d.em().transactional(async (tx) => db.remove(tx, r.id));
    try {
      for (const k of keys) await this.d.blobs.delete(k);
      await this.d.blobs.deletePrefix(assetPrefix(t.repo.id, r.id));
    } catch (err) {
      this.d.log.warn({ err, release: r.id }, 'asset objects of a deleted release left for the sweeper');
    }
  }

  private async one(t: RepoTarget, r: db.ReleaseRow): Promise<ReleaseJson> {
    const [json] = await this.shared.json(t, [r]);
    if (json === undefined) throw new Error('release record missing');
    return json;
  }

  /**
   * The commit tag `name` names, under the push lock; without it, the tag is created at
   * `commitish` (422 without one, or when it names nothing or the VCS refuses the name).
   */
  private async tag(
    t: RepoTarget,
    actor: Actor,
    name: string,
    commitish: string | undefined,
  ): Promise<string> {
    const repo = await this.d.repos.handle(t);
    const dir = repo.path;
    const user = await this.d.users.get(actor.id);
    const author = { name: user.displayName || user.username, email: user.email };
    const ops = this.d.vcs.ops(repo.vcs);
    const queueWait = AbortSignal.timeout(this.queueWaitMs);
    let outcome;
    try {
      outcome = await this.d.changes.change(
        repo,
        actor.id,
        async () => {
          const existing = (await repo.driver.snapshot(dir)).tags.get(name);
          if (existing !== undefined) return { kind: 'tag_exists' as const, commit: existing };
          if (commitish === undefined) return { kind: 'unknown' as const };
          return ops.createTag(dir, { name, target: commitish, author });
        },
        { signal: queueWait, deadline: Date.now() + this.lockWaitMs },
      );
    } catch (e) {
      if (e instanceof InvalidRefName) throw unprocessable(`tag_name: ${e.message}`);
      if (busy(e) || queueWait.aborted)
        throw new ApiError(503, 'service_unavailable', 'the repository is busy; try again');
      throw e;
    }
    switch (outcome.kind) {
      case 'created':
      case 'tag_exists':
        return outcome.commit;
      case 'unknown':
        throw unknownTag(name);
      case 'not_found':
        throw namesNothing(commitish ?? '');
    }
  }

  /**
   * What `tag` would tag, changing nothing (no push lock): the commit tag `name` names, else the
   * one `commitish` names (the same 422s). The VCS judges the tag name only when it creates it.
   */
  private async planTag(t: RepoTarget, name: string, commitish: string | undefined): Promise<string> {
    const repo = await this.d.repos.handle(t);
    const dir = repo.path;
    const existing = (await repo.driver.snapshot(dir)).tags.get(name);
    if (existing !== undefined) return existing;
    if (commitish === undefined) throw unknownTag(name);
    const commit = await this.d.vcs.ops(repo.vcs).resolveCommit(dir, commitish);
    if (commit === undefined) throw namesNothing(commitish);
    return commit;
  }
}

/** Where the objects of a release's assets live in the blob store. */
export function assetPrefix(repoId: number, releaseId: number): string {
  return `releases/${repoId}/${releaseId}/`;
}

/**
 * The change never started because the repository stayed busy: the push lock wait ran out
 * (`PushLockTimeout`) or too many changes wait already (`GateFull`). A wait in the in-memory
 * queue that hit its time limit is told by the aborted signal (whatever error carries it).
 */
function busy(e: unknown): boolean {
  return e instanceof PushLockTimeout || e instanceof GateFull;
}

function taken(tag: string): ApiError {
  return ApiError.conflict(`a release for tag ${tag} exists already`);
}

function unknownTag(name: string): ApiError {
  return unprocessable(`tag_name: no tag ${name} exists; give target_commitish to create it`);
}

function namesNothing(commitish: string): ApiError {
  return unprocessable(`target_commitish: ${commitish} names no commit, branch or bookmark`);
}

function unprocessable(message: string): ApiError {
  return new ApiError(422, 'unprocessable', message);
}
