import { expect } from '@jest/globals';
import { pino, type Logger } from 'pino';
import { uniq, type Client, type TestServer, type TestUser } from './server.ts';
import { ok, tempDir, withCreds, writeFile } from './vcs.ts';
import { newRepo } from './factories.ts';

/** A git repository with a working copy that pushes to Triad over HTTP. */
export type GitRepo = {
  name: string;
  id: number;
  work: string;
  clone: string;
  push: (...refs: string[]) => Promise<void>;
};

export async function gitRepo(
  s: TestServer,
  owner: TestUser,
  org: string,
  isPrivate = false,
): Promise<GitRepo> {
  const { name, id, clone } = await newRepo(owner, org, { vcs: 'git', isPrivate });
  const work = await tempDir();
  await ok('git', ['init', '-q', '-b', 'main', work], work);
  return {
    name,
    id,
    work,
    clone,
    push: async (...refs) => {
      await ok(
        'git',
        ['push', '-q', withCreds(clone, owner.token), ...(refs.length > 0 ? refs : ['main'])],
        work,
      );
    },
  };
}

export async function commitFiles(
  repo: GitRepo,
  files: Record<string, string>,
  message = 'change',
): Promise<string> {
  for (const [f, c] of Object.entries(files)) await writeFile(repo.work, f, c);
  await ok('git', ['add', '-A'], repo.work);
  await ok('git', ['commit', '-q', '--allow-empty', '-m', message], repo.work);
  return (await ok('git', ['rev-parse', 'HEAD'], repo.work)).trim();
}

export async function newAgent(s: TestServer, name = uniq('agent')): Promise<Client> {
  const r = await s.admin.post('/api/v1/admin/agents', { name });
  expect(r.status).toBe(201);
  return s.anon.as(r.body.data.token);
}

export const TWO_STEPS = `steps:
  - name: build
    image: alpine:3
    commands: ["echo building", "echo done"]
    environment: {MODE: test}
  - name: test
    image: alpine:3
    commands: ["echo testing"]
`;

/**
 * A logger for the agents of a test file that keeps their lines (debug and up) since the last
 * `reset()`; `showing(body)` prints them with the error when the body fails, so a failing CI run
 * says what the agent did. `TRIAD_TEST_AGENT_LOG=<level>` logs to stdout instead.
 */
export function agentLogCapture(): {
  log: Logger;
  reset: () => void;
  showing: <T>(body: () => Promise<T>) => Promise<T>;
} {
  let lines: string[] = [];
  const level = process.env.TRIAD_TEST_AGENT_LOG;
  const log =
    level !== undefined
      ? pino({ level })
      : pino({ level: 'debug' }, { write: (line: string) => lines.push(line) });
  return {
    log,
    reset: () => {
      lines = [];
    },
    showing: async (body) => {
      try {
        return await body();
      } catch (err) {
        console.error(`the agent's log:\n${lines.join('')}`);
        throw err;
      }
    },
  };
}
