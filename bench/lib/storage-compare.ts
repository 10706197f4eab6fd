/**
 * Part 2 of bench/storage-nodes.ts for one kind: one small clone URL request, full clones and
 * five-commit pushes on the in-process server (`a`) and through the node (`b`), with what the node
 * served during `b`'s steps.
 */
import path from 'node:path';
import type { VcsKind } from '../../src/vcs/index.ts';
import type { RequestRow, TransportRow } from './storage-record.ts';
import { measure } from './storage-reads.ts';
import type { NodeCounts } from './storage-setup.ts';
import {
  cloneOnce,
  getter,
  median,
  pusher,
  sideBySide,
  type Target,
  type Timing,
} from './storage-transport.ts';

export async function compareTransport(o: {
  vcs: VcsKind;
  a: Target;
  b: Target;
  /** The generated repository (the pushes' working copy is made from it). */
  from: string;
  work: string;
  cloneRuns: number;
  pushRuns: number;
  commits: number;
  /** The node's requests so far, of one route or of all. */
  counter: (route?: string) => () => Promise<NodeCounts>;
}): Promise<{ request: RequestRow | undefined; rows: TransportRow[] }> {
  const { vcs, a, b } = o;
  const request = vcs === 'fossil' ? undefined : await smallRequest(o);
  // what the node served during b's steps
  const counted = (step: (t: Target) => Promise<Timing>) => {
    const seen = { count: 0, seconds: 0, backend: 0, steps: 0 };
    const count = o.counter();
    const wrapped = async (t: Target) => {
      if (t !== b) return step(t);
      const before = await count();
      const r = await step(t);
      const after = await count();
      seen.count += after.count - before.count;
      seen.seconds += after.seconds - before.seconds;
      seen.backend += after.backend - before.backend;
      seen.steps += 1;
      return r;
    };
    const node = () => ({
      nodeRequests: seen.count / seen.steps,
      backendRequests: seen.backend / seen.steps,
      nodeSeconds: seen.seconds / seen.steps,
    });
    return { wrapped, node };
  };
  const summary = (t: { a: Timing[]; b: Timing[] }) => ({
    local: median(t.a.map((x) => x.s)),
    node: median(t.b.map((x) => x.s)),
    localCpu: median(t.a.map((x) => x.cpu)),
    nodeCpu: median(t.b.map((x) => x.cpu)),
  });
  const c = counted((t) => cloneOnce(vcs, t, o.work));
  const clones = await sideBySide({ runs: o.cloneRuns, a, b, step: c.wrapped });
  const p = await pusher(vcs, o.from, path.join(o.work, `push-${vcs}`));
  const q = counted(p.push);
  const pushes = await sideBySide({
    runs: o.pushRuns,
    a,
    b,
    step: q.wrapped,
    before: (round) => p.fiveCommits(`t${round}`),
  });
  const rows: TransportRow[] = [
    { vcs, step: `clone of ${o.commits} commits`, runs: o.cloneRuns, ...summary(clones), ...c.node() },
    { vcs, step: 'push of five small commits', runs: o.pushRuns, ...summary(pushes), ...q.node() },
  ];
  return { request, rows };
}

/**
 * One small clone URL request (git's ref advertisement, Mercurial's capabilities), 100 times on
 * each server after 20 warm-up requests; this also starts what the kind keeps running (Mercurial's
 * hgweb worker) before the clones are timed. (A Fossil request needs a sync body: none.)
 */
async function smallRequest(o: {
  vcs: VcsKind;
  a: Target;
  b: Target;
  counter: (route?: string) => () => Promise<NodeCounts>;
}): Promise<RequestRow> {
  const probe = o.vcs === 'git' ? '/info/refs?service=git-upload-pack' : '?cmd=capabilities';
  const url = (t: Target) => `${t.base}/${t.org}/${t.name}${probe}`;
  const g = getter();
  try {
    const local = await measure(() => g.get(url(o.a)), 100, 20);
    for (let i = 0; i < 20; i++) await g.get(url(o.b));
    const count = o.counter('backend');
    const before = await count();
    const node = await measure(() => g.get(url(o.b)), 100, 0);
    const after = await count();
    const nodeMs = ((after.seconds - before.seconds) * 1000) / (after.count - before.count);
    return { vcs: o.vcs, request: `GET ${probe}`, local, node, nodeMs };
  } finally {
    g.close();
  }
}
