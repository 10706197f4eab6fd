import { spawn } from 'node:child_process';
import net from 'node:net';
import { describe, expect, test } from '@jest/globals';
import pg from 'pg';
import { Agent } from '../../agent/agent.ts';
import { LocalExecutor } from '../../agent/executors/local.ts';
import { startTestServer, type TestServer, type TestUser } from '../helpers/server.ts';
import { withOrgServer } from '../helpers/factories.ts';
import { agentLogCapture, commitFiles, gitRepo, newAgent, type GitRepo } from '../helpers/ci.ts';
import { processesWith } from '../helpers/serve.ts';
import { sleep, waitUntil } from '../helpers/wait.ts';

let s: TestServer;
let owner: TestUser;
let org: string;
// compaction off: a test below reads the chunk rows the agent's log shipping made
withOrgServer({ TRIAD_LOG_COMPACTION_INTERVAL: '0' }, (w) => ({ s, owner, org } = w));

/** The agents' log lines (debug and up) since the last `startAgent`: printed when a test fails. */
const agentLog = agentLogCapture();
const quiet = agentLog.log;
const showingAgentLog = agentLog.showing;

async function agentToken(): Promise<string> {
  const r = await s.admin.post('/api/v1/admin/agents', { name: 'test-agent' });
  return r.body.data.token;
}

function startAgent(
  token: string,
  server = s.url,
  extra: Partial<ConstructorParameters<typeof Agent>[0]> = {},
) {
  agentLog.reset();
  const agent = new Agent({
    server,
    token,
    instance: 'jest',
    capacity: 2,
    executor: new LocalExecutor(),
    log: quiet,
    pollWait: 1,
    cancelCheckMs: 500,
    // a failing test stops quickly and reports its own error, not the test's time limit
    drainMs: 5_000,
    ...extra,
  });
  return agent;
}

function pipelineFile(steps: { name: string; commands: string[]; timeout?: string }[]): string {
  return `steps:\n${steps
    .map(
      (st) =>
        `  - name: ${st.name}\n    image: alpine\n    commands: ${JSON.stringify(st.commands)}\n${
          st.timeout === undefined ? '' : `    timeout: ${st.timeout}\n`
        }`,
    )
    .join('')}`;
}

async function pipelineWith(
  steps: { name: string; commands: string[]; timeout?: string }[],
): Promise<GitRepo> {
  const repo = await gitRepo(s, owner, org);
  await commitFiles(repo, { '.pipeline.yml': pipelineFile(steps) });
  await repo.push();
  return repo;
}

async function waitFor(repo: GitRepo, pred: (p: any) => boolean, ms = 30_000): Promise<any> {
  const until = Date.now() + ms;
  for (;;) {
    const p = (await owner.client.get(`/api/v1/repos/${org}/${repo.name}/pipelines/1`)).body;
    if (pred(p) || Date.now() > until) return p;
    await new Promise((r) => setTimeout(r, 150));
  }
}
const finished = (p: any) => ['success', 'failure', 'cancelled', 'error'].includes(p.status);

async function stepLog(repo: GitRepo, step: number): Promise<string> {
  return (await owner.client.get(`/api/v1/repos/${org}/${repo.name}/pipelines/1/steps/${step}/log`)).text;
}

/** Only one agent may poll this server's queue at a time in these tests. */
describe('the agent with the local executor', () => {
  test('when a pipeline has `echo hello` and `exit 3`, then it ends failure with the right statuses and log', async () => {
    const agent = startAgent(await agentToken());
    await agent.start();
    try {
      const repo = await pipelineWith([
        { name: 'greet', commands: ['echo hello'] },
        { name: 'fail', commands: ['exit 3'] },
        { name: 'never', commands: ['echo unreachable'] },
      ]);
      const p = await waitFor(repo, finished);
      expect(p.status).toBe('failure');
      expect(p.steps.map((x: any) => [x.name, x.status, x.exit_code])).toEqual([
        ['greet', 'success', 0],
        ['fail', 'failure', 3],
        ['never', 'skipped', null],
      ]);
      expect(p.steps[0].started_at).not.toBeNull();
      expect(p.steps[0].finished_at).not.toBeNull();
      expect(await stepLog(repo, 1)).toBe('hello\n');
    } finally {
      await agent.stop();
    }
  });

  test('steps see the repository at the commit and the CI environment', async () => {
    const agent = startAgent(await agentToken());
    await agent.start();
    try {
      const repo = await gitRepo(s, owner, org, true);
      const sha = await commitFiles(repo, {
        'data.txt': 'from the repo\n',
        '.pipeline.yml': `steps:\n  - name: env\n    image: alpine\n    environment: {GREETING: hi}\n    commands: ["cat data.txt", "echo $GREETING $CI $CI_COMMIT $CI_BRANCH $CI_REPO"]\n`,
      });
      await repo.push();
      const p = await waitFor(repo, finished);
      expect(p.status).toBe('success');
      expect(await stepLog(repo, 1)).toBe(`from the repo\nhi true ${sha} main ${org}/${repo.name}\n`);
    } finally {
      await agent.stop();
    }
  });

  test('when a step writes 5 MB, then every byte arrives in order in chunks of at most 1 MiB', async () => {
    const agent = startAgent(await agentToken());
    await agent.start();
    try {
      const repo = await pipelineWith([{ name: 'loud', commands: ['seq 1 800000'] }]);
      const p = await waitFor(repo, finished, 60_000);
      expect(p.status).toBe('success');
      const expected = Array.from({ length: 800000 }, (_, i) => `${i + 1}\n`).join('');
      expect(expected.length).toBeGreaterThan(5_000_000);
      const log = await stepLog(repo, 1);
      expect(log.length).toBe(expected.length);
      expect(log === expected).toBe(true);
      const c = new pg.Client({ connectionString: s.dbUrl });
      await c.connect();
      const rows = await c.query<{ offset: string; size: number; last: string }>(
        `select "offset", size from step_log_chunks where step_id = $1 order by "offset"`,
        [p.steps[0].id],
      );
      await c.end();
      let at = 0;
      for (const r of rows.rows) {
        expect(Number(r.offset)).toBe(at);
        expect(r.size).toBeLessThanOrEqual(1024 * 1024);
        at += r.size;
        // cut at line boundaries: every chunk ends with a newline
        expect(expected[at - 1]).toBe('\n');
      }
      expect(at).toBe(expected.length);
      expect(rows.rows.length).toBeGreaterThanOrEqual(5);
    } finally {
      await agent.stop();
    }
  });

  test('when the pipeline is cancelled mid-step, then the agent stops it', async () => {
    const agent = startAgent(await agentToken());
    await agent.start();
    await showingAgentLog(async () => {
      try {
        const repo = await pipelineWith([
          // far past this test's time limit: only the cancel ends it
          { name: 'slow', commands: ['echo started', 'sleep 600', 'echo not reached'] },
          { name: 'after', commands: ['echo no'] },
        ]);
        await waitUntil('the step to run', async () => (await stepLog(repo, 1)) === 'started\n', 20_000);
        const c = await owner.client.post(`/api/v1/repos/${org}/${repo.name}/pipelines/1/cancel`);
        expect(c.status).toBe(200);
        await waitUntil('the agent to stop the step', () => agent.runningCount === 0, 20_000);
        const p = await waitFor(repo, finished);
        expect(p.status).toBe('cancelled');
        expect(p.steps.map((x: any) => x.status)).toEqual(['cancelled', 'cancelled']);
        expect(await stepLog(repo, 1)).toBe('started\n');
      } finally {
        await agent.stop();
      }
    });
  });
  test('when a step leaves a background process behind, then it ends with the step', async () => {
    const agent = startAgent(await agentToken());
    await agent.start();
    const marker = `9${Date.now() % 100000}.${process.pid}`;
    try {
      const repo = await pipelineWith([
        { name: 'bg', commands: [`sleep ${marker} &`, 'echo left it running'] },
      ]);
      const p = await waitFor(repo, finished, 20_000);
      expect(p.status).toBe('success');
      expect(await stepLog(repo, 1)).toBe('left it running\n');
      expect(await processesWith(marker)).toEqual([]);
    } finally {
      await agent.stop();
    }
  });

  test('when a step runs past its `timeout`, then it is stopped, fails, and the log says so', async () => {
    const agent = startAgent(await agentToken());
    await agent.start();
    try {
      const repo = await pipelineWith([
        // far past this test's time limit: only the step's timeout ends it
        { name: 'slow', commands: ['echo begin', 'sleep 600'], timeout: '2s' },
        { name: 'after', commands: ['echo never'] },
      ]);
      const p = await waitFor(repo, finished, 30_000);
      expect(p.status).toBe('failure');
      expect(p.steps.map((x: any) => x.status)).toEqual(['failure', 'skipped']);
      expect(await stepLog(repo, 1)).toBe('begin\n\n[triad] step timed out after 2 s: stopped\n');
    } finally {
      await agent.stop();
    }
  });
});

describe('step log limit (TRIAD_STEP_LOG_MAX_BYTES)', () => {
  test('when a step prints more than the limit, then its log keeps the head and the tail, says what was cut, and reads as truncated', async () => {
    const small = await startTestServer({ TRIAD_STEP_LOG_MAX_BYTES: '65536' });
    const u = await small.newUser();
    const o = await small.newOrg(u);
    const r = await small.admin.post('/api/v1/admin/agents', { name: 'limited' });
    const agent = startAgent(r.body.data.token, small.url);
    await agent.start();
    try {
      const repo = await gitRepo(small, u, o);
      await commitFiles(repo, {
        '.pipeline.yml': pipelineFile([
          { name: 'loud', commands: ['seq 1 100000'] },
          { name: 'quiet', commands: ['echo ok'] },
        ]),
      });
      await repo.push();
      let p: any;
      for (let i = 0; i < 150 && !finished(p ?? {}); i++) {
        await new Promise((res) => setTimeout(res, 200));
        p = (await u.client.get(`/api/v1/repos/${o}/${repo.name}/pipelines/1`)).body;
      }
      expect(p.status).toBe('success');
      const log = await u.client.get(`/api/v1/repos/${o}/${repo.name}/pipelines/1/steps/1/log`);
      const full = Array.from({ length: 100000 }, (_, i) => `${i + 1}\n`).join('');
      expect(log.headers.get('x-svc-log-truncated')).toBe('true');
      expect(log.text.length).toBeLessThanOrEqual(65536);
      expect(log.text.length).toBeGreaterThan(60000);
      const m = /\n\[triad\] log truncated: (\d+) bytes omitted here \(step log limit 65536 bytes\)\n/.exec(
        log.text,
      );
      expect(m).not.toBeNull();
      const [head, tail] = [log.text.slice(0, m!.index), log.text.slice(m!.index + m![0].length)];
      expect(full.startsWith(head)).toBe(true);
      expect(full.endsWith(tail)).toBe(true);
      expect(tail.endsWith('99999\n100000\n')).toBe(true);
      expect(head.length + Number(m![1]) + tail.length).toBe(full.length);
      // a log under the limit is whole and not flagged
      const quiet = await u.client.get(`/api/v1/repos/${o}/${repo.name}/pipelines/1/steps/2/log`);
      expect([quiet.text, quiet.headers.get('x-svc-log-truncated')]).toEqual(['ok\n', null]);
    } finally {
      await agent.stop();
      await small.close();
    }
  });
});

/**
 * A TCP proxy in front of the server that can refuse connections for a while (`down`), or
 * accept them and never answer (`stall`: a half-open path, as behind a broken load balancer).
 */
async function flakyProxy(target: number): Promise<{
  url: string;
  down: () => void;
  up: () => Promise<void>;
  stall: (on: boolean) => void;
  close: () => void;
}> {
  let server: net.Server;
  const sockets = new Set<net.Socket>();
  let port = 0;
  let stalled = false;
  const listen = () =>
    new Promise<void>((resolve) => {
      server = net.createServer((c) => {
        sockets.add(c);
        if (stalled) return;
        const up = net.connect(target, '127.0.0.1');
        sockets.add(c).add(up);
        c.pipe(up).pipe(c);
        const end = () => {
          c.destroy();
          up.destroy();
        };
        c.on('error', end).on('close', end);
        up.on('error', end).on('close', end);
      });
      server.listen(port, '127.0.0.1', () => {
        port = (server.address() as net.AddressInfo).port;
        resolve();
      });
    });
  await listen();
  return {
    url: `http://127.0.0.1:${port}`,
    down: () => {
      server.close();
      for (const x of sockets) x.destroy();
      sockets.clear();
    },
    up: listen,
    stall: (on) => {
      stalled = on;
      if (on) for (const x of sockets) x.destroy();
    },
    close: () => {
      server.close();
      for (const x of sockets) x.destroy();
    },
  };
}

/** `triad agent` as its own process (local executor) against the test server. */
function agentProcess(token: string, env: Record<string, string>) {
  const child = spawn(process.execPath, ['src/cli.ts', 'agent'], {
    env: {
      ...process.env,
      TRIAD_AGENT_SERVER: s.url,
      TRIAD_AGENT_TOKEN: token,
      TRIAD_AGENT_EXECUTOR: 'local',
      TRIAD_AGENT_POLL_WAIT: '1',
      LOG_LEVEL: 'warn',
      ...env,
    },
    stdio: process.env.TRIAD_TEST_AGENT_STDIO === 'inherit' ? 'inherit' : 'ignore',
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, exited };
}

describe('agent resilience', () => {
  test('when the server is unreachable for 10 s mid-step, then no log line is lost', async () => {
    const proxy = await flakyProxy(Number(new URL(s.url).port));
    const agent = startAgent(await agentToken(), proxy.url);
    await agent.start();
    try {
      const repo = await pipelineWith([
        { name: 'ticker', commands: ['for i in $(seq 1 60); do echo line $i; sleep 0.25; done'] },
      ]);
      await waitFor(repo, (p) => p.steps[0]?.status === 'running');
      await new Promise((r) => setTimeout(r, 1500));
      proxy.down();
      await new Promise((r) => setTimeout(r, 10_000));
      await proxy.up();
      const p = await waitFor(repo, finished, 60_000);
      expect([p.status, p.error_message]).toEqual(['success', undefined]);
      const expected = Array.from({ length: 60 }, (_, i) => `line ${i + 1}\n`).join('');
      expect(await stepLog(repo, 1)).toBe(expected);
    } finally {
      await agent.stop();
      proxy.close();
    }
  }, 90_000);

  test('when a heartbeat gets no answer, then the next one still brings a cancellation', async () => {
    const proxy = await flakyProxy(Number(new URL(s.url).port));
    const agent = startAgent(await agentToken(), proxy.url, { heartbeatMs: 2_000 });
    await agent.start();
    await showingAgentLog(async () => {
      try {
        const repo = await pipelineWith([{ name: 'slow', commands: ['echo started', 'sleep 600'] }]);
        await waitUntil('the step to run', async () => (await stepLog(repo, 1)) === 'started\n', 20_000);
        // the requests in flight now (a heartbeat among them) never get an answer
        proxy.stall(true);
        await sleep(1_000);
        proxy.stall(false);
        const c = await owner.client.post(`/api/v1/repos/${org}/${repo.name}/pipelines/1/cancel`);
        expect(c.status).toBe(200);
        await waitUntil('the agent to stop the step', () => agent.runningCount === 0, 20_000);
        expect((await waitFor(repo, finished)).status).toBe('cancelled');
      } finally {
        await agent.stop();
        proxy.close();
      }
    });
  }, 60_000);

  test('when the server is gone while the agent stops, then the agent gives up on its reports and stops', async () => {
    const proxy = await flakyProxy(Number(new URL(s.url).port));
    const agent = startAgent(await agentToken(), proxy.url, { drainMs: 500, stopGraceMs: 1000 });
    await agent.start();
    try {
      // far past this test's time limit: a stop that waited for the step or the server would not end
      const repo = await pipelineWith([{ name: 'long', commands: ['echo begin', 'sleep 600'] }]);
      await waitFor(repo, (p) => p.steps[0]?.status === 'running');
      proxy.down();
      const stopped = await agent.stop().then(() => true);
      expect(stopped).toBe(true);
      expect(agent.runningCount).toBe(0);
    } finally {
      proxy.close();
    }
  });

  test('when the agent process gets SIGTERM, then it finishes the running pipeline and exits 0', async () => {
    const token = await agentToken();
    const repo = await pipelineWith([{ name: 'work', commands: ['sleep 2', 'echo finished'] }]);
    const { child, exited } = agentProcess(token, {
      TRIAD_AGENT_METRICS_PORT: '0',
      TRIAD_AGENT_DRAIN_SECONDS: '30',
    });
    await waitFor(repo, (p) => p.steps[0]?.status === 'running');
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    const p = await waitFor(repo, finished);
    expect(p.status).toBe('success');
    expect(await stepLog(repo, 1)).toBe('finished\n');
  });

  test('when the drain period ends first, then what is left is cancelled and reported, and it exits 0', async () => {
    const token = await agentToken();
    const repo = await pipelineWith([{ name: 'forever', commands: ['echo begin', 'sleep 120'] }]);
    const { child, exited } = agentProcess(token, {
      TRIAD_AGENT_METRICS_PORT: 'off',
      TRIAD_AGENT_DRAIN_SECONDS: '1',
    });
    await waitFor(repo, (p) => p.steps[0]?.status === 'running');
    // the step's sleep is past this test's time limit: only the 1 s drain period lets it exit
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    const p = await waitFor(repo, finished);
    expect(p.status).toBe('cancelled');
    expect(p.error_message).toContain('shut down');
    expect(p.steps[0].status).toBe('cancelled');
  });

  test('the agent serves /healthz and its own metrics', async () => {
    const agent = startAgent(await newAgent(s).then(() => agentToken()), s.url, { metricsPort: 0 });
    await agent.start();
    try {
      const h = await fetch(`http://127.0.0.1:${agent.port}/healthz`);
      expect(h.status).toBe(200);
      const m = await (await fetch(`http://127.0.0.1:${agent.port}/metrics`)).text();
      for (const name of [
        'triad_agent_capacity 2',
        'triad_agent_running',
        'triad_agent_polls_total',
        'triad_agent_step_duration_seconds',
        'triad_agent_log_bytes_shipped_total',
      ]) {
        expect(m).toContain(name);
      }
    } finally {
      await agent.stop();
    }
  });
});

describe('the embedded agent (TRIAD_EMBEDDED_AGENT=local)', () => {
  test('when a git push has `echo hello` and `exit 3`, then the server runs it with no agent set up', async () => {
    const e = await startTestServer({ TRIAD_EMBEDDED_AGENT: 'local' });
    try {
      const u = await e.newUser();
      const o = await e.newOrg(u);
      const repo = await gitRepo(e, u, o);
      await commitFiles(repo, {
        '.pipeline.yml': pipelineFile([
          { name: 'hello', commands: ['echo hello'] },
          { name: 'fail', commands: ['exit 3'] },
        ]),
      });
      await repo.push();
      let p: any;
      for (let i = 0; i < 100; i++) {
        p = (await u.client.get(`/api/v1/repos/${o}/${repo.name}/pipelines/1`)).body;
        if (finished(p)) break;
        await new Promise((r) => setTimeout(r, 200));
      }
      expect(p.status).toBe('failure');
      expect(p.steps.map((x: any) => [x.status, x.exit_code])).toEqual([
        ['success', 0],
        ['failure', 3],
      ]);
      const log = await u.client.get(`/api/v1/repos/${o}/${repo.name}/pipelines/1/steps/1/log`);
      expect(log.text).toBe('hello\n');
    } finally {
      await e.close();
    }
  });
});
