/**
 * Mercurial operations through one persistent `hg serve --cmdserver pipe` per repository with the
 * `triadops` extension (triadops.py next to this file). Each operation is one command-server
 * request (JSON in, one JSON line out): no Python start-up per call, and merges happen in memory
 * (no working directory, nothing to clean up). Processes are kept per repository in the server's
 * pool (at most 16, least recently used first out, idle ones closed after a minute).
 */
import {
  cleanAuthor,
  defaultMergeMessage,
  InvalidRefName,
  plausibleRefName,
  RefNotFound,
  type DeleteOutcome,
  type MergeCheck,
  type MergeInput,
  type MergeOutcome,
  type TagInput,
  type TagOutcome,
  type VcsOps,
} from '../ops.ts';
import type { PoolGroup, Pooled, ProcessPool } from '../process/pool.ts';
import { ProcessDied, type PersistentProcess } from '../process/process.ts';
import { VcsTimeout } from '../process/run.ts';
import { frame, resultParser, startServer } from './cmdserver.ts';

/** The operations' command servers; each request reloads the repository (a change needs no invalidation). */
const OPS: PoolGroup = { name: 'hg-ops', max: 16, idleMs: 60_000, survivesChange: true };

type Answer = Record<string, unknown> & { kind?: string; message?: string };

/** A command server with `triadops`; `ready` once its hello named the extension. */
type Server = Pooled & { proc: PersistentProcess; ready: Promise<void> };

function start(dir: string): Server {
  const { proc, hello: greeting } = startServer(dir, 'triadops');
  const ready = greeting.then((hello) => {
    if (!/^capabilities:.*\btriadops\b/m.test(hello)) {
      proc.kill();
      throw new Error(`hg command server without the triadops extension: ${proc.takeStderr().trim()}`);
    }
  });
  ready.catch(() => undefined);
  return {
    proc,
    ready,
    busy: () => proc.busy(),
    close: () => proc.close(),
    get dead() {
      return proc.dead;
    },
  };
}

export class HgOps implements VcsOps {
  readonly kind = 'hg' as const;
  private readonly timeoutMs: number;
  private readonly pool: ProcessPool;

  constructor(opts: { timeoutMs: number; pool: ProcessPool }) {
    this.timeoutMs = opts.timeoutMs;
    this.pool = opts.pool;
  }

  /** Number of live command servers (for tests and metrics). */
  size(): number {
    return this.pool.size(OPS);
  }

  /** One `triadops` request with the time limit; the server is killed when it runs over. */
  private async once(dir: string, req: Record<string, unknown>): Promise<Answer> {
    const slot = this.pool.get(OPS, dir, () => start(dir));
    const request = frame('triadops', Buffer.from(JSON.stringify(req), 'utf8'));
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        slot.proc.kill();
        this.pool.drop(OPS, dir, slot);
        reject(new VcsTimeout(`hg ${String(req.op)}: timed out after ${this.timeoutMs} ms`, null, ''));
      }, this.timeoutMs);
    });
    try {
      const { result: out } = await Promise.race([
        slot.ready.then(() => slot.proc.request(request, resultParser)),
        timeout,
      ]);
      const nl = out.indexOf(10);
      return JSON.parse(out.toString('utf8', 0, nl < 0 ? out.length : nl)) as Answer;
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Runs one operation; a read is retried once on a fresh server when the server died under it
   * (a mutation is not: it may have been applied).
   */
  private async call(dir: string, req: Record<string, unknown>, mutates = false): Promise<Answer> {
    let answer: Answer;
    try {
      answer = await this.once(dir, req);
    } catch (e) {
      if (mutates || !(e instanceof ProcessDied)) throw e;
      answer = await this.once(dir, req);
    }
    if (answer.kind === 'error') throw new Error(`hg ${String(req.op)}: ${answer.message ?? 'failed'}`);
    if (answer.kind === 'ref_not_found') {
      const role = answer.role === 'source' ? 'source' : 'target';
      throw new RefNotFound(role, String(req[role]));
    }
    return answer;
  }

  async resolveRef(dir: string, name: string): Promise<string | undefined> {
    if (!plausibleRefName(name)) return undefined;
    const a = await this.call(dir, { op: 'resolve', name });
    return typeof a.id === 'string' ? a.id : undefined;
  }

  async resolveRefs(dir: string, names: readonly string[]): Promise<(string | undefined)[]> {
    // one warm command server: a request each costs about what one batched request would
    const out: (string | undefined)[] = [];
    for (const n of names) out.push(await this.resolveRef(dir, n));
    return out;
  }

  async resolveCommit(dir: string, rev: string): Promise<string | undefined> {
    if (!plausibleRefName(rev)) return undefined;
    const a = await this.call(dir, { op: 'commit', rev });
    return typeof a.id === 'string' ? a.id : undefined;
  }

  async checkMerge(dir: string, source: string, target: string): Promise<MergeCheck> {
    if (!plausibleRefName(source)) throw new RefNotFound('source', source);
    if (!plausibleRefName(target)) throw new RefNotFound('target', target);
    return (await this.call(dir, { op: 'check', source, target })) as unknown as MergeCheck;
  }

  async merge(dir: string, input: MergeInput): Promise<MergeOutcome> {
    if (!plausibleRefName(input.source)) throw new RefNotFound('source', input.source);
    if (!plausibleRefName(input.target)) throw new RefNotFound('target', input.target);
    const req = {
      op: 'merge',
      source: input.source,
      target: input.target,
      style: input.style,
      message: input.message?.trim() || defaultMergeMessage(input.source, input.target, input.style),
      author: cleanAuthor(input.author),
      expectedHead: input.expectedHead?.toLowerCase(),
      expectedTargetHead: input.expectedTargetHead?.toLowerCase(),
    };
    return (await this.call(dir, req, true)) as unknown as MergeOutcome;
  }

  async deleteRef(dir: string, name: string, expectedHead?: string): Promise<DeleteOutcome> {
    if (!plausibleRefName(name)) return 'not_found';
    const a = await this.call(dir, { op: 'delete', name, expectedHead: expectedHead?.toLowerCase() }, true);
    return a.kind as DeleteOutcome;
  }

  async createTag(dir: string, input: TagInput): Promise<TagOutcome> {
    if (!plausibleRefName(input.name)) throw new InvalidRefName(`invalid tag name: ${input.name}`);
    if (!plausibleRefName(input.target)) return { kind: 'not_found' };
    const a = await this.call(
      dir,
      {
        op: 'tag',
        name: input.name,
        target: input.target,
        message: input.message?.trim() || undefined,
        author: cleanAuthor(input.author),
      },
      true,
    );
    if (a.kind === 'invalid_name') throw new InvalidRefName(a.message ?? `invalid tag name: ${input.name}`);
    return a as unknown as TagOutcome;
  }

  async isAncestor(dir: string, ancestor: string, descendant: string): Promise<boolean> {
    if (!/^[0-9a-f]{40}$/i.test(ancestor) || !/^[0-9a-f]{40}$/i.test(descendant)) return false;
    const a = await this.call(dir, {
      op: 'isancestor',
      ancestor: ancestor.toLowerCase(),
      descendant: descendant.toLowerCase(),
    });
    return a.result === true;
  }
}
