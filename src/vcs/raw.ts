import { spawn } from 'node:child_process';

/** A command and its environment whose standard output is the bytes wanted. */
export type RawSource = { command: string; args: string[]; env: NodeJS.ProcessEnv };

/** The command failed (its exit code and stderr in the message). */
export class RawSourceFailed extends Error {}

/**
 * The standard output of a command, chunk by chunk as the consumer asks (the pipe's backpressure
 * bounds memory). A consumer that stops early (a client that left) kills the process; a command
 * that fails throws at the end.
 */
export async function* streamOutput(src: RawSource): AsyncGenerator<Buffer> {
  const child = spawn(src.command, src.args, { env: src.env, stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  child.stderr.on('data', (d: Buffer) => {
    if (err.length < 4096) err += d.toString('utf8');
  });
  const closed = new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => resolve(code));
  });
  closed.catch(() => undefined);
  try {
    for await (const chunk of child.stdout) yield chunk as Buffer;
    const code = await closed;
    if (code !== 0) throw new RawSourceFailed(`${src.command} exited with ${code}: ${err.trim()}`);
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
}
