import type { Request } from 'express';
import { RateLimiterMemory } from 'rate-limiter-flexible';
import { ApiError } from './errors.ts';

export type AuthThrottleOptions = {
  /** Failed authentications one client address may make within a window (0 = no throttle). */
  limit: number;
  /** The window starts at an address's first failure; the address is blocked until it ends. */
  windowMs: number;
};

/**
 * The client address of a request: the socket peer, or, when express `trust proxy` is set
 * (`TRIAD_TRUST_PROXY`), the address the trusted proxies report in `X-Forwarded-For`.
 */
export function clientAddress(req: Request): string {
  return req.ip ?? req.socket.remoteAddress ?? 'unknown';
}

/**
 * Failed-authentication throttle, one per server process, shared by the API (Bearer tokens) and
 * the clone URLs (HTTP Basic): after `limit` failed authentications from one client address
 * within the window, every request from that address that presents credentials answers 429
 * `rate_limited` with `Retry-After` until the window ends, even with a valid token, so a
 * guesser cannot go on testing tokens. Requests without credentials and successful ones never
 * count. Counters live in memory (rate-limiter-flexible), so each replica counts on its own.
 */
export class AuthThrottle {
  private readonly failures: RateLimiterMemory | undefined;
  private readonly limit: number;

  constructor(opts: AuthThrottleOptions) {
    this.limit = opts.limit;
    this.failures =
      opts.limit > 0
        ? new RateLimiterMemory({
            keyPrefix: 'auth-failures',
            points: opts.limit,
            duration: Math.max(0.001, opts.windowMs / 1000),
          })
        : undefined;
  }

  /**
   * Runs a credential check for the request's address: 429 (an `ApiError`) when the address is
   * blocked, before anything is looked up; a failure `isFailure` recognises is counted and rethrown.
   */
  async guard<T>(req: Request, check: () => Promise<T>, isFailure: (e: unknown) => boolean): Promise<T> {
    const limiter = this.failures;
    if (limiter === undefined) return check();
    const address = clientAddress(req);
    const seen = await limiter.get(address);
    if (seen !== null && seen.consumedPoints >= this.limit)
      throw ApiError.rateLimited(seen.msBeforeNext / 1000);
    try {
      return await check();
    } catch (e) {
      if (isFailure(e)) await limiter.penalty(address, 1);
      throw e;
    }
  }
}
