import { createHash } from 'node:crypto';
import type { Request } from 'express';
import { ApiError } from './errors.ts';

export type AuthThrottleOptions = {
  /** Failed authentications one client address may make within a window (0 = no throttle). */
  limit: number;
  /** The window starts at an address's first failure; the address is blocked until it ends. */
  windowMs: number;
};

/**
 * Which credentials a failure counts against: agent tokens (the CI API under `/api/v1/ci/`) and
 * users' tokens (the rest of the API, clone URLs) have separate counters per address, so users'
 * failures never block an agent polling from the same address (the embedded agent, 127.0.0.1).
 */
export type ThrottleScope = 'user' | 'agent';

/** How long a credential that authenticated stays known as valid, and how many are kept. */
const KNOWN_GOOD_MS = 24 * 3600_000;
const KNOWN_GOOD_MAX = 20_000;

/**
 * The client address of a request: the socket peer, or, when express `trust proxy` is set
 * (`TRIAD_TRUST_PROXY`), the address the trusted proxies report in `X-Forwarded-For`.
 */
export function clientAddress(req: Request): string {
  return req.ip ?? req.socket.remoteAddress ?? 'unknown';
}

/**
 * The secret an `Authorization` header presents: the Bearer token, the password of HTTP Basic
 * (any user name), else the whole header (a malformed one still has an identity to count).
 */
export function presentedSecret(header: string): string {
  const bearer = /^Bearer\s+(\S+)\s*$/i.exec(header)?.[1];
  if (bearer !== undefined) return bearer;
  const basic = /^Basic\s+(\S+)\s*$/i.exec(header)?.[1];
  if (basic === undefined) return header;
  const decoded = Buffer.from(basic, 'base64').toString('utf8');
  const i = decoded.indexOf(':');
  return i >= 0 ? decoded.slice(i + 1) : decoded;
}

/**
 * Fixed-window counters in memory: a key's window starts at its first count. Every method is
 * synchronous, so a request's check and count never interleave with another request's.
 */
class Windows {
  private readonly map = new Map<string, { n: number; until: number }>();
  private writes = 0;
  private readonly ms: number;

  constructor(ms: number) {
    this.ms = ms;
  }

  /** The key's count in its current window and the milliseconds until that window ends. */
  get(key: string): { n: number; msLeft: number } {
    const now = Date.now();
    const w = this.map.get(key);
    if (w === undefined || w.until <= now) return { n: 0, msLeft: 0 };
    return { n: w.n, msLeft: w.until - now };
  }

  add(key: string, by = 1): void {
    const now = Date.now();
    if ((this.writes += 1) % 1024 === 0) this.sweep(now);
    const w = this.map.get(key);
    if (w !== undefined && w.until > now) w.n = Math.max(0, w.n + by);
    else if (by > 0) this.map.set(key, { n: by, until: now + this.ms });
    else this.map.delete(key);
  }

  private sweep(now: number): void {
    for (const [k, w] of this.map) if (w.until <= now) this.map.delete(k);
  }
}

/**
 * Failed-authentication throttle, one per server process, shared by the API (Bearer tokens) and
 * the clone URLs (HTTP Basic). It slows down guessing without refusing valid credentials because
 * of others' failures (docs/api.md, "Throttling failed authentications"):
 *
 * - a failure counts once per distinct credential against its client address (per scope), and
 *   every time against that address and credential;
 * - after `limit` distinct failed credentials within the window the address is *blocked* until
 *   the window ends: a credential that already failed there answers 429 without a lookup, and one
 *   credential the address has not presented before is looked up per `windowMs / limit` (429
 *   otherwise), so a guesser goes on at the configured rate at most;
 * - a credential that authenticated within the last 24 hours (in this process) is always looked
 *   up and never throttled: a guesser cannot present one without knowing it, so valid tokens in
 *   use (the embedded agent's, CI clients', users' behind a shared address) keep working;
 * - the same credential failing `limit` times from one address answers 429 (a client in a retry
 *   loop), without blocking the address for others;
 * - agent tokens and users' tokens count separately (`ThrottleScope`).
 *
 * At most `limit` lookups of fresh credentials run at once per address (minus the failures it
 * already has); more wait for one of them to end, so a burst of concurrent guesses cannot
 * overshoot the limit and a burst of valid new credentials (twenty agents starting together,
 * concurrent CI clones) is looked up a few at a time instead of refused. Requests without
 * credentials never count. Counters live in memory, so each replica counts on its own.
 */
export class AuthThrottle {
  private readonly limit: number;
  /** Distinct failed credentials per `scope|address`. */
  private readonly addresses: Windows;
  /** Failures per `scope|address|credential`. */
  private readonly credentials: Windows;
  /** Lookups of fresh credentials a blocked address made (one per `windowMs / limit`). */
  private readonly fresh: Windows;
  /** SHA-256 of credentials that authenticated, with when they did (oldest first). */
  private readonly knownGood = new Map<string, number>();
  /** Lookups of fresh credentials running per `scope|address`, and who waits for one to end. */
  private readonly running = new Map<string, { n: number; waiting: (() => void)[] }>();

  constructor(opts: AuthThrottleOptions) {
    this.limit = opts.limit;
    this.addresses = new Windows(opts.windowMs);
    this.credentials = new Windows(opts.windowMs);
    this.fresh = new Windows(Math.max(1, Math.floor(opts.windowMs / Math.max(1, opts.limit))));
  }

  /**
   * Runs a credential check for the request (`Authorization` names the credential, or `secret`
   * when given: a web sign-in's login and password): 429 (an `ApiError`) when the rules above
   * refuse it, before anything is looked up; a failure `isFailure` recognises is counted and
   * rethrown.
   */
  async guard<T>(
    req: Request,
    check: () => Promise<T>,
    isFailure: (e: unknown) => boolean,
    scope: ThrottleScope = 'user',
    secret?: string,
  ): Promise<T> {
    if (this.limit <= 0) return check();
    const hash = createHash('sha256')
      .update(secret ?? presentedSecret(req.headers.authorization ?? ''), 'utf8')
      .digest('hex');
    const address = `${scope}|${clientAddress(req)}`;
    const credential = `${address}|${hash}`;
    const slot = await this.admit(hash, address, credential);
    try {
      const result = await check();
      this.knownGood.delete(hash);
      this.knownGood.set(hash, Date.now());
      if (this.knownGood.size > KNOWN_GOOD_MAX) {
        const oldest = this.knownGood.keys().next().value;
        if (oldest !== undefined) this.knownGood.delete(oldest);
      }
      return result;
    } catch (e) {
      if (isFailure(e)) {
        this.knownGood.delete(hash);
        const first = this.credentials.get(credential).n === 0;
        this.credentials.add(credential);
        if (first) this.addresses.add(address);
        // once blocked, the next fresh credential waits for the spacing, like every later one
        if (this.addresses.get(address).n >= this.limit && this.fresh.get(address).n === 0)
          this.fresh.add(address);
      }
      throw e;
    } finally {
      // after the failure is counted: a waiting lookup sees it
      if (slot) this.release(address);
    }
  }

  /**
   * Throws 429 when the credential may not be checked now; waits while the address has its
   * most fresh lookups running; true when the lookup holds one of those slots.
   */
  private async admit(hash: string, address: string, credential: string): Promise<boolean> {
    for (;;) {
      const good = this.knownGood.get(hash);
      if (good !== undefined && Date.now() - good < KNOWN_GOOD_MS) return false;
      if (good !== undefined) this.knownGood.delete(hash);
      const same = this.credentials.get(credential);
      if (same.n >= this.limit) throw ApiError.rateLimited(same.msLeft / 1000);
      if (same.n > 0 && this.addresses.get(address).n < this.limit) return false; // counted already
      const seen = this.addresses.get(address);
      if (seen.n >= this.limit) {
        if (same.n > 0) throw ApiError.rateLimited(seen.msLeft / 1000);
        const probes = this.fresh.get(address);
        if (probes.n >= 1) throw ApiError.rateLimited(probes.msLeft / 1000);
        this.fresh.add(address);
        return false;
      }
      const run = this.running.get(address) ?? { n: 0, waiting: [] };
      if (seen.n + run.n < this.limit) {
        run.n += 1;
        this.running.set(address, run);
        return true;
      }
      await new Promise<void>((resolve) => run.waiting.push(resolve));
    }
  }

  private release(address: string): void {
    const run = this.running.get(address);
    if (run === undefined) return;
    run.n -= 1;
    // every waiter looks again (one may now pass as known, another take the free slot)
    for (const wake of run.waiting.splice(0)) wake();
    if (run.n <= 0) this.running.delete(address);
  }
}
