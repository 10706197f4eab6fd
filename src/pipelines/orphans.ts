import type { EntityManager } from '@mikro-orm/postgresql';
import type { AgentCaller } from './model.ts';

/**
 * Running pipelines whose agent process is gone become `error` with a reason, so nothing stays
 * `running` forever: the agent instance went silent (reaper), the instance was restarted (a new
 * process nonce appeared after the claiming one was last seen), or the claiming process says in
 * its heartbeat that it does not run the pipeline.
 */

type Orphan = { id: number; message: string };

const list = (ids: readonly number[]) => ids.map(() => '?').join(',');

/**
 * Marks pipelines `error` with their message, in the caller's transaction: running steps fail,
 * pending ones are skipped, clone tokens are revoked. Only pipelines still `running` change.
 * `agent_done` stays false, so an agent that still runs one is told to stop it.
 */
export async function markErrored(tx: EntityManager, orphans: readonly Orphan[]): Promise<number[]> {
  const done: number[] = [];
  for (const o of orphans) {
    const rows = await tx.execute<{ id: number }[]>(
      `update pipelines set status = 'error', finished_at = now(), error_message = ?
        where id = ? and status = 'running' returning id`,
      [o.message, o.id],
    );
    if (rows.length > 0) done.push(o.id);
  }
  if (done.length > 0) {
    await tx.execute(
      `update pipeline_steps set status = case when status = 'running' then 'failure' else 'skipped' end,
         finished_at = now() where pipeline_id in (${list(done)}) and status in ('pending', 'running')`,
      done,
    );
    await tx.execute(`delete from api_tokens where pipeline_id in (${list(done)})`, done);
  }
  return done;
}

/** Running pipelines whose agent instance has not been seen for `timeoutMs`. */
export async function staleOrphans(tx: EntityManager, timeoutMs: number): Promise<Orphan[]> {
  return tx.execute<Orphan[]>(
    `select p.id, format('agent %s (instance %s) missed heartbeats for %s s',
              coalesce(a.name, 'deleted agent'), p.agent_instance, ? / 1000) as message
       from pipelines p left join agents a on a.id = p.agent_id
       left join agent_instances i on i.agent_id = p.agent_id and i.instance = p.agent_instance
      where p.status = 'running'
        and greatest(i.last_seen_at, p.started_at) < now() - (? * interval '1 millisecond')
      for update of p skip locked`,
    [timeoutMs, timeoutMs],
  );
}

/**
 * What a heartbeat of `caller` tells about its instance's pipelines:
 * - claimed under another nonce whose process was last seen before this one first appeared: that
 *   process is gone (a restart reusing the instance name; two live processes sharing a name are
 *   not mistaken for one another, as both keep being seen);
 * - claimed by this very process, older than `graceMs` (a poll answer may still be on its way)
 *   and not in `running`: the process does not run it any more.
 */
export async function heartbeatOrphans(
  tx: EntityManager,
  caller: AgentCaller & { nonce: string },
  running: readonly number[] | undefined,
  graceMs: number,
): Promise<Orphan[]> {
  const instance = caller.instance ?? 'default';
  const restarted = await tx.execute<Orphan[]>(
    `select p.id, format('agent %s (instance %s) restarted: the process that claimed this pipeline is gone',
              a.name, p.agent_instance) as message
       from pipelines p join agents a on a.id = p.agent_id
       join agent_processes me on me.agent_id = p.agent_id and me.instance = p.agent_instance and me.nonce = ?
       left join agent_processes o on o.agent_id = p.agent_id and o.instance = p.agent_instance
                                   and o.nonce = p.agent_nonce
      where p.status = 'running' and p.agent_id = ? and p.agent_instance = ? and p.agent_nonce <> ?
        and coalesce(o.last_seen_at, '-infinity') < me.first_seen_at
      for update of p skip locked`,
    [caller.nonce, caller.agentId, instance, caller.nonce],
  );
  if (running === undefined) return restarted;
  const dropped = await tx.execute<Orphan[]>(
    `select p.id, format('agent %s (instance %s) is no longer running this pipeline', a.name, p.agent_instance)
              as message
       from pipelines p join agents a on a.id = p.agent_id
      where p.status = 'running' and p.agent_id = ? and p.agent_instance = ? and p.agent_nonce = ?
        and p.started_at < now() - (? * interval '1 millisecond')
        ${running.length > 0 ? `and p.id not in (${list(running)})` : ''}
      for update of p skip locked`,
    [caller.agentId, instance, caller.nonce, graceMs, ...running],
  );
  return [...restarted, ...dropped];
}
