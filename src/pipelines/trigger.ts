import type { Db } from '../db/query.ts';
import { filesAt, type RepoHandle } from '../domain/repo.ts';
import type { ChangeContext } from '../repos/changes.ts';
import type { CappedFile } from '../vcs/driver.ts';
import { formatBytes } from '../../agent/executors/disk-watch.ts';
import { PIPELINE_FILE, parsePipelineFile, whenMatches, type ParseResult } from './pipeline-file.ts';
import {
  DEFAULT_PIPELINE_LIMITS,
  type PipelineLimits,
  type PipelineStatusHook,
  type Trigger,
} from './model.ts';
import * as db from './repository.ts';

export type TriggerDeps = { limits?: PipelineLimits; onStatus?: PipelineStatusHook };

/** A run to create: a commit with the events that name it. */
export type Run = {
  commit: string;
  events: string[];
  branch: string;
  tag: string;
  senderId: number | null;
};

/**
 * Pipelines from pushes: each commit with a pipeline file whose `when` matches becomes a pipeline
 * (or joins the pending or running one of that commit), in the transaction of the push. It is the
 * `ci` listener of `RepoChanges`.
 */
export class PipelineTrigger {
  readonly phase = 'ci';
  private readonly limits: PipelineLimits;
  private readonly onStatus: PipelineStatusHook | undefined;

  constructor(deps: TriggerDeps) {
    this.limits = deps.limits ?? DEFAULT_PIPELINE_LIMITS;
    this.onStatus = deps.onStatus;
  }

  /** Pipelines for the refs a change moved, with the triggers the `pulls` phase added. */
  async onMoves(ctx: ChangeContext): Promise<void> {
    const own = ctx.moves.map((m): Trigger =>
      m.type === 'tag'
        ? { commit: m.target, event: 'tag', branch: '', tag: m.name, senderId: ctx.senderId }
        : { commit: m.head, event: 'push', branch: m.name, tag: '', senderId: ctx.senderId },
    );
    await this.trigger(ctx.tx, ctx.repo, [...own, ...ctx.triggers]);
  }

  /** The pipeline file at each commit: content, undefined when absent, `{ tooLarge }` beyond the limit. */
  private read(repo: RepoHandle, revs: readonly string[]): Promise<Map<string, CappedFile | undefined>> {
    return filesAt(repo, revs, PIPELINE_FILE, this.limits.fileMaxBytes);
  }

  /** The pipeline file parsed within the limits: too large, or too many steps, is an error. */
  private parse(file: CappedFile): ParseResult {
    if (typeof file !== 'string') {
      return {
        ok: false,
        error: `${PIPELINE_FILE} is ${formatBytes(file.tooLarge)}, more than the limit of ${formatBytes(this.limits.fileMaxBytes)}: it was not read`,
      };
    }
    return parsePipelineFile(file, { maxSteps: this.limits.maxSteps });
  }

  /**
   * Creates pipelines for a batch of triggers in the caller's transaction. Triggers naming the
   * same commit become one pipeline whose `events` lists each event; a commit that already has
   * a pending or running pipeline gets the new events added to it instead of a second run.
   */
  async trigger(tx: Db, repo: RepoHandle, triggers: readonly Trigger[]): Promise<number[]> {
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
    if (byCommit.size === 0) return [];
    // the pipeline file of every commit at once (a push of many tags reads it in one run)
    const files = await this.read(repo, [...byCommit.keys()]);
    const created: number[] = [];
    for (const t of byCommit.values()) {
      const text = files.get(t.commit);
      const existing = await db.activeForCommit(tx, repo.id, t.commit);
      if (existing !== undefined) {
        const events = [
          ...existing.events,
          ...t.events.filter((e) => !(existing.events as string[]).includes(e)),
        ];
        await db.setEvents(tx, existing.id, events, existing.tag === '' ? t.tag : existing.tag);
        if (existing.status === 'pending' && events.length > existing.events.length) {
          await this.reevaluateSteps(tx, existing.id, text, events, existing.branch || t.branch);
        }
        continue;
      }
      const id = await this.createFrom(tx, repo, t, text);
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
    tx: Db,
    pipelineId: number,
    text: CappedFile | undefined,
    events: string[],
    branch: string,
  ): Promise<void> {
    const parsed = text === undefined ? undefined : this.parse(text);
    if (parsed?.ok !== true) return;
    for (const [i, s] of parsed.file.steps.entries()) {
      if (s.when === undefined || !whenMatches(s.when, events, branch)) continue;
      await db.unskipStep(tx, pipelineId, i + 1);
    }
  }

  /**
   * A pipeline for the commit, when it has a pipeline file whose `when` matches: `pending` with
   * its matching steps (the others `skipped`), `success` when no step matches, or `error` when
   * the file does not parse. Returns its id (undefined: no pipeline).
   */
  async create(tx: Db, repo: RepoHandle, run: Run): Promise<number | undefined> {
    const files = await this.read(repo, [run.commit]);
    const text = files.get(run.commit);
    if (text === undefined) return undefined;
    return this.createFrom(tx, repo, run, text);
  }

  /** `create` with the commit's pipeline file already read (`text`, undefined: none). */
  private async createFrom(
    tx: Db,
    repo: Pick<RepoHandle, 'id' | 'orgId'>,
    run: Run,
    text: CappedFile | undefined,
  ): Promise<number | undefined> {
    if (text === undefined) return undefined;
    const parsed = this.parse(text);
    if (parsed.ok && !whenMatches(parsed.file.when, run.events, run.branch)) return undefined;
    const steps = parsed.ok ? parsed.file.steps : [];
    const runnable = steps.filter((s) => whenMatches(s.when, run.events, run.branch));
    const status = !parsed.ok ? 'error' : runnable.length === 0 ? 'success' : 'pending';
    const id = await db.insertPipeline(tx, {
      repoId: repo.id,
      orgId: repo.orgId,
      commit: run.commit,
      branch: run.branch,
      tag: run.tag,
      events: run.events,
      status,
      triggerBy: run.senderId,
      labels: parsed.ok ? (parsed.file.labels ?? {}) : {},
      errorMessage: parsed.ok ? null : parsed.error,
      steps: steps.map((s) => ({
        name: s.name,
        image: s.image,
        commands: s.commands,
        environment: s.environment ?? {},
        status: runnable.includes(s) ? 'pending' : 'skipped',
        timeoutSeconds: s.timeout ?? null,
        resources: s.resources,
      })),
    });
    if (status === 'pending') await db.notifyQueued(tx);
    await this.onStatus?.(tx, [id]);
    return id;
  }
}
