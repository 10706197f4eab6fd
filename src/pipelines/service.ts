import type { Response } from 'express';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { z } from 'zod';
import type { Logger } from 'pino';
import { ApiError } from '../http/errors.ts';
import { offsetOf } from '../http/pagination.ts';
import type { BlobStore } from '../storage/index.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import { textArray } from '../db/sql.ts';
import { PIPELINE_FILE, parsePipelineFile, whenMatches } from './pipeline-file.ts';
import {
  LOG_READ_CAP,
  NOTIFY_CHANNEL,
  NUMBER_LOCK,
  PIPELINE_COLUMNS,
  PIPELINE_FROM,
  pipelineJson,
  type listQuery,
  type PipelineJson,
  type PipelineRow,
  type RepoInfo,
  type StepRow,
  type Trigger,
} from './model.ts';
import { QueueWaker } from './queue-waker.ts';
import { AgentProtocol } from './agent-protocol.ts';

export {
  LOG_APPEND_LIMIT,
  LOG_READ_CAP,
  PIPELINE_STATUSES,
  STEP_STATUSES,
  heartbeatBody,
  listQuery,
  pipelineStatusBody,
  stepStatusBody,
  type AgentCaller,
  type PipelineJson,
  type PipelineStatus,
  type RepoInfo,
  type Trigger,
} from './model.ts';

export type PipelinesDeps = {
  em: () => EntityManager;
  blobs: BlobStore;
  log: Logger;
  metrics: Metrics;
  databaseUrl: string;
  agentTimeoutMs: number;
  /** Longest a step may run (TRIAD_STEP_TIMEOUT); a pipeline file's `timeout` may only be shorter. */
  stepTimeoutSeconds: number;
  /** Most bytes a step log may hold (TRIAD_STEP_LOG_MAX_BYTES). */
  logMaxBytes: number;
  baseUrl: () => string;
  /** The repository's file at a commit (undefined when absent). */
  readFile: (repoId: number, rev: string, path: string) => Promise<string | undefined>;
  repoInfo: (repoId: number) => Promise<RepoInfo>;
};

/** Pipelines: triggers from pushes, the user side, and (in `agentSide`) the agent protocol. */
export class PipelinesService {
  private readonly d: PipelinesDeps;
  private readonly waker: QueueWaker;
  private readonly finished;
  private reaper: NodeJS.Timeout | undefined;
  readonly agentSide: AgentProtocol;

  constructor(deps: PipelinesDeps) {
    this.d = deps;
    this.waker = new QueueWaker(deps.databaseUrl, deps.log);
    deps.metrics.gauge('triad_ci_pipelines_pending', 'Pipelines waiting for an agent', () =>
      this.count('pending'),
    );
    deps.metrics.gauge('triad_ci_pipelines_running', 'Pipelines claimed by an agent', () =>
      this.count('running'),
    );
    const claimed = deps.metrics.counter(
      'triad_ci_pipelines_claimed_total',
      'Pipelines claimed by agents',
      [],
    );
    const finished = deps.metrics.counter(
      'triad_ci_pipelines_finished_total',
      'Pipelines finished, by status',
      ['status'],
    );
    this.finished = finished;
    this.agentSide = new AgentProtocol({
      em: deps.em,
      blobs: deps.blobs,
      log: deps.log,
      waker: this.waker,
      agentTimeoutMs: deps.agentTimeoutMs,
      stepTimeoutSeconds: deps.stepTimeoutSeconds,
      logMaxBytes: deps.logMaxBytes,
      baseUrl: deps.baseUrl,
      repoInfo: deps.repoInfo,
      onClaimed: () => claimed.inc(),
      onFinished: (status, n = 1) => finished.inc({ status }, n),
    });
  }

  async start(): Promise<void> {
    await this.waker.start();
    const every = Math.max(250, Math.min(5000, Math.floor(this.d.agentTimeoutMs / 4)));
    this.reaper = setInterval(() => {
      this.agentSide.reapStale().catch((err: unknown) => this.d.log.warn({ err }, 'pipeline reaper failed'));
    }, every);
    this.reaper.unref();
  }

  /** Stops the reaper; long polls in flight answer 204 at once and new ones do not wait. */
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
      const active = await tx.execute<
        { id: number; events: string[]; tag: string; branch: string; status: string }[]
      >(
        `select id, events, tag, branch, status from pipelines
          where repo_id = ? and commit_node = ? and status in ('pending', 'running')
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
        if (existing.status === 'pending' && events.length > existing.events.length) {
          await this.reevaluateSteps(tx, repoId, existing.id, t.commit, events, existing.branch || t.branch);
        }
        continue;
      }
      const id = await this.create(tx, repoId, t.commit, t.events, t.branch, t.tag, t.senderId);
      if (id !== undefined) created.push(id);
    }
    return created;
  }

  /**
   * A new event joined a pipeline no agent has claimed yet: steps created `skipped` because their
   * `when` did not match become pending when it matches now (e.g. a step for tags, when the tag
   * arrives after the push).
   */
  private async reevaluateSteps(
    tx: EntityManager,
    repoId: number,
    pipelineId: number,
    commit: string,
    events: string[],
    branch: string,
  ): Promise<void> {
    const text = await this.d.readFile(repoId, commit, PIPELINE_FILE);
    const parsed = text === undefined ? undefined : parsePipelineFile(text);
    if (parsed?.ok !== true) return;
    for (const [i, s] of parsed.file.steps.entries()) {
      if (s.when === undefined || !whenMatches(s.when, events, branch)) continue;
      await tx.execute(
        `update pipeline_steps set status = 'pending' where pipeline_id = ? and number = ? and status = 'skipped'`,
        [pipelineId, i + 1],
      );
    }
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
        `insert into pipeline_steps (pipeline_id, number, name, image, commands, environment, status,
                                     timeout_seconds)
         values (?, ?, ?, ?, ?::text[], ?, ?, ?)`,
        [
          pipelineId,
          i + 1,
          s.name,
          s.image,
          textArray(s.commands),
          JSON.stringify(s.environment ?? {}),
          runnable.includes(s) ? 'pending' : 'skipped',
          s.timeout ?? null,
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

  /**
   * Streams a step's log as text (capped at 16 MiB). X-Svc-Log-Truncated says when it is not the
   * whole output: the read cap, or the step log limit (the agent or the server cut it).
   */
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
    const truncated = total > LOG_READ_CAP || step.log_truncated;
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
}
