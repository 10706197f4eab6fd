import { ApiError } from '../http/errors.ts';
import type { Actor } from '../domain/access.ts';
import type { RepoHandle, RepoTarget } from '../domain/repo.ts';
import { nextNumber } from '../db/numbers.ts';
import type { Db } from '../db/query.ts';
import type { PullRequestEventType } from '../events/catalog.ts';
import type { PullReads } from './reads.ts';
import * as db from './repository.ts';
import type { PullChange, PullRow } from './repository.ts';
import {
  pullCommentJson,
  type CreatePullBody,
  type PullCommentJson,
  type PullJson,
  type UpdatePullBody,
} from './schemas.ts';
import { emitPull, triggerCi, type PullsDeps } from './service.ts';

/**
 * Creating, updating and commenting on pull requests. Statuses: `open` -> `closed` (`state:
 * "closed"`), `closed` -> `open` (`state: "open"`, when no other open pull request has the same
 * refs), `open` -> `merged` (a merge, or a push that makes the source reachable from the target);
 * a merged pull request changes no more (409 `not_open`). Title, body and state: the author or an
 * org owner only. Every change commits with its outbox event.
 */
export class PullWrites {
  private readonly d: PullsDeps;
  private readonly reads: PullReads;

  constructor(deps: PullsDeps, reads: PullReads) {
    this.d = deps;
    this.reads = reads;
  }

  /**
   * Opens a pull request. Without `target_ref` it targets the mainline (`@` in Mercurial, the
   * default branch elsewhere), or with `defaultTarget: 'branch'` (the earlier variant) the
   * repository's default branch in every kind (`default` in Mercurial).
   */
  async create(
    t: RepoTarget,
    actor: Actor,
    body: CreatePullBody,
    opts: { defaultTarget: 'mainline' | 'branch' } = { defaultTarget: 'mainline' },
  ): Promise<PullJson> {
    const repo = await this.reads.repo(t);
    const source = body.source_ref;
    const mainline = opts.defaultTarget === 'mainline' ? repo.driver.constants.pullTarget : undefined;
    const target = body.target_ref ?? mainline ?? repo.defaultBranch;
    if (source === target) throw ApiError.validation('body.source_ref: must differ from the target ref');
    // Resolves both refs (404 naming a missing one) and gives the first mergeability.
    const live = await this.d.mergeability.read(repo, source, target);
    if (!live.ok) {
      throw ApiError.notFound(
        live.missing === 'source' ? `source ref "${source}"` : `target ref "${target}"`,
      );
    }
    return this.d.em().transactional(async (tx) => {
      const number = await nextNumber(tx, 'pulls', repo.id);
      const row = await db.insertPull(tx, {
        repo_id: repo.id,
        number,
        title: body.title,
        body: body.body ?? '',
        source_ref: source,
        target_ref: target,
        author_id: actor.id,
        ...live.check,
      });
      if (row === undefined) {
        throw ApiError.conflict(`an open pull request from "${source}" into "${target}" exists`);
      }
      const pull = await this.one(tx, repo, row);
      await emitPull(tx, this.d.users, refOf(t), actor.id, 'pull_request.opened', {
        action: 'opened',
        pull_request: pull,
      });
      await triggerCi(tx, this.d, repo, [
        { commit: row.head_commit, event: 'pull_request', branch: source, tag: '', senderId: actor.id },
      ]);
      return pull;
    });
  }

  async update(t: RepoTarget, actor: Actor, number: number, body: UpdatePullBody): Promise<PullJson> {
    const repo = await this.reads.repo(t);
    return this.d.em().transactional(async (tx) => {
      const row = await this.reads.find(tx, repo.id, number, true);
      if (row.author_id !== actor.id && actor.role !== 'owner') {
        throw ApiError.forbidden('only the pull request author or an org owner may change it');
      }
      const change: PullChange = {};
      if (body.title !== undefined && body.title !== row.title) change.title = body.title;
      if (body.body !== undefined && body.body !== row.body) change.body = body.body;
      let event: PullRequestEventType | undefined;
      if (body.state !== undefined && body.state !== row.status) {
        if (row.status === 'merged') throw ApiError.mergeRefused('not_open', 'the pull request is merged');
        change.status = body.state;
        event = body.state === 'closed' ? 'pull_request.closed' : 'pull_request.reopened';
      }
      if (Object.keys(change).length === 0) return this.one(tx, repo, row, true);
      const updated = await db.updatePull(tx, row.id, change);
      if (updated === undefined) {
        throw ApiError.conflict(
          `another open pull request from "${row.source_ref}" into "${row.target_ref}" exists`,
        );
      }
      const pull = await this.one(tx, repo, updated, true);
      if (event !== undefined) {
        const action = event === 'pull_request.closed' ? 'closed' : 'reopened';
        await emitPull(tx, this.d.users, refOf(t), actor.id, event, { action, pull_request: pull });
      }
      return pull;
    });
  }

  async comment(t: RepoTarget, actor: Actor, number: number, text: string): Promise<PullCommentJson> {
    const repo = await this.reads.repo(t);
    return this.d.em().transactional(async (tx) => {
      const row = await this.reads.find(tx, repo.id, number, true);
      const added = await db.insertComment(tx, row.id, actor.id, text);
      const comment = pullCommentJson(added, await this.d.users.refs([actor.id], tx));
      const pull = await this.one(tx, repo, { ...row, comment_count: row.comment_count + 1 });
      await emitPull(tx, this.d.users, refOf(t), actor.id, 'pull_request.commented', {
        action: 'commented',
        pull_request: pull,
        comment,
      });
      return comment;
    });
  }

  private async one(tx: Db, repo: RepoHandle, row: PullRow, live = false): Promise<PullJson> {
    const [pull] = await this.reads.json(tx, repo, [row], live);
    return pull!;
  }
}

export function refOf(t: RepoTarget): { id: number; name: string; org: string } {
  return { id: t.repo.id, name: t.repo.name, org: t.org.name };
}
