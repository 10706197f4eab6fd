import type { EntityManager } from '@mikro-orm/postgresql';
import { hashToken, newTokenValue } from '../domain/access.ts';
import type { Db } from '../db/query.ts';
import * as db from './repository.ts';
import type { AgentListRow, AgentRow, InstanceKey } from './repository.ts';
import { agentJson, type AgentJson } from './schemas.ts';

export type { AgentRow, InstanceKey };

/** CI agent identities: registered by an admin (or bootstrapped from TRIAD_AGENT_TOKEN), and their liveness. */
export class AgentsService {
  private readonly em: () => EntityManager;

  constructor(deps: { em: () => EntityManager }) {
    this.em = deps.em;
  }

  async create(name: string): Promise<{ id: number; name: string; token: string }> {
    const token = newTokenValue('triad_agent_');
    const row = await db.insertAgent(this.em(), name, hashToken(token));
    return { id: row.id, name: row.name, token };
  }

  /** Bootstrap: an agent whose token is `token` exists afterwards. */
  async ensure(token: string, name = 'bootstrap'): Promise<AgentRow> {
    return db.ensureAgent(this.em(), name, hashToken(token));
  }

  async byTokenHash(hash: string): Promise<AgentRow | undefined> {
    return db.agentByHash(this.em(), hash);
  }

  /** Every registered agent with its instances; `running` gives the pipelines each agent runs. */
  async list(
    running: (ids: number[]) => Promise<Map<number, { id: number; instance: string }[]>>,
    liveMs: number,
  ): Promise<AgentJson[]> {
    const rows: AgentListRow[] = await db.listAgents(this.em());
    const byAgent = await running(rows.map((r) => r.id));
    return rows.map((r) => agentJson(r, byAgent.get(r.id) ?? [], liveMs));
  }

  /** The agent's name; undefined when there is no such agent. */
  async nameOf(id: number): Promise<string | undefined> {
    return (await db.namesByIds(this.em(), [id])).get(id);
  }

  /** Deregisters an agent: its token stops working at once. False when there is no such agent. */
  async remove(id: number): Promise<boolean> {
    return db.deleteAgent(this.em(), id);
  }

  /**
   * Records that an agent instance (and its process, by nonce) is alive (every poll and
   * heartbeat); a poll also records the labels the instance polls with.
   */
  async seen(
    agentId: number,
    instance: string | undefined,
    nonce?: string,
    labels?: Record<string, string>,
  ): Promise<void> {
    await db.instanceSeen(this.em(), agentId, instance ?? 'default', labels);
    if (nonce !== undefined) await db.processSeen(this.em(), agentId, instance ?? 'default', nonce);
  }

  /** Agent instances seen within `withinMs`: all, or those polling with exactly `labels`. */
  async liveInstances(withinMs: number, labels?: Record<string, string>): Promise<number> {
    return db.instancesSeenWithin(this.em(), withinMs, labels);
  }

  // ----- liveness facts for the CI reaper (in the caller's transaction) ---------------------------

  /** Names of the agents of `ids` that exist. */
  async names(tx: Db, ids: readonly number[]): Promise<Map<number, string>> {
    return db.namesByIds(tx, [...new Set(ids)]);
  }

  /** Of these instances, those seen within `withinMs`. */
  async seenAmong(tx: Db, keys: readonly InstanceKey[], withinMs: number): Promise<InstanceKey[]> {
    return db.seenAmong(tx, keys, withinMs);
  }

  /** Of the processes `nonces` of an instance, those gone before the process `me` first appeared. */
  async goneBefore(tx: Db, key: InstanceKey, me: string, nonces: readonly string[]): Promise<string[]> {
    return db.goneBefore(tx, key, me, nonces);
  }

  async forgetOldProcesses(tx: Db): Promise<void> {
    await db.forgetOldProcesses(tx);
  }
}
