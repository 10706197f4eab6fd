import type { EntityManager } from '@mikro-orm/postgresql';
import { z } from 'zod';
import { hashToken } from '../http/auth.ts';
import { nonBlank } from '../http/input.ts';
import { newTokenValue } from '../users/service.ts';

export const createAgentBody = z.object({ name: z.string().trim().min(1).max(255).meta(nonBlank) });

export type AgentRow = { id: number; name: string };

/** CI agent identities: registered by an admin (or bootstrapped from TRIAD_AGENT_TOKEN). */
export class AgentsService {
  private readonly em: () => EntityManager;

  constructor(deps: { em: () => EntityManager }) {
    this.em = deps.em;
  }

  async create(name: string): Promise<{ id: number; name: string; token: string }> {
    const token = newTokenValue().replace(/^triad_/, 'triad_agent_');
    const [row] = await this.em().execute<AgentRow[]>(
      'insert into agents (name, token_hash) values (?, ?) returning id, name',
      [name, hashToken(token)],
    );
    return { id: row!.id, name: row!.name, token };
  }

  /** Bootstrap: an agent whose token is `token` exists afterwards. */
  async ensure(token: string, name = 'bootstrap'): Promise<AgentRow> {
    const [row] = await this.em().execute<AgentRow[]>(
      `insert into agents (name, token_hash) values (?, ?)
       on conflict (token_hash) do update set token_hash = excluded.token_hash returning id, name`,
      [name, hashToken(token)],
    );
    return row!;
  }

  async byTokenHash(hash: string): Promise<AgentRow | undefined> {
    const rows = await this.em().execute<AgentRow[]>('select id, name from agents where token_hash = ?', [
      hash,
    ]);
    return rows[0];
  }

  /** Records that an agent instance (and its process, by nonce) is alive (every poll and heartbeat). */
  async seen(agentId: number, instance: string | undefined, nonce?: string): Promise<void> {
    await this.em().execute(
      `with a as (update agents set last_seen_at = now() where id = ? returning id)
       insert into agent_instances (agent_id, instance, last_seen_at) select id, ?, now() from a
       on conflict (agent_id, instance) do update set last_seen_at = now()`,
      [agentId, instance ?? 'default'],
    );
    if (nonce !== undefined) {
      await this.em().execute(
        `insert into agent_processes (agent_id, instance, nonce) values (?, ?, ?)
         on conflict (agent_id, instance, nonce) do update set last_seen_at = now()`,
        [agentId, instance ?? 'default', nonce],
      );
    }
  }

  /** Agent instances seen within `withinMs`. */
  async liveInstances(withinMs: number): Promise<number> {
    const [r] = await this.em().execute<{ n: string }[]>(
      `select count(*) as n from agent_instances where last_seen_at > now() - (? * interval '1 millisecond')`,
      [withinMs],
    );
    return Number(r?.n ?? 0);
  }
}
