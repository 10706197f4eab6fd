import { ApiError } from '../http/errors.ts';
import type { Actor } from '../domain/access.ts';
import type { RepoTarget } from '../domain/repo.ts';
import { isDbId } from '../db/sql.ts';
import type { Db } from '../db/query.ts';
import { nextNumber } from '../db/numbers.ts';
import type { DomainEvent, IssueEventType, IssuePayload } from '../events/catalog.ts';
import { emitEvents } from '../events/outbox.ts';
import type { OrgsService } from '../orgs/service.ts';
import type { UserRefRow } from '../users/service.ts';
import { userRefJson } from '../users/schemas.ts';
import * as db from './repository.ts';
import type { IssueChange, IssueRow } from './repository.ts';
import type { LabelCatalog } from './labels.ts';
import type { IssueReads } from './reads.ts';
import type { IssuesDeps } from './service.ts';
import {
  commentJson,
  type AssigneeRef,
  type CommentJson,
  type CreateIssueBody,
  type IssueJson,
  type IssueState,
  type UpdateIssueBody,
} from './schemas.ts';

export type IssueMembers = Pick<OrgsService, 'role' | 'membersAmong'>;

export type IssueWritesDeps = IssuesDeps & { labels: LabelCatalog; reads: IssueReads };

/**
 * Changing issues. State machine (spec "Issue states"):
 * - create without assignees -> `new`; with assignees -> `open`;
 * - the first comment or the first assignee on a `new` issue -> `open`;
 * - `state: "closed"` from `new` or `open` -> `closed` (closing a `new` issue is allowed: an
 *   author may withdraw an untriaged report), `state: "open"` from `closed` -> `open`
 *   (reopen), and from `new` -> `open` (triage, as in the earlier variant, no event);
 *   both only for the issue author or an org owner (403 otherwise). Setting the current state
 *   again changes nothing.
 *
 * Who may write at all (`issues:write` on a repository the caller can see) is the route's
 * check; creating, commenting, labelling, assigning and setting severity are open to any such
 * caller (GitHub-like: org membership is not required on a public repository); title, body and
 * state only to the author or an org owner, which this class decides from the actor's role.
 *
 * Every change and its outbox event commit in one transaction; an issue being changed is locked
 * (`for update`) so concurrent changes (cap checks, state transitions) serialize.
 */
export class IssueWrites {
  private readonly d: IssueWritesDeps;

  constructor(deps: IssueWritesDeps) {
    this.d = deps;
  }

  async create(t: RepoTarget, actor: Actor, body: CreateIssueBody): Promise<IssueJson> {
    const labelNames = body.labels ?? [];
    const lowered = labelNames.map((n) => n.toLowerCase());
    if (new Set(lowered).size !== lowered.length) {
      throw ApiError.validation('body.labels: must not repeat a label');
    }
    const refs = body.assignees ?? [];
    this.checkCap(refs.length);
    return this.d.em().transactional(async (tx) => {
      // Everything is validated before the first write, so a bad request creates nothing.
      const labels = await this.d.labels.resolve(tx, t, labelNames);
      const assignees: UserRefRow[] = [];
      for (const ref of refs) assignees.push(await this.resolveAssignee(tx, t.org.id, ref));
      if (new Set(assignees.map((a) => a.id)).size !== assignees.length) {
        throw ApiError.validation('body.assignees: must not repeat an assignee');
      }
      const state: IssueState = assignees.length > 0 ? 'open' : 'new';
      const number = await nextNumber(tx, 'issues', t.repo.id);
      const row = await db.insertIssue(tx, {
        repo_id: t.repo.id,
        number,
        title: body.title,
        body: body.body ?? '',
        state,
        severity: body.severity ?? 'none',
        author_id: actor.id,
        label_ids: labels.map((l) => l.id),
        assignee_ids: assignees.map((a) => a.id),
      });
      await db.countCreated(tx, t.repo.id, state, number);
      const issue = await this.json(tx, row);
      await this.emit(tx, t, actor, 'issue.opened', { action: 'opened', issue });
      return issue;
    });
  }

  async update(t: RepoTarget, actor: Actor, number: number, body: UpdateIssueBody): Promise<IssueJson> {
    return this.d.em().transactional(async (tx) => {
      const row = await this.d.reads.find(tx, t.repo.id, number, true);
      const privileged = body.title !== undefined || body.body !== undefined || body.state !== undefined;
      if (privileged && row.author_id !== actor.id && actor.role !== 'owner') {
        throw ApiError.forbidden('only the issue author or an org owner may change title, body or state');
      }
      const change: IssueChange = {};
      if (body.title !== undefined && body.title !== row.title) change.title = body.title;
      if (body.body !== undefined && body.body !== row.body) change.body = body.body;
      if (body.severity !== undefined && body.severity !== row.severity) change.severity = body.severity;
      let event: 'issue.closed' | 'issue.reopened' | undefined;
      if (body.state === 'closed' && row.state !== 'closed') {
        change.state = 'closed';
        event = 'issue.closed';
      } else if (body.state === 'open' && row.state !== 'open') {
        change.state = 'open';
        if (row.state === 'closed') event = 'issue.reopened';
      }
      if (body.state !== undefined) await db.countMoved(tx, t.repo.id, row.state, body.state);
      const current = Object.keys(change).length > 0 ? await db.updateIssue(tx, row.id, change) : row;
      const issue = await this.json(tx, current);
      if (event !== undefined) {
        const action = event === 'issue.closed' ? 'closed' : 'reopened';
        await this.emit(tx, t, actor, event, { action, issue });
      }
      return issue;
    });
  }

  /**
   * Adds a comment. The first comment on a `new` issue opens it (the current variant); with
   * `opens: false` (the earlier variant, where only the state update triages) it stays `new`.
   */
  async comment(
    t: RepoTarget,
    actor: Actor,
    number: number,
    text: string,
    opts: { opens: boolean } = { opens: true },
  ): Promise<CommentJson> {
    return this.d.em().transactional(async (tx) => {
      const row = await this.d.reads.find(tx, t.repo.id, number, true);
      const added = await db.insertComment(tx, row.id, actor.id, text, opts.opens);
      if (row.state === 'new' && opts.opens) await db.countMoved(tx, t.repo.id, 'new', 'open');
      const comment = commentJson(added.comment, await this.d.users.refs([actor.id], tx));
      const issue = await this.json(tx, added.issue);
      await this.emit(tx, t, actor, 'issue.commented', { action: 'commented', issue, comment });
      return comment;
    });
  }

  async addLabel(t: RepoTarget, number: number, name: string): Promise<IssueJson> {
    return this.d.em().transactional(async (tx) => {
      const row = await this.d.reads.find(tx, t.repo.id, number, true);
      const [label] = await this.d.labels.resolve(tx, t, [name]);
      if (row.label_ids.includes(label!.id)) return this.json(tx, row);
      return this.json(tx, await db.updateIssue(tx, row.id, { addLabel: label!.id }));
    });
  }

  /** Removes a label by name (resolved among the issue's labels, most specific scope first). */
  async removeLabel(t: RepoTarget, number: number, name: string): Promise<IssueJson> {
    return this.d.em().transactional(async (tx) => {
      const row = await this.d.reads.find(tx, t.repo.id, number, true);
      const label = await db.labelNamedAmong(tx, row.label_ids, name);
      if (label === undefined) throw ApiError.notFound(`label "${name}" on this issue`);
      return this.json(tx, await db.updateIssue(tx, row.id, { removeLabel: label }));
    });
  }

  async addAssignee(t: RepoTarget, number: number, ref: AssigneeRef): Promise<IssueJson> {
    return this.d.em().transactional(async (tx) => {
      const row = await this.d.reads.find(tx, t.repo.id, number, true);
      const member = await this.resolveAssignee(tx, t.org.id, ref);
      if (row.assignee_ids.includes(member.id)) return this.json(tx, row);
      this.checkCap(row.assignee_ids.length + 1);
      // The first assignee on a `new` issue opens it (current variant).
      if (row.state === 'new') await db.countMoved(tx, t.repo.id, 'new', 'open');
      return this.json(tx, await db.updateIssue(tx, row.id, { addAssignee: member.id }));
    });
  }

  async removeAssignee(t: RepoTarget, number: number, userId: number): Promise<IssueJson> {
    if (!isDbId(userId)) throw ApiError.notFound('assignee on this issue');
    return this.d.em().transactional(async (tx) => {
      const row = await this.d.reads.find(tx, t.repo.id, number, true);
      if (!row.assignee_ids.includes(userId)) throw ApiError.notFound('assignee on this issue');
      return this.json(tx, await db.updateIssue(tx, row.id, { removeAssignee: userId }));
    });
  }

  private checkCap(n: number): void {
    if (n > this.d.maxAssignees) {
      throw ApiError.validation(`an issue may have at most ${this.d.maxAssignees} assignees`);
    }
  }

  private async json(tx: Db, row: IssueRow): Promise<IssueJson> {
    const [issue] = await this.d.reads.hydrate(tx, [row]);
    return issue!;
  }

  /**
   * An assignee must be a member of the repository's organization: 404 for an unknown user or a
   * non-member, 409 when a display name alone matches several members, and 400 when the
   * identifiers given (`user_id`, `username`, `display_name`) name different members.
   */
  private async resolveAssignee(tx: Db, orgId: number, ref: AssigneeRef): Promise<UserRefRow> {
    if (ref.user_id === undefined && ref.username === undefined) return this.byDisplayName(tx, orgId, ref);
    const id = ref.user_id ?? (await this.d.users.findByUsername(ref.username ?? ''))?.id;
    const role = id === undefined ? undefined : await this.d.orgs.role(orgId, id);
    const member =
      id === undefined || role === undefined ? undefined : (await this.d.users.refs([id], tx)).get(id);
    if (member === undefined) {
      const who = ref.user_id !== undefined ? `(user ${ref.user_id})` : `"${ref.username}"`;
      throw ApiError.notFound(`assignee ${who} among org members`);
    }
    const same = (a: string | undefined, b: string) => a === undefined || a.toLowerCase() === b.toLowerCase();
    if (!same(ref.username, member.username) || !same(ref.display_name, member.displayName)) {
      const given = [
        ref.user_id === undefined ? '' : `user_id ${ref.user_id}`,
        ref.username === undefined ? '' : `username "${ref.username}"`,
        ref.display_name === undefined ? '' : `display_name "${ref.display_name}"`,
      ].filter((g) => g !== '');
      throw ApiError.validation(`assignee: ${given.join(' and ')} name different members`);
    }
    return member;
  }

  private async byDisplayName(tx: Db, orgId: number, ref: AssigneeRef): Promise<UserRefRow> {
    const name = ref.display_name ?? '';
    const named = await this.d.users.idsByDisplayName(name);
    const members = (await this.d.orgs.membersAmong(orgId, named)).slice(0, 2);
    if (members.length === 0) throw ApiError.notFound(`assignee "${name}" among org members`);
    if (members.length > 1) {
      throw ApiError.conflict(`display_name "${name}" matches several members; give user_id or username`);
    }
    const member = (await this.d.users.refs(members, tx)).get(members[0]!);
    if (member === undefined) throw ApiError.notFound(`assignee "${name}" among org members`);
    return member;
  }

  /** Writes an `issue.*` event in the caller's transaction: `{action, issue, sender, repository, ...}`. */
  private async emit(
    tx: Db,
    t: RepoTarget,
    sender: Actor,
    type: IssueEventType,
    payload: Omit<IssuePayload, 'sender' | 'repository'>,
  ): Promise<void> {
    const s = (await this.d.users.refs([sender.id], tx)).get(sender.id);
    const event: DomainEvent<IssueEventType> = {
      type,
      repoId: t.repo.id,
      senderId: sender.id,
      payload: {
        ...payload,
        sender: s === undefined ? { id: sender.id, username: sender.username } : userRefJson(s),
        repository: { id: t.repo.id, name: t.repo.name, org: t.org.name },
      },
    };
    await emitEvents(tx, [event]);
  }
}
