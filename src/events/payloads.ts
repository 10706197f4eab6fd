/**
 * The spec's `push` and `tag` payloads, built from the ref moves a VCS driver reports (facts:
 * which refs moved, which commits they gained).
 */
import type { BranchMove, CommitInfo, RefMove, TagMove } from '../vcs/driver.ts';
import type { CommitJson, DomainEvent, PushPayload, TagPayload } from './catalog.ts';

/** A push payload lists at most this many commits (`truncated` says when there were more). */
export const MAX_PUSH_COMMITS = 50;

/** What a commit object needs beyond the commit: the kind's short-id length and a commit's URL. */
export type CommitLinks = { shortId: number; commitUrl: (id: string) => string };

export function commitJson(c: CommitInfo, links: CommitLinks): CommitJson {
  return {
    id: c.id,
    short_id: c.id.slice(0, links.shortId),
    message: c.message,
    subject: c.message.split('\n')[0] ?? '',
    author: c.author,
    url: links.commitUrl(c.id),
  };
}

export function pushPayload(m: BranchMove, links: CommitLinks): PushPayload {
  const list = m.commits.slice(0, MAX_PUSH_COMMITS).map((c) => commitJson(c, links));
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
    truncated: m.total > MAX_PUSH_COMMITS,
  };
}

export function tagPayload(m: TagMove, links: CommitLinks): TagPayload {
  return {
    ref: m.name,
    ref_type: 'tag',
    created: true,
    target: m.target,
    ...(m.commit === undefined ? {} : { commit: commitJson(m.commit, links) }),
  };
}

/** The `push` or `tag` event of one ref move. */
export function refEvent(
  m: RefMove,
  links: CommitLinks,
  repoId: number,
  senderId: number | null,
): DomainEvent<'push' | 'tag'> {
  return m.type === 'tag'
    ? { type: 'tag', repoId, senderId, payload: tagPayload(m, links) }
    : { type: 'push', repoId, senderId, payload: pushPayload(m, links) };
}
