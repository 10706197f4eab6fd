import { z } from 'zod';
import { nonBlank } from '../http/input.ts';
import { isoTime } from '../db/sql.ts';
import type { AgentListRow } from './repository.ts';

// The length is the name's as sent (the document's `maxLength`), checked before trimming.
export const createAgentBody = z.object({ name: z.string().max(255).trim().min(1).meta(nonBlank) });

export const newAgentSchema = z
  .object({ id: z.int(), name: z.string(), token: z.string().meta({ description: 'shown only here' }) })
  .meta({ id: 'NewAgent' });

const labelMap = z.record(z.string(), z.string());

export const agentSchema = z
  .object({
    id: z.int(),
    name: z.string(),
    created_at: z.string(),
    last_seen_at: z.string().nullable(),
    instances: z
      .array(
        z.object({
          name: z.string().meta({ description: 'the instance (`X-Svc-Agent-Instance`, e.g. a pod name)' }),
          labels: labelMap.meta({ description: 'the labels it last polled with' }),
          last_seen_at: z.string(),
          live: z.boolean().meta({ description: 'seen within the agent timeout' }),
          running_pipelines: z.array(z.int()).meta({ description: 'ids of the pipelines it runs now' }),
        }),
      )
      .meta({ description: 'the instances seen with this token, most recently seen first' }),
    running_pipelines: z.array(z.int()).meta({ description: 'ids of the pipelines its instances run now' }),
  })
  .meta({ id: 'Agent' });
export type AgentJson = z.infer<typeof agentSchema>;

/** An agent row as the admin list shows it. */
export function agentJson(
  r: AgentListRow,
  running: readonly { id: number; instance: string }[],
  liveMs: number,
): AgentJson {
  const now = Date.now();
  return {
    id: r.id,
    name: r.name,
    created_at: isoTime(r.created_at),
    last_seen_at: r.last_seen_at === null ? null : isoTime(r.last_seen_at),
    instances: r.instances.map((i) => ({
      name: i.instance,
      labels: i.labels,
      last_seen_at: isoTime(i.last_seen_at),
      live: now - new Date(i.last_seen_at).getTime() <= liveMs,
      running_pipelines: running.filter((p) => p.instance === i.instance).map((p) => p.id),
    })),
    running_pipelines: running.map((p) => p.id),
  };
}
