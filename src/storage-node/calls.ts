/** How a node runs the calls of the driver contract it is sent (server.ts). */
import type { ReadAhead, RepoReader } from '../vcs/reader.ts';
import { errorToWire } from '../vcs/remote/wire.ts';
import { Refused } from './http.ts';

export function invoke(target: object, method: string, args: unknown[]): Promise<unknown> {
  const fn = (target as Record<string, unknown>)[method];
  if (typeof fn !== 'function') throw new Refused(400, `no such call for this kind: ${method}`);
  return Promise.resolve((fn as (...a: unknown[]) => unknown).apply(target, args));
}

/**
 * `resolve` and the read the server will make next at the commit found, in one call: the read's
 * outcome (value or error) comes back with the commit for the server to use when it asks.
 */
export async function resolveThen(reader: RepoReader, args: unknown[]): Promise<unknown> {
  const [rev, ahead] = args as [string, ReadAhead];
  const at = await reader.resolve(rev);
  try {
    return { at, value: await invoke(reader, ahead.method, [at ?? rev, ...ahead.args]) };
  } catch (e) {
    return { at, error: errorToWire(e) };
  }
}
