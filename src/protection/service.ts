import type { EntityManager } from '@mikro-orm/postgresql';
import type { RepoTarget } from '../domain/repo.ts';
import { ApiError } from '../http/errors.ts';
import { isUniqueViolation } from '../db/sql.ts';
import type { UsersService } from '../users/service.ts';
import * as db from './repository.ts';
import type { ProtectionRule, PushAllow } from './rules.ts';
import type { CreateProtectionBody, UpdateProtectionBody } from './schemas.ts';

export type ProtectionsDeps = { em: () => EntityManager; users: Pick<UsersService, 'findByUsername'> };

/**
 * Protected refs of a repository: the rules' records. Who may read or change them is the
 * routes' `repo` needs (reads: org members; changes: org owners with the admin scope); pushes
 * (each kind's backend), merges and `delete_source` apply them (src/protection/rules.ts).
 */
export class ProtectionsService {
  private readonly d: ProtectionsDeps;

  constructor(deps: ProtectionsDeps) {
    this.d = deps;
  }

  /** The rules of a repository by its id (merges and `delete_source` apply them). */
  rulesOf(repoId: number): Promise<ProtectionRule[]> {
    return db.listRules(this.d.em().fork(), repoId);
  }

  list(t: RepoTarget): Promise<ProtectionRule[]> {
    return db.listRules(this.d.em(), t.repo.id);
  }

  async get(t: RepoTarget, id: number): Promise<ProtectionRule> {
    const rule = await db.getRule(this.d.em(), t.repo.id, id);
    if (rule === undefined) throw ApiError.notFound('protection rule');
    return rule;
  }

  async create(t: RepoTarget, body: CreateProtectionBody): Promise<ProtectionRule> {
    const fields = { ...body, push: await this.knownUsers(body.push) };
    return this.unique(body.pattern, () => db.insertRule(this.d.em().fork(), t.repo.id, fields));
  }

  async update(t: RepoTarget, id: number, body: UpdateProtectionBody): Promise<ProtectionRule> {
    const before = await this.get(t, id);
    const next: db.RuleFields = {
      pattern: before.pattern,
      fast_forward_only: before.fast_forward_only,
      allow_deletion: before.allow_deletion,
      push: before.push,
      require_pipeline: before.require_pipeline,
      required_contexts: before.required_contexts,
    };
    for (const [k, v] of Object.entries(body)) if (v !== undefined) Object.assign(next, { [k]: v });
    next.push = await this.knownUsers(next.push);
    const after = await this.unique(next.pattern, () =>
      db.updateRule(this.d.em().fork(), t.repo.id, id, next),
    );
    if (after === undefined) throw ApiError.notFound('protection rule');
    return after;
  }

  async remove(t: RepoTarget, id: number): Promise<void> {
    if (!(await db.deleteRule(this.d.em().fork(), t.repo.id, id))) throw ApiError.notFound('protection rule');
  }

  /**
   * `push: {users}` names existing users only (422 names the first unknown one); names are
   * matched without regard to case and stored as the users spell them.
   */
  private async knownUsers(push: PushAllow): Promise<PushAllow> {
    if (typeof push === 'string') return push;
    const users: string[] = [];
    for (const name of push.users) {
      const user = await this.d.users.findByUsername(name);
      if (user === undefined) throw new ApiError(422, 'unprocessable', `push.users: no user named "${name}"`);
      if (!users.includes(user.username)) users.push(user.username);
    }
    return { users };
  }

  private async unique<T>(pattern: string, write: () => Promise<T>): Promise<T> {
    try {
      return await write();
    } catch (e) {
      if (isUniqueViolation(e)) throw ApiError.conflict(`the repository already has a rule for "${pattern}"`);
      throw e;
    }
  }
}
