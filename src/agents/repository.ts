import { count, one, namesById, Prepared, type Db } from '../db/query.ts';
import { intArray, textArray } from '../db/sql.ts';

/** The queries of CI agent identities and their liveness (`agents`, `agent_instances`, `agent_processes`). */

export type AgentRow = { id: number; name: string };
/** An agent instance (a name several processes may share over time). */
export type InstanceKey = { agentId: number; instance: string };

export function insertAgent(db: Db, name: string, hash: string): Promise<AgentRow> {
  return one<AgentRow>(db, 'insert into agents (name, token_hash) values (?, ?) returning id, name', [
    name,
    hash,
  ]);
}

/** The agent with this token hash, created with `name` when there is none. */
export function ensureAgent(db: Db, name: string, hash: string): Promise<AgentRow> {
  return one<AgentRow>(
    db,
    `insert into agents (name, token_hash) values (?, ?)
     on conflict (token_hash) do update set token_hash = excluded.token_hash returning id, name`,
    [name, hash],
  );
}

const BY_TOKEN = new Prepared<AgentRow>('agent_by_token', 'select id, name from agents where token_hash = ?');

export function agentByHash(db: Db, hash: string): Promise<AgentRow | undefined> {
  return BY_TOKEN.first(db, [hash]);
}

export function namesByIds(db: Db, ids: readonly number[]): Promise<Map<number, string>> {
  return namesById(db, 'select id, name from agents where id = any(?::int[])', ids);
}

/**
 * The agent and its instance are alive now (a deleted agent records nothing); `labels`, when
 * given (polls), are the labels the instance polls with.
 */
export async function instanceSeen(
  db: Db,
  agentId: number,
  instance: string,
  labels?: Record<string, string>,
): Promise<void> {
  const json = labels === undefined ? null : JSON.stringify(labels);
  await db.execute(
    `with a as (update agents set last_seen_at = now() where id = ? returning id)
     insert into agent_instances (agent_id, instance, last_seen_at, labels)
       select id, ?, now(), coalesce(?::jsonb, '{}') from a
     on conflict (agent_id, instance) do update
       set last_seen_at = now(), labels = coalesce(?::jsonb, agent_instances.labels)`,
    [agentId, instance, json, json],
  );
}

export type AgentListRow = {
  id: number;
  name: string;
  created_at: Date | string;
  last_seen_at: Date | string | null;
  instances: { instance: string; labels: Record<string, string>; last_seen_at: string }[];
};

/** Every agent, oldest first, with its instances (newest seen first). */
export function listAgents(db: Db): Promise<AgentListRow[]> {
  return db.execute<AgentListRow[]>(
    `select a.id, a.name, a.created_at, a.last_seen_at,
            coalesce((select json_agg(json_build_object('instance', i.instance, 'labels', i.labels,
                                                        'last_seen_at', i.last_seen_at)
                                      order by i.last_seen_at desc)
                        from agent_instances i where i.agent_id = a.id), '[]') as instances
       from agents a order by a.id`,
  );
}

/** Deletes an agent (its instances and processes go with it); false when there is none. */
export async function deleteAgent(db: Db, id: number): Promise<boolean> {
  const rows = await db.execute('delete from agents where id = ? returning id', [id]);
  return rows.length > 0;
}

/** The agent process `nonce` of the instance is alive now. */
export async function processSeen(db: Db, agentId: number, instance: string, nonce: string): Promise<void> {
  await db.execute(
    `insert into agent_processes (agent_id, instance, nonce) values (?, ?, ?)
     on conflict (agent_id, instance, nonce) do update set last_seen_at = now()`,
    [agentId, instance, nonce],
  );
}

/** Agent instances seen within `withinMs`: all, or those polling with exactly `labels`. */
export function instancesSeenWithin(
  db: Db,
  withinMs: number,
  labels?: Record<string, string>,
): Promise<number> {
  return count(
    db,
    `select count(*) as n from agent_instances where last_seen_at > now() - (? * interval '1 millisecond')
       ${labels === undefined ? '' : 'and labels = ?::jsonb'}`,
    labels === undefined ? [withinMs] : [withinMs, JSON.stringify(labels)],
  );
}

/** Of the instances `keys`, those seen within `withinMs` (at or after `now() - withinMs`). */
export async function seenAmong(
  db: Db,
  keys: readonly InstanceKey[],
  withinMs: number,
): Promise<InstanceKey[]> {
  if (keys.length === 0) return [];
  return db.execute<InstanceKey[]>(
    `select i.agent_id as "agentId", i.instance from agent_instances i
       join unnest(?::int[], ?::text[]) k(agent_id, instance)
         on k.agent_id = i.agent_id and k.instance = i.instance
      where i.last_seen_at >= now() - (? * interval '1 millisecond')`,
    [intArray(keys.map((k) => k.agentId)), textArray(keys.map((k) => k.instance)), withinMs],
  );
}

/**
 * Of the processes `nonces` of an instance, those gone before the process `me` first appeared
 * (last seen before that, or never seen). Nothing when `me` has not been recorded.
 */
export async function goneBefore(
  db: Db,
  key: InstanceKey,
  me: string,
  nonces: readonly string[],
): Promise<string[]> {
  if (nonces.length === 0) return [];
  const rows = await db.execute<{ nonce: string }[]>(
    `select n.nonce from unnest(?::text[]) n(nonce)
       join agent_processes me on me.agent_id = ? and me.instance = ? and me.nonce = ?
       left join agent_processes o on o.agent_id = me.agent_id and o.instance = me.instance
                                   and o.nonce = n.nonce
      where coalesce(o.last_seen_at, '-infinity') < me.first_seen_at`,
    [textArray(nonces), key.agentId, key.instance, me],
  );
  return rows.map((r) => r.nonce);
}

/** Forgets processes not seen for a day (their pipelines are long decided). */
export async function forgetOldProcesses(db: Db): Promise<void> {
  await db.execute(`delete from agent_processes where last_seen_at < now() - interval '1 day'`);
}
