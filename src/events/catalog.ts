/**
 * Every event type Triad records in the outbox, with its payload. The outbox (`emitEvents`) takes
 * only these, and a consumer (webhook dispatch) narrows an event's payload by its `type`.
 * docs/events.md describes the payloads for integrators.
 *
 * Payload builders: `push` and `tag` from ref moves in payloads.ts; `issue.*` by the issues
 * service; `pull_request.*` by the pull request feature (src/pulls). A feature's
 * record in a payload is the type of its API response (`<feature>/schemas.ts`, type-only imports),
 * so an event and the API never disagree on a record's shape.
 */
import type { RepoHandle } from '../domain/repo.ts';
import type { CommentJson, IssueJson } from '../issues/schemas.ts';
import type { PullCommentJson, PullJson } from '../pulls/schemas.ts';
import type { StatusJson } from '../statuses/schemas.ts';
import type { UserRefJson } from '../users/schemas.ts';

/** The acting user: the API's user reference, or only id and name when the user is gone. */
export type EventUser = UserRefJson | { id: number; username: string };

/** The repository an event belongs to, by id and names (a `RepoHandle`'s own fields). */
export type RepositoryRef = Pick<RepoHandle, 'id' | 'name' | 'org'>;

/** A commit in `push` and `tag` payloads. */
export type CommitJson = {
  id: string;
  short_id: string;
  /** The full message. */
  message: string;
  /** Its first line. */
  subject: string;
  author: { name: string; email: string; date: string };
  url: string;
};

export type PushPayload = {
  /** The branch or bookmark that moved. */
  ref: string;
  ref_type: 'branch' | 'bookmark';
  /** Whether `ref` is the repository's default branch or mainline bookmark. */
  default: boolean;
  before: string;
  after: string;
  created: boolean;
  /** Reserved: ref deletions are not recorded. */
  deleted: false;
  /** At most `MAX_PUSH_COMMITS`, newest first. */
  commits: CommitJson[];
  head_commit: CommitJson | null;
  total_commits: number;
  /** The push brought more commits than `commits` lists. */
  truncated: boolean;
};

export type TagPayload = {
  ref: string;
  ref_type: 'tag';
  /** Always true: tag deletions are not recorded. */
  created: true;
  target: string;
  /** Omitted when the target could not be read. */
  commit?: CommitJson;
};

/** `issue.<action>`: `action` repeats the type's suffix; `comment` with `issue.commented`. */
export type IssuePayload = {
  action: 'opened' | 'closed' | 'reopened' | 'commented';
  /** The issue as the issues API answers it. */
  issue: IssueJson;
  comment?: CommentJson;
  sender: EventUser;
  repository: RepositoryRef;
};

/**
 * `pull_request.<action>`: `action` repeats the type's suffix; `comment` with
 * `pull_request.commented`. `synchronized`: the source ref moved (a push, or a merge into it).
 */
export type PullRequestPayload = {
  action: 'opened' | 'closed' | 'reopened' | 'merged' | 'commented' | 'synchronized';
  /** The pull request as the API answers it (without `comments`; mergeability as last known). */
  pull_request: PullJson;
  comment?: PullCommentJson;
  /** Null when no user acted (a change found at start-up). */
  sender: EventUser | null;
  repository: RepositoryRef;
};

/**
 * `status`: a commit status was reported (by a client through the API, or by Triad's own
 * pipelines under the context `triad/pipeline`, then with a null sender).
 */
export type StatusPayload = {
  /** The status as the statuses API answers it (`commit` is the full id). */
  status: StatusJson;
  /** Null for Triad's own pipelines. */
  sender: EventUser | null;
  repository: RepositoryRef;
};

/** Event type -> payload. */
export type EventPayloads = {
  push: PushPayload;
  tag: TagPayload;
  'issue.opened': IssuePayload;
  'issue.closed': IssuePayload;
  'issue.reopened': IssuePayload;
  'issue.commented': IssuePayload;
  'pull_request.opened': PullRequestPayload;
  'pull_request.closed': PullRequestPayload;
  'pull_request.reopened': PullRequestPayload;
  'pull_request.merged': PullRequestPayload;
  'pull_request.commented': PullRequestPayload;
  'pull_request.synchronized': PullRequestPayload;
  status: StatusPayload;
};

export type EventType = keyof EventPayloads;

/** Every event type once (a record, so the compiler checks the list against the map). */
const LISTED: Record<EventType, true> = {
  push: true,
  tag: true,
  'issue.opened': true,
  'issue.closed': true,
  'issue.reopened': true,
  'issue.commented': true,
  'pull_request.opened': true,
  'pull_request.closed': true,
  'pull_request.reopened': true,
  'pull_request.merged': true,
  'pull_request.commented': true,
  'pull_request.synchronized': true,
  status: true,
};

/** Every event type, in the catalog's order (for validating subscriptions). */
export const EVENT_TYPES = Object.keys(LISTED) as readonly EventType[];

export type IssueEventType = Extract<EventType, `issue.${string}`>;
export type PullRequestEventType = Extract<EventType, `pull_request.${string}`>;

/** One event of the catalog (of the types `T`), as the outbox records it. */
export type DomainEvent<T extends EventType = EventType> = {
  [K in T]: {
    type: K;
    /** The repository it happened in (null for events outside a repository). */
    repoId: number | null;
    /** The acting user (null when no user acted, e.g. changes found at start-up). */
    senderId: number | null;
    payload: EventPayloads[K];
  };
}[T];
