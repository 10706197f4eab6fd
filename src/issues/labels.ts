import type { EntityManager } from '@mikro-orm/postgresql';
import { ApiError } from '../http/errors.ts';
import type { RepoTarget } from '../domain/repo.ts';
import { isDbId, isUniqueViolation } from '../db/sql.ts';
import type { Db } from '../db/query.ts';
import * as db from './repository.ts';
import type { LabelRow } from './repository.ts';
import * as mgmt from './label-repository.ts';
import type { LabelOwner } from './label-repository.ts';
import {
  catalogLabelJson,
  type CreateLabelBody,
  type LabelJson,
  type LabelScope,
  type UpdateLabelBody,
} from './schemas.ts';

export type { LabelOwner } from './label-repository.ts';

/** A label of a scope's list: with how many issues carry it. */
export type LabelUse = LabelJson & { issues: number };

/**
 * A label of a repository's merged catalog: `issues` counts the repository's issues carrying a
 * label of its name (as the issue list's `label` filter), `shadows` the broader scopes that
 * define the same name, which this one hides in the repository.
 */
export type MergedLabel = LabelUse & { shadows: LabelScope[] };

export const catalogOf = (t: RepoTarget): db.CatalogOf => ({ orgId: t.org.id, repoId: t.repo.id });

/**
 * The label catalog: site (admin), organization and repository labels. A repository sees the
 * merged catalog, where the most specific scope wins for a name (case-insensitive).
 *
 * Management (list, change, delete; the web's label pages) addresses a label by its id within
 * one scope: a label of another scope is not found (404). Who may manage a scope is the caller's
 * check, as for create (site admins; owners of the organization). Issues refer to labels by id,
 * so a change of name, colour or description shows on every issue at once without touching
 * them; a deletion takes the label off every issue that carries it, in the same transaction.
 * Neither writes issue events nor changes `updated_at`: the catalog changed, not the issues.
 */
export class LabelCatalog {
  private readonly em: () => EntityManager;

  constructor(deps: { em: () => EntityManager }) {
    this.em = deps.em;
  }

  /** The merged catalog of a repository, by name. */
  async catalog(t: RepoTarget): Promise<LabelJson[]> {
    return (await db.catalog(this.em(), catalogOf(t))).map(catalogLabelJson);
  }

  async create(owner: LabelOwner, body: CreateLabelBody): Promise<LabelJson> {
    const conflict = () => clash(owner, body.name);
    try {
      const row = await db.insertLabel(this.em(), {
        scope: owner.scope,
        orgId: owner.scope === 'org' ? owner.orgId : null,
        repoId: owner.scope === 'repo' ? owner.repoId : null,
        name: body.name,
        color: body.color.toLowerCase(),
        description: body.description ?? '',
      });
      if (row === undefined) throw conflict();
      return catalogLabelJson(row);
    } catch (e) {
      if (isUniqueViolation(e)) throw conflict();
      throw e;
    }
  }

  /** The labels defined in one scope, by name, each with how many issues carry it. */
  async list(owner: LabelOwner): Promise<LabelUse[]> {
    const em = this.em();
    const rows = await mgmt.ownLabels(em, owner);
    const use = await mgmt.labelUse(
      em,
      rows.map((r) => r.id),
    );
    return rows.map((r) => ({ ...catalogLabelJson(r), issues: use.get(r.id) ?? 0 }));
  }

  /** One label of this scope with how many issues carry it; 404 when the scope has no label `id`. */
  async get(owner: LabelOwner, id: number): Promise<LabelUse> {
    const em = this.em();
    const row = isDbId(id) ? await mgmt.ownLabel(em, owner, id) : undefined;
    if (row === undefined) throw ApiError.notFound('label');
    const use = await mgmt.labelUse(em, [row.id]);
    return { ...catalogLabelJson(row), issues: use.get(row.id) ?? 0 };
  }

  /** Changes a label of this scope: 404 as `get`, 409 when the scope has another of the new name. */
  async update(owner: LabelOwner, id: number, body: UpdateLabelBody): Promise<LabelJson> {
    if (!isDbId(id)) throw ApiError.notFound('label');
    try {
      const row = await mgmt.updateLabel(this.em(), owner, id, {
        name: body.name,
        color: body.color?.toLowerCase(),
        description: body.description,
      });
      if (row === undefined) throw ApiError.notFound('label');
      return catalogLabelJson(row);
    } catch (e) {
      if (isUniqueViolation(e)) throw clash(owner, body.name ?? '');
      throw e;
    }
  }

  /** Deletes a label of this scope and takes it off every issue; answers how many issues lost it. */
  async remove(owner: LabelOwner, id: number): Promise<{ label: LabelJson; issues: number }> {
    if (!isDbId(id)) throw ApiError.notFound('label');
    return this.em().transactional(async (tx) => {
      const row = await mgmt.deleteLabel(tx, owner, id);
      if (row === undefined) throw ApiError.notFound('label');
      return { label: catalogLabelJson(row), issues: await mgmt.unlabelIssues(tx, row.id) };
    });
  }

  /**
   * The merged catalog of a repository as its labels page shows it: each name's label in effect,
   * the broader scopes it shadows, and how many of the repository's issues carry the name.
   */
  async merged(t: RepoTarget): Promise<MergedLabel[]> {
    const em = this.em();
    const rows = await mgmt.catalogAll(em, catalogOf(t));
    const use = await mgmt.useByName(
      em,
      t.repo.id,
      rows.map((r) => r.id),
    );
    const out: MergedLabel[] = [];
    for (const r of rows) {
      const key = r.name.toLowerCase();
      const last = out.at(-1);
      // (most specific first within a name: the later ones are shadowed by the first)
      if (last !== undefined && last.name.toLowerCase() === key) last.shadows.push(r.scope);
      else out.push({ ...catalogLabelJson(r), issues: use.get(key) ?? 0, shadows: [] });
    }
    return out;
  }

  /**
   * Resolves label names in the merged catalog, in order; 404 naming the first unknown one. The
   * labels found stay locked against deletion until `tx` ends, so an issue never keeps the id of
   * a label deleted meanwhile.
   */
  async resolve(tx: Db, t: RepoTarget, names: readonly string[]): Promise<LabelRow[]> {
    if (names.length === 0) return [];
    const rows = await db.catalogNamed(tx, catalogOf(t), names);
    const kept = await mgmt.lockLabels(
      tx,
      rows.map((r) => r.id),
    );
    const byName = new Map(rows.filter((r) => kept.has(r.id)).map((r) => [r.name.toLowerCase(), r]));
    return names.map((n) => {
      const found = byName.get(n.toLowerCase());
      if (found === undefined) throw ApiError.notFound(`label "${n}"`);
      return found;
    });
  }
}

const SCOPE_NAMES: Record<LabelScope, string> = { admin: 'site', org: 'organization', repo: 'repository' };

function clash(owner: LabelOwner, name: string): ApiError {
  return ApiError.conflict(`a ${SCOPE_NAMES[owner.scope]} label named "${name}" already exists`);
}
