import { spawn } from 'node:child_process';
import { createReadStream } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { niced } from './priority.ts';
import { VcsCommandFailed } from './run.ts';

/** Formats of source archives (`VcsDriver.archive`). */
export type ArchiveFormat = 'tar.gz' | 'zip';

/**
 * Streams the standard output of a command as it is produced (archives: git archive, hg archive;
 * a file's bytes: git cat-file, hg cat, fossil cat), chunk by chunk as the consumer asks, so the
 * pipe's backpressure bounds memory. The command runs in its own process group: a consumer that
 * stops early (a client gone) kills it; a non-zero exit ends the stream with `VcsCommandFailed`.
 * It runs `nice` niceness steps below the server (priority.ts).
 */
export async function* commandStream(
  cmd: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  nice: number,
): AsyncGenerator<Buffer> {
  const [command, argv] = niced(nice, cmd, args);
  const child = spawn(command, argv, { env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => {
    if (stderr.length < 4096) stderr += d.toString('utf8');
  });
  const exited = new Promise<number | null>((resolve) => {
    child.once('close', (code) => resolve(code));
    child.once('error', () => resolve(null));
  });
  let done = false;
  try {
    for await (const chunk of child.stdout as AsyncIterable<Buffer>) yield chunk;
    const code = await exited;
    done = true;
    if (code !== 0) throw new VcsCommandFailed(`${cmd} ${args[0] ?? ''} failed`, code, stderr);
  } finally {
    if (!done && child.exitCode === null && child.pid !== undefined) {
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }
}

/**
 * For a command that can only write its archive to a file (Fossil builds it in memory and opens
 * the output path itself, which a socket cannot be): runs it with a temporary file, then streams
 * that file and removes it.
 */
export async function* fileOutputStream(
  cmd: string,
  args: (out: string) => readonly string[],
  env: NodeJS.ProcessEnv,
  nice: number,
): AsyncGenerator<Buffer> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'triad-archive-'));
  try {
    const out = path.join(dir, 'archive');
    for await (const chunk of commandStream(cmd, args(out), env, nice)) void chunk; // prints nothing
    yield* createReadStream(out) as AsyncIterable<Buffer>;
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}
