import type { EntityManager } from '@mikro-orm/postgresql';
import { ApiError } from '../http/errors.ts';
import type { RepoTarget } from '../domain/repo.ts';
import { isUniqueViolation } from '../db/sql.ts';
import type { Db } from '../db/query.ts';
import * as db from './repository.ts';
import type { LabelRow } from './repository.ts';
import { catalogLabelJson, type CreateLabelBody, type LabelJson, type LabelScope } from './schemas.ts';

/** Where a label is defined: site-wide, in an organization, or in a repository. */
export type LabelOwner =
  { scope: 'admin' } | { scope: 'org'; orgId: number } | { scope: 'repo'; repoId: number };

export const catalogOf = (t: RepoTarget): db.CatalogOf => ({ orgId: t.org.id, repoId: t.repo.id });

/**
 * The label catalog: site (admin), organization and repository labels. A repository sees the
 * merged catalog, where the most specific scope wins for a name (case-insensitive).
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
    const scope: LabelScope = owner.scope;
    const conflict = () => ApiError.conflict(`a ${scope} label named "${body.name}" already exists`);
    try {
      const row = await db.insertLabel(this.em(), {
        scope,
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

  /** Resolves label names in the merged catalog, in order; 404 naming the first unknown one. */
  async resolve(tx: Db, t: RepoTarget, names: readonly string[]): Promise<LabelRow[]> {
    if (names.length === 0) return [];
    const rows = await db.catalogNamed(tx, catalogOf(t), names);
    const byName = new Map(rows.map((r) => [r.name.toLowerCase(), r]));
    return names.map((n) => {
      const found = byName.get(n.toLowerCase());
      if (found === undefined) throw ApiError.notFound(`label "${n}"`);
      return found;
    });
  }
}
