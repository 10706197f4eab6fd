import type { VcsKind } from './constants.ts';
import { driverFor } from './index.ts';
import type { BranchMove, CommitInfo, RefMove, TagMove } from './driver.ts';

export const MAX_COMMITS = 50;

/**
 * A push or tag event: `payload` is the spec's payload; `commit` and `branch` say which commit
 * the ref now names (what CI builds) — for Mercurial `payload.after` is the changegroup tip.
 */
export type PushEvent = {
  type: 'push' | 'tag';
  payload: Record<string, unknown>;
  commit: string;
  branch: string;
};

export type PushContext = {
  vcs: VcsKind;
  /** Builds a commit's URL from its id. */
  commitUrl: (id: string) => string;
};

export function commitJson(ctx: PushContext, c: CommitInfo) {
  const subject = c.message.split('\n')[0] ?? '';
  return {
    id: c.id,
    short_id: c.id.slice(0, driverFor(ctx.vcs).constants.shortId),
    message: c.message,
    subject,
    author: c.author,
    url: ctx.commitUrl(c.id),
  };
}

function pushPayload(ctx: PushContext, m: BranchMove) {
  const list = m.commits.slice(0, MAX_COMMITS).map((c) => commitJson(ctx, c));
  return {
    ref: m.name,
    ref_type: m.type,
    default: m.isDefault,
    before: m.before,
    after: m.after,
    created: m.created,
    deleted: false,
    commits: list,
    head_commit: list[0] ?? null,
    total_commits: list.length,
    truncated: m.total > MAX_COMMITS,
  };
}

function tagPayload(ctx: PushContext, m: TagMove) {
  return {
    ref: m.name,
    ref_type: 'tag',
    created: true,
    target: m.target,
    ...(m.commit === undefined ? {} : { commit: commitJson(ctx, m.commit) }),
  };
}

/** The spec's `push` and `tag` events for ref moves. */
export function pushEvents(ctx: PushContext, moves: RefMove[]): PushEvent[] {
  return moves.map((m) =>
    m.type === 'tag'
      ? { type: 'tag', commit: m.target, branch: '', payload: tagPayload(ctx, m) }
      : { type: 'push', commit: m.head, branch: m.name, payload: pushPayload(ctx, m) },
  );
}
