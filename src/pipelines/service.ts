import { EventEmitter } from 'node:events';
import type { Response } from 'express';
import type { EntityManager } from '@mikro-orm/postgresql';
import pg from 'pg';
import { z } from 'zod';
import type { Logger } from 'pino';
import { ApiError } from '../http/errors.ts';
import { hashToken } from '../http/auth.ts';
import { offsetOf, pageQuery } from '../http/pagination.ts';
import type { BlobStore } from '../storage/index.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import { newTokenValue } from '../users/service.ts';
import { isoTime, textArray } from '../db/sql.ts';
import { timestampInput } from '../http/input.ts';
import { PIPELINE_FILE, parsePipelineFile, whenMatches, type PipelineEvent } from './pipeline-file.ts';
import type { JobJson, PipelineJson, StepJson } from './schemas.ts';
import type { VcsKind } from '../vcs/index.ts';

export const PIPELINE_STATUSES = ['pending', 'running', 'success', 'failure', 'cancelled', 'error'] as const;
export const STEP_STATUSES = ['pending', 'running', 'success', 'failure', 'skipped', 'cancelled'] as const;
export type PipelineStatus = (typeof PIPELINE_STATUSES)[number];
type StepStatus = (typeof STEP_STATUSES)[number];
const FINAL: readonly string[] = ['success', 'failure', 'cancelled', 'error'];

export const LOG_APPEND_LIMIT = 1024 * 1024;
export const LOG_READ_CAP = 16 * 1024 * 1024;
const NUMBER_LOCK = 0x70697065; // "pipe"
const NOTIFY_CHANNEL = 'triad_pipelines';
const CLONE_TOKEN_TTL_MS = 6 * 3600 * 1000;

const timestamp = timestampInput.nullish();
export const stepStatusBody = z.object({
  status: z.enum(STEP_STATUSES),
  exit_code: z.number().int().min(-2147483648).max(2147483647).nullish(),
  started_at: timestamp,
  finished_at: timestamp,
});
export const pipelineStatusBody = z.object({
  status: z.enum(PIPELINE_STATUSES),
  finished_at: timestamp,
  started_at: timestamp,
  error_message: z.string().max(10_000).nullish(),
});
export const listQuery = pageQuery(20, 50).extend({ status: z.enum(PIPELINE_STATUSES).optional() });

export type RepoInfo = { id: number; name: string; org: string; vcs: string; isPrivate: boolean };
export type Trigger = {
  commit: string;
  event: string;
  branch: string;
  tag: string;
  senderId: number | null;
};

type PipelineRow = {
  id: number;
  repo_id: number;
  number: number;
  commit_node: string;
  branch: string;
  tag: string;
  event: PipelineEvent;
  events: PipelineEvent[];
  status: PipelineStatus;
  trigger_by: number | null;
  trigger_username: string | null;
  error_message: string | null;
  agent_id: number | null;
  agent_instance: string | null;
  created_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
};
type StepRow = {
  id: number;
  pipeline_id: number;
  number: number;
  name: string;
  image: string;
  commands: string[];
  environment: Record<string, string>;
  status: StepStatus;
  exit_code: number | null;
  started_at: Date | null;
  finished_at: Date | null;
  log_size: string;
};

const PIPELINE_COLUMNS = `p.id, p.repo_id, p.number, p.commit_node, p.branch, p.tag, p.event, p.events, p.status,
  p.trigger_by, u.username as trigger_username, p.error_message, p.agent_id, p.agent_instance,
  p.created_at, p.started_at, p.finished_at`;
const PIPELINE_FROM = 'pipelines p left join users u on u.id = p.trigger_by';

const iso = (d: Date | string | null): string | null => (d === null ? null : isoTime(d));

function pipelineJson(p: PipelineRow, steps?: StepRow[]): PipelineJson {
  return {
    id: p.id,
    number: p.number,
    commit_node: p.commit_node,
    branch: p.branch,
    tag: p.tag,
    event: p.event,
    events: p.events,
    status: p.status,
    trigger_by: p.trigger_by,
    trigger_user: p.trigger_by === null ? null : { id: p.trigger_by, username: p.trigger_username },
    created_at: isoTime(p.created_at),
    started_at: iso(p.started_at),
    finished_at: iso(p.finished_at),
    ...(p.error_message === null ? {} : { error_message: p.error_message }),
    ...(steps === undefined ? {} : { steps: steps.map(stepJson) }),
  };
}
function stepJson(s: StepRow): StepJson {
  return {
    id: s.id,
    number: s.number,
    name: s.name,
    image: s.image,
    status: s.status,
    exit_code: s.exit_code,
    started_at: iso(s.started_at),
    finished_at: iso(s.finished_at),
  };
}

/** Wakes long-polling agents when a pipeline is queued, through PostgreSQL LISTEN/NOTIFY. */
class QueueWaker {
  private readonly bus = new EventEmitter();
  private client: pg.Client | undefined;
  private closed = false;
  private readonly url: string;
  private readonly log: Logger;

  constructor(url: string, log: Logger) {
    this.url = url;
    this.log = log;
    this.bus.setMaxListeners(0);
  }

  async start(): Promise<void> {
    const c = new pg.Client({ connectionString: this.url });
    c.on('notification', () => this.bus.emit('wake'));
    c.on('error', (err) => {
      this.log.warn({ err }, 'pipeline queue listener lost; reconnecting');
      this.client = undefined;
      if (!this.closed) setTimeout(() => void this.start().catch(() => undefined), 1000).unref();
    });
    await c.connect();
    await c.query(`listen ${NOTIFY_CHANNEL}`);
    this.client = c;
  }

  /** Resolves on the next notification, after `ms`, at shutdown, or when `signal` aborts. */
  wait(ms: number, signal?: AbortSignal): Promise<void> {
    if (this.closed) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(t);
        this.bus.off('wake', done);
        this.bus.off('close', done);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const t = setTimeout(done, ms);
      this.bus.on('wake', done);
      this.bus.on('close', done);
      signal?.addEventListener('abort', done, { once: true });
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    this.bus.emit('close');
    await this.client?.end().catch(() => undefined);
  }
}

export type PipelinesDeps = {
  em: () => EntityManager;
  blobs: BlobStore;
  log: Logger;
  metrics: Metrics;
  databaseUrl: string;
  agentTimeoutMs: number;
  baseUrl: () => string;
  /** The repository's file at a commit (undefined when absent). */
  readFile: (repoId: number, rev: string, path: string) => Promise<string | undefined>;
  repoInfo: (repoId: number) => Promise<RepoInfo>;
};

export class PipelinesService {
  private readonly d: PipelinesDeps;
  private readonly waker: QueueWaker;
  private readonly claimed;
  private readonly finished;
  private reaper: NodeJS.Timeout | undefined;

  constructor(deps: PipelinesDeps) {
    this.d = deps;
    this.waker = new QueueWaker(deps.databaseUrl, deps.log);
    deps.metrics.gauge('triad_ci_pipelines_pending', 'Pipelines waiting for an agent', () =>
      this.count('pending'),
    );
    deps.metrics.gauge('triad_ci_pipelines_running', 'Pipelines claimed by an agent', () =>
      this.count('running'),
    );
    this.claimed = deps.metrics.counter(
      'triad_ci_pipelines_claimed_total',
      'Pipelines claimed by agents',
      [],
    );
    this.finished = deps.metrics.counter(
      'triad_ci_pipelines_finished_total',
      'Pipelines finished, by status',
      ['status'],
    );
  }

  async start(): Promise<void> {
    await this.waker.start();
    const every = Math.max(250, Math.min(5000, Math.floor(this.d.agentTimeoutMs / 4)));
    this.reaper = setInterval(() => {
      this.reapStale().catch((err: unknown) => this.d.log.warn({ err }, 'pipeline reaper failed'));
    }, every);
    this.reaper.unref();
  }

  async stop(): Promise<void> {
    if (this.reaper !== undefined) clearInterval(this.reaper);
    await this.waker.close();
  }

  private em(): EntityManager {
    return this.d.em();
  }

  private async count(status: 'pending' | 'running'): Promise<number> {
    const [r] = await this.em()
      .fork()
      .execute<{ n: string }[]>('select count(*) as n from pipelines where status = ?', [status]);
    return Number(r?.n ?? 0);
  }

  // ------------------------------------------------------------------ triggers

  /**
   * Creates pipelines for a batch of triggers in the caller's transaction. Triggers naming the
   * same commit become one pipeline whose `events` lists each event; a commit that already has
   * a pending or running pipeline gets the new events added to it instead of a second run.
   */
  async trigger(tx: EntityManager, repoId: number, triggers: readonly Trigger[]): Promise<number[]> {
    const byCommit = new Map<string, Trigger & { events: string[] }>();
    for (const t of triggers) {
      const seen = byCommit.get(t.commit);
      if (seen === undefined) byCommit.set(t.commit, { ...t, events: [t.event] });
      else {
        if (!seen.events.includes(t.event)) seen.events.push(t.event);
        if (seen.branch === '') seen.branch = t.branch;
        if (seen.tag === '') seen.tag = t.tag;
      }
    }
    const created: number[] = [];
    for (const t of byCommit.values()) {
      const active = await tx.execute<{ id: number; events: string[]; tag: string }[]>(
        `select id, events, tag from pipelines where repo_id = ? and commit_node = ? and status in ('pending', 'running')
          order by id desc limit 1 for update`,
        [repoId, t.commit],
      );
      const existing = active[0];
      if (existing !== undefined) {
        const events = [...existing.events, ...t.events.filter((e) => !existing.events.includes(e))];
        await tx.execute('update pipelines set events = ?::text[], tag = ? where id = ?', [
          textArray(events),
          existing.tag === '' ? t.tag : existing.tag,
          existing.id,
        ]);
        continue;
      }
      const id = await this.create(tx, repoId, t.commit, t.events, t.branch, t.tag, t.senderId);
      if (id !== undefined) created.push(id);
    }
    return created;
  }

  private async create(
    tx: EntityManager,
    repoId: number,
    commit: string,
    events: string[],
    branch: string,
    tag: string,
    senderId: number | null,
  ): Promise<number | undefined> {
    const text = await this.d.readFile(repoId, commit, PIPELINE_FILE);
    if (text === undefined) return undefined;
    const parsed = parsePipelineFile(text);
    if (parsed.ok && !whenMatches(parsed.file.when, events, branch)) return undefined;
    await tx.execute('select pg_advisory_xact_lock(?, ?)', [NUMBER_LOCK, repoId]);
    const [num] = await tx.execute<{ n: number }[]>(
      'select coalesce(max(number), 0) + 1 as n from pipelines where repo_id = ?',
      [repoId],
    );
    const steps = parsed.ok ? parsed.file.steps : [];
    const runnable = steps.filter((s) => whenMatches(s.when, events, branch));
    const status = !parsed.ok ? 'error' : runnable.length === 0 ? 'success' : 'pending';
    const [row] = await tx.execute<{ id: number }[]>(
      `insert into pipelines (repo_id, number, commit_node, branch, tag, event, events, status, trigger_by,
                              error_message, finished_at)
       values (?, ?, ?, ?, ?, ?, ?::text[], ?, ?, ?, ${status === 'pending' ? 'null' : 'now()'}) returning id`,
      [
        repoId,
        num!.n,
        commit,
        branch,
        tag,
        events[0]!,
        textArray(events),
        status,
        senderId,
        parsed.ok ? null : parsed.error,
      ],
    );
    const pipelineId = row!.id;
    for (const [i, s] of steps.entries()) {
      await tx.execute(
        `insert into pipeline_steps (pipeline_id, number, name, image, commands, environment, status)
         values (?, ?, ?, ?, ?::text[], ?, ?)`,
        [
          pipelineId,
          i + 1,
          s.name,
          s.image,
          textArray(s.commands),
          JSON.stringify(s.environment ?? {}),
          runnable.includes(s) ? 'pending' : 'skipped',
        ],
      );
    }
    if (status === 'pending') await tx.execute(`select pg_notify('${NOTIFY_CHANNEL}', '')`);
    return pipelineId;
  }

  // ------------------------------------------------------------------ user side

  private async find(repoId: number, number: number): Promise<PipelineRow> {
    const rows = Number.isSafeInteger(number)
      ? await this.em().execute<PipelineRow[]>(
          `select ${PIPELINE_COLUMNS} from ${PIPELINE_FROM} where p.repo_id = ? and p.number = ?`,
          [repoId, number],
        )
      : [];
    if (rows[0] === undefined) throw ApiError.notFound('pipeline');
    return rows[0];
  }

  private async steps(pipelineId: number): Promise<StepRow[]> {
    return this.em().execute<StepRow[]>(
      'select * from pipeline_steps where pipeline_id = ? order by number',
      [pipelineId],
    );
  }

  async list(repoId: number, q: z.infer<typeof listQuery>) {
    const where = `p.repo_id = ?${q.status === undefined ? '' : ' and p.status = ?'}`;
    const params: unknown[] = q.status === undefined ? [repoId] : [repoId, q.status];
    const [count] = await this.em().execute<{ n: string }[]>(
      `select count(*) as n from pipelines p where ${where}`,
      params,
    );
    const rows = await this.em().execute<PipelineRow[]>(
      `select ${PIPELINE_COLUMNS} from ${PIPELINE_FROM} where ${where} order by p.number desc limit ? offset ?`,
      [...params, q.per_page, offsetOf(q)],
    );
    return {
      total: Number(count?.n ?? 0),
      page: q.page,
      per_page: q.per_page,
      pipelines: rows.map((r) => pipelineJson(r)),
    };
  }

  async get(repoId: number, number: number): Promise<PipelineJson> {
    const p = await this.find(repoId, number);
    return pipelineJson(p, await this.steps(p.id));
  }

  private async getById(id: number): Promise<PipelineJson> {
    const [p] = await this.em().execute<PipelineRow[]>(
      `select ${PIPELINE_COLUMNS} from ${PIPELINE_FROM} where p.id = ?`,
      [id],
    );
    if (p === undefined) throw ApiError.notFound('pipeline');
    return pipelineJson(p, await this.steps(p.id));
  }

  /** Pending or running -> cancelled, with every pending/running step; 409 for a finished pipeline. */
  async cancel(repoId: number, number: number): Promise<PipelineJson> {
    const p = await this.find(repoId, number);
    await this.em().transactional(async (tx) => {
      const [cur] = await tx.execute<{ status: string }[]>(
        'select status from pipelines where id = ? for update',
        [p.id],
      );
      if (cur?.status !== 'pending' && cur?.status !== 'running') {
        throw ApiError.conflict(`pipeline ${number} is ${cur?.status ?? 'gone'} and cannot be cancelled`);
      }
      await tx.execute(
        `update pipelines set status = 'cancelled', finished_at = now(), agent_done = (agent_id is null) where id = ?`,
        [p.id],
      );
      await tx.execute(
        `update pipeline_steps set status = 'cancelled', finished_at = coalesce(finished_at, now())
          where pipeline_id = ? and status in ('pending', 'running')`,
        [p.id],
      );
      await tx.execute('delete from api_tokens where pipeline_id = ?', [p.id]);
    });
    this.finished.inc({ status: 'cancelled' });
    return this.get(repoId, number);
  }

  /** A new pipeline from the same commit and events, triggered by the caller. */
  async rerun(repoId: number, number: number, userId: number): Promise<PipelineJson> {
    const p = await this.find(repoId, number);
    const id = await this.em().transactional((tx) =>
      this.create(tx, repoId, p.commit_node, p.events, p.branch, p.tag, userId),
    );
    if (id === undefined) {
      throw new ApiError(422, 'unprocessable', `commit ${p.commit_node} no longer yields a pipeline`);
    }
    return this.getById(id);
  }

  /** Streams a step's log as text (capped at 16 MiB, flagged by X-Svc-Log-Truncated). */
  async streamLog(repoId: number, number: number, stepRef: string, res: Response): Promise<void> {
    const p = await this.find(repoId, number);
    const steps = await this.steps(p.id);
    const step =
      (/^\d+$/.test(stepRef) ? steps.find((s) => s.number === Number(stepRef)) : undefined) ??
      steps.find((s) => s.name === stepRef);
    if (step === undefined) throw ApiError.notFound('step');
    // A step that never started has no log (404); a started one answers its log, even if empty.
    if (step.started_at === null && Number(step.log_size) === 0) throw ApiError.notFound('log');
    const chunks = await this.em().execute<{ offset: string; size: number; blob_key: string }[]>(
      'select "offset", size, blob_key from step_log_chunks where step_id = ? order by "offset"',
      [step.id],
    );
    const total = Number(step.log_size);
    const truncated = total > LOG_READ_CAP;
    res.status(200);
    res.setHeader('Content-Type', 'text/plain; charset=utf-8');
    res.setHeader('Content-Length', String(Math.min(total, LOG_READ_CAP)));
    res.setHeader('X-Svc-Step-Name', encodeURIComponent(step.name));
    res.setHeader('X-Svc-Step-Number', String(step.number));
    if (truncated) res.setHeader('X-Svc-Log-Truncated', 'true');
    // Chunks appended after log_size was read are not part of this snapshot.
    let left = Math.min(total, LOG_READ_CAP);
    for (const c of chunks) {
      if (left <= 0) break;
      const stream = await this.d.blobs.get(c.blob_key);
      for await (const piece of stream as AsyncIterable<Buffer>) {
        const part = piece.length > left ? piece.subarray(0, left) : piece;
        left -= part.length;
        if (!res.write(part)) await new Promise((r) => res.once('drain', r));
        if (left <= 0) {
          stream.destroy();
          break;
        }
      }
    }
    res.end();
  }

  // ------------------------------------------------------------------ agent side

  /**
   * Claims the oldest pending pipeline (FOR UPDATE SKIP LOCKED), waiting up to `waitMs` for one.
   * When the agent has gone away meanwhile (`gone` aborted), a claimed pipeline is put back.
   */
  async poll(agent: { agentId: number; instance: string | undefined }, waitMs: number, gone?: AbortSignal) {
    const deadline = Date.now() + waitMs;
    const isGone = () => gone?.aborted === true;
    for (;;) {
      if (isGone()) return undefined;
      const job = await this.claim(agent);
      if (job !== undefined) {
        if (isGone()) {
          await this.release(job.pipeline_id);
          return undefined;
        }
        return job;
      }
      const left = deadline - Date.now();
      if (left <= 0) return undefined;
      await this.waker.wait(Math.min(left, 5000), gone);
    }
  }

  /** Undoes a claim whose poll response could not be delivered. */
  private async release(pipelineId: number): Promise<void> {
    await this.em()
      .fork()
      .transactional(async (tx) => {
        await tx.execute(
          `update pipelines set status = 'pending', agent_id = null, agent_instance = null, started_at = null
            where id = ? and status = 'running'`,
          [pipelineId],
        );
        await tx.execute('delete from api_tokens where pipeline_id = ?', [pipelineId]);
        await tx.execute(`select pg_notify('${NOTIFY_CHANNEL}', '')`);
      });
    this.d.log.info({ pipeline: pipelineId }, 'agent went away during its poll: pipeline back in the queue');
  }

  private async claim(agent: {
    agentId: number;
    instance: string | undefined;
  }): Promise<JobJson | undefined> {
    const em = this.em().fork();
    const claimed = await em.transactional(async (tx) => {
      const [p] = await tx.execute<{ id: number; trigger_by: number | null; repo_id: number }[]>(
        `update pipelines set status = 'running', agent_id = ?, agent_instance = ?, started_at = now()
          where id = (select id from pipelines where status = 'pending' order by id for update skip locked limit 1)
          returning id, trigger_by, repo_id`,
        [agent.agentId, agent.instance ?? 'default'],
      );
      if (p === undefined) return undefined;
      let cloneToken: string | null = null;
      if (p.trigger_by !== null) {
        cloneToken = newTokenValue();
        await tx.execute(
          `insert into api_tokens (user_id, name, token_hash, scopes, level, target_org_id, target_repo_id,
                                   expires_at, pipeline_id)
           select ?, ?, ?, ?::text[], 'repo', r.org_id, r.id, ?, ? from repos r where r.id = ?`,
          [
            p.trigger_by,
            `ci clone for pipeline ${p.id}`,
            hashToken(cloneToken),
            textArray(['repo:read']),
            new Date(Date.now() + CLONE_TOKEN_TTL_MS),
            p.id,
            p.repo_id,
          ],
        );
      }
      return { id: p.id, cloneToken };
    });
    if (claimed === undefined) return undefined;
    this.claimed.inc();
    const [p] = await em.execute<PipelineRow[]>(
      `select ${PIPELINE_COLUMNS} from ${PIPELINE_FROM} where p.id = ?`,
      [claimed.id],
    );
    const steps = await em.execute<StepRow[]>(
      'select * from pipeline_steps where pipeline_id = ? order by number',
      [claimed.id],
    );
    const repo = await this.d.repoInfo(p!.repo_id);
    return {
      pipeline_id: p!.id,
      number: p!.number,
      commit_node: p!.commit_node,
      branch: p!.branch,
      tag: p!.tag,
      event: p!.event,
      events: p!.events,
      clone_url: `${this.d.baseUrl()}/${repo.org}/${repo.name}`,
      clone_token: claimed.cloneToken,
      vcs: repo.vcs as VcsKind,
      org: repo.org,
      repo: repo.name,
      steps: steps.map((s) => ({
        id: s.id,
        number: s.number,
        name: s.name,
        image: s.image,
        commands: s.commands,
        environment: s.environment,
        status: s.status,
      })),
      ci_env: {
        CI: 'true',
        CI_PIPELINE_ID: String(p!.id),
        CI_PIPELINE_NUMBER: String(p!.number),
        CI_COMMIT: p!.commit_node,
        CI_BRANCH: p!.branch,
        CI_TAG: p!.tag,
        CI_EVENT: p!.event,
        CI_REPO: `${repo.org}/${repo.name}`,
      },
    };
  }

  /** Pipelines of this agent instance that were cancelled and not yet acknowledged. */
  async cancelledFor(agent: { agentId: number; instance: string | undefined }): Promise<number[]> {
    const rows = await this.em().execute<{ id: number }[]>(
      `select id from pipelines where agent_id = ? and agent_instance = ? and status = 'cancelled' and not agent_done`,
      [agent.agentId, agent.instance ?? 'default'],
    );
    return rows.map((r) => r.id);
  }

  private async agentStep(agentId: number, stepId: number) {
    const rows = Number.isSafeInteger(stepId)
      ? await this.em().execute<(StepRow & { pipeline_status: PipelineStatus })[]>(
          `select s.*, p.status as pipeline_status from pipeline_steps s join pipelines p on p.id = s.pipeline_id
            where s.id = ? and p.agent_id = ?`,
          [stepId, agentId],
        )
      : [];
    if (rows[0] === undefined) throw ApiError.notFound('step');
    return rows[0];
  }

  /** An agent reports a step. A cancelled pipeline keeps its cancelled steps; the answer says so. */
  async stepStatus(agentId: number, stepId: number, body: z.infer<typeof stepStatusBody>) {
    const s = await this.agentStep(agentId, stepId);
    if (s.pipeline_status === 'running' && s.status !== 'cancelled') {
      await this.em().execute(
        `update pipeline_steps set status = ?, exit_code = ?, started_at = coalesce(?, started_at,
           case when ? = 'running' then now() end), finished_at = coalesce(?, finished_at,
           case when ? in ('success', 'failure', 'skipped', 'cancelled') then now() end)
          where id = ?`,
        [
          body.status,
          body.exit_code ?? null,
          body.started_at ?? null,
          body.status,
          body.finished_at ?? null,
          body.status,
          stepId,
        ],
      );
    }
    const [after] = await this.em().execute<StepRow[]>('select * from pipeline_steps where id = ?', [stepId]);
    return { data: stepJson(after!), pipeline_status: s.pipeline_status };
  }

  async pipelineStatus(agentId: number, pipelineId: number, body: z.infer<typeof pipelineStatusBody>) {
    const final = FINAL.includes(body.status);
    const changed = await this.em().transactional(async (tx) => {
      const [p] = Number.isSafeInteger(pipelineId)
        ? await tx.execute<{ status: string }[]>(
            'select status from pipelines where id = ? and agent_id = ? for update',
            [pipelineId, agentId],
          )
        : [];
      if (p === undefined) throw ApiError.notFound('pipeline');
      if (FINAL.includes(p.status)) {
        // Already decided (cancelled by a user, or errored by the reaper): acknowledge only.
        await tx.execute('update pipelines set agent_done = true where id = ?', [pipelineId]);
        return false;
      }
      await tx.execute(
        `update pipelines set status = ?, error_message = coalesce(?, error_message),
           started_at = coalesce(?, started_at), agent_done = ?,
           finished_at = case when ? then coalesce(?, now()) else finished_at end
         where id = ?`,
        [
          body.status,
          body.error_message ?? null,
          body.started_at ?? null,
          final,
          final,
          body.finished_at ?? null,
          pipelineId,
        ],
      );
      if (final) await tx.execute('delete from api_tokens where pipeline_id = ?', [pipelineId]);
      return final;
    });
    if (changed) this.finished.inc({ status: body.status });
    return this.getById(pipelineId);
  }

  /**
   * Appends a chunk to a step log. With `offset`, a chunk (or the part of it) already stored is
   * acknowledged without being stored twice; a gap answers 409 with the size the server has.
   */
  async appendLog(agentId: number, stepId: number, offset: number | undefined, data: Buffer) {
    if (data.length > LOG_APPEND_LIMIT)
      throw ApiError.tooLarge(`a log chunk may be at most ${LOG_APPEND_LIMIT} bytes`);
    await this.agentStep(agentId, stepId);
    return this.em()
      .fork()
      .transactional(async (tx) => {
        const [s] = await tx.execute<{ log_size: string; pipeline_id: number }[]>(
          'select log_size, pipeline_id from pipeline_steps where id = ? for update',
          [stepId],
        );
        const size = Number(s!.log_size);
        const at = offset ?? size;
        if (at > size) {
          throw new ApiError(409, 'conflict', `log offset ${at} is past the stored size ${size}`, {
            'X-Svc-Log-Size': String(size),
          });
        }
        const fresh = data.subarray(size - at);
        if (fresh.length === 0) return { size, stored: 0 };
        const key = `logs/${s!.pipeline_id}/${stepId}/${String(size).padStart(14, '0')}`;
        await this.d.blobs.put(key, fresh);
        await tx.execute(
          'insert into step_log_chunks (step_id, "offset", size, blob_key) values (?, ?, ?, ?)',
          [stepId, size, fresh.length, key],
        );
        await tx.execute('update pipeline_steps set log_size = log_size + ? where id = ?', [
          fresh.length,
          stepId,
        ]);
        return { size: size + fresh.length, stored: fresh.length };
      });
  }

  async queue(liveAgents: number) {
    const [r] = await this.em().execute<{ pending: string; running: string }[]>(
      `select count(*) filter (where status = 'pending') as pending,
              count(*) filter (where status = 'running') as running from pipelines
        where status in ('pending', 'running')`,
    );
    return { pending: Number(r?.pending ?? 0), running: Number(r?.running ?? 0), agents: liveAgents };
  }

  /**
   * A running pipeline whose agent instance has not been seen for the agent timeout becomes
   * `error` naming the agent; its running steps fail and its pending steps are skipped.
   */
  async reapStale(): Promise<number[]> {
    const timeout = this.d.agentTimeoutMs;
    const ids = await this.em()
      .fork()
      .transactional(async (tx) => {
        const rows = await tx.execute<{ id: number }[]>(
          `update pipelines p set status = 'error', finished_at = now(), agent_done = true,
             error_message = format('agent %s (instance %s) missed heartbeats for %s s',
               coalesce(a.name, 'deleted agent'), p.agent_instance, ? / 1000)
            from pipelines q left join agents a on a.id = q.agent_id
            left join agent_instances i on i.agent_id = q.agent_id and i.instance = q.agent_instance
           where p.id = q.id and q.status = 'running' and p.status = 'running'
             and greatest(i.last_seen_at, q.started_at) < now() - (? * interval '1 millisecond')
          returning p.id`,
          [timeout, timeout],
        );
        const list = rows.map((r) => r.id);
        if (list.length > 0) {
          await tx.execute(
            `update pipeline_steps set status = case when status = 'running' then 'failure' else 'skipped' end,
               finished_at = now() where pipeline_id in (${list.map(() => '?').join(',')})
               and status in ('pending', 'running')`,
            list,
          );
          await tx.execute(
            `delete from api_tokens where pipeline_id in (${list.map(() => '?').join(',')})`,
            list,
          );
        }
        return list;
      });
    if (ids.length > 0) this.finished.inc({ status: 'error' }, ids.length);
    if (ids.length > 0) this.d.log.warn({ pipelines: ids }, 'pipelines errored: agent missed heartbeats');
    return ids;
  }
}
