/** Waiting in tests: for a state to be reached (polling), or for time to pass (sleep). */

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Polls `check` every `intervalMs` until it returns a value other than undefined, and answers it;
 * fails after `limitMs` naming `what` was waited for.
 */
export async function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined> | T | undefined,
  limitMs = 30_000,
  intervalMs = 100,
): Promise<T> {
  const until = Date.now() + limitMs;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await sleep(intervalMs);
  }
}

/** waitFor for a condition. */
export async function waitUntil(
  what: string,
  cond: () => Promise<boolean> | boolean,
  limitMs?: number,
  intervalMs?: number,
): Promise<void> {
  await waitFor(what, async () => ((await cond()) ? true : undefined), limitMs, intervalMs);
}
