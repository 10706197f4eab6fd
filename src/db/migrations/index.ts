import { Migration0001Foundation } from './0001-foundation.ts';

/** Every committed migration, in order. New migrations are appended here. */
export const migrations = [{ name: '0001-foundation', class: Migration0001Foundation }];
