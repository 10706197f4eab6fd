import type { EntityName } from '@mikro-orm/core';

/**
 * Every entity known to the ORM. No feature uses entities today: each reads and writes through
 * raw SQL in its `repository.ts` (see docs/architecture.md). A feature that chooses entities
 * declares them in its own `entities.ts` and lists them here.
 */
export const entities: EntityName[] = [];
