import type { Request, RequestHandler, Response } from 'express';
import type { Logger } from 'pino';
import { Access, type Directory, type Principal } from '../http/auth.ts';
import { hashToken } from '../domain/access.ts';
import { ApiError } from '../http/errors.ts';
import type { AuthThrottle } from '../http/throttle.ts';
import type { Spool } from '../vcs/process/spool.ts';
import { RESERVED_ORG_NAMES } from '../orgs/service.ts';
import type { RepoChanges } from './changes.ts';
import { reasonPhrase, transfer, type TransferLimits } from './transfer.ts';
import type { ReposService } from './service.ts';
import type { Protection, RuleShape } from '../protection/rules.ts';

type Deps = {
  repos: ReposService;
  dir: Directory;
  log: Logger;
  baseUrl: () => string;
  changes: RepoChanges;
  spool: Spool;
  limits: Omit<TransferLimits, 'spool' | 'log'>;
  /** Failed-authentication throttle shared with the API (429 for a blocked client address). */
  throttle?: AuthThrottle;
  /** The repository's protection rules (src/protection), checked by each kind's push. */
  protections?: (repoId: number) => Promise<RuleShape[]>;
};

class Challenge extends Error {}

function deny(res: Response, status: number, message: string): void {
  if (status === 401) res.setHeader('WWW-Authenticate', 'Basic realm="Triad", charset="UTF-8"');
  res.statusMessage = reasonPhrase(message);
  res.status(status).type('text/plain; charset=utf-8').send(`${message}\n`);
}

/** HTTP Basic (any username, token as password) or Bearer; failures count in the throttle. */
async function principalOf(req: Request, dir: Directory, throttle?: AuthThrottle): Promise<Principal> {
  if (req.headers.authorization === undefined) return { kind: 'anonymous' };
  const check = () => credentialsOf(req, dir);
  return throttle === undefined ? check() : throttle.guard(req, check, (e) => e instanceof Challenge);
}

async function credentialsOf(req: Request, dir: Directory): Promise<Principal> {
  const h = req.headers.authorization;
  if (h === undefined) return { kind: 'anonymous' };
  let token: string | undefined;
  const basic = /^Basic\s+(\S+)$/i.exec(h);
  if (basic?.[1] !== undefined) {
    const decoded = Buffer.from(basic[1], 'base64').toString('utf8');
    const i = decoded.indexOf(':');
    token = i >= 0 ? decoded.slice(i + 1) : decoded;
  } else {
    token = /^Bearer\s+(\S+)$/i.exec(h)?.[1];
  }
  if (token === undefined || token === '') throw new Challenge('credentials required');
  const found = await dir.userByTokenHash(hashToken(token));
  if (found === undefined) throw new Challenge('invalid credentials');
  if (found.expiresAt !== null && found.expiresAt.getTime() <= Date.now())
    throw new Challenge('token expired');
  return { kind: 'user', user: found.user, grant: found.grant };
}

/**
 * Clone and push at `{base_url}/:org/:repo` with the stock clients: git smart HTTP, the
 * Mercurial wire protocol and Fossil sync, each served by the VCS's own backend; nothing else is
 * served there (see each kind's `transport.classify`). Pull needs repo:read (anonymous for public
 * repositories); push needs repo:write and org membership. Pushes go through `RepoChanges` (push lock, events,
 * recorded ref state); the transfer itself is bounded and cleaned up by `transfer`.
 */
export function hostingHandler(deps: Deps): RequestHandler {
  return async (req, res, next) => {
    const params = req.params as { org?: string; repo?: string; rest?: string[] };
    const orgName = params.org ?? '';
    const urlRepo = params.repo ?? '';
    let repoName = urlRepo;
    if (RESERVED_ORG_NAMES.has(orgName.toLowerCase())) {
      next();
      return;
    }
    // Whatever a backend answers, a browser must never run it as a page of this origin.
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.setHeader('Content-Security-Policy', "default-src 'none'; sandbox");
    const rest = params.rest;
    const subpath = rest === undefined ? '' : `/${rest.join('/')}`;
    if (`${orgName}/${urlRepo}${subpath}`.includes('\0')) {
      deny(res, 400, 'invalid path');
      return;
    }
    try {
      const principal = await principalOf(req, deps.dir, deps.throttle);
      const access = new Access(principal, deps.dir);
      // The repository and its organization in one lookup (`name.git` names `name` too).
      let target = await deps.dir.repoByNames(orgName, repoName);
      if (target === undefined && repoName.toLowerCase().endsWith('.git')) {
        repoName = repoName.slice(0, -4);
        target = await deps.dir.repoByNames(orgName, repoName);
      }
      if (target === undefined || !(await access.canSee(target.repo))) {
        if (principal.kind === 'anonymous') throw new Challenge('authentication required');
        deny(res, 404, 'repository not found');
        return;
      }
      const repo = await deps.repos.handle(target);
      const driver = repo.driver;
      const query = new URL(req.originalUrl, 'http://x').searchParams;
      const wire = driver.transport.classify(req.method, subpath, query, req.headers['content-type']);
      if (wire.kind === 'refuse') {
        deny(res, wire.status, wire.message);
        return;
      }
      const op = wire.kind === 'wire' ? wire.op : 'read';
      if (op === 'write') {
        if (principal.kind === 'anonymous') throw new Challenge('authentication required to push');
        await access.authorize(target, { scope: 'repo:write', role: 'member' });
      } else {
        if (repo.isPrivate && principal.kind === 'anonymous') throw new Challenge('authentication required');
        await access.authorize(target, { scope: 'repo:read' });
      }
      if (wire.kind === 'hint') {
        res
          .status(200)
          .type('text/plain; charset=utf-8')
          .send(driver.transport.cloneHint(`${deps.baseUrl()}/${orgName}/${repo.name}`));
        return;
      }
      // A `sync` request (Fossil) carries clone and push alike: the backend enforces the rights of
      // the user it is given, and only a caller allowed to write takes the push lock.
      const canWrite =
        op === 'write' ||
        (op === 'sync' &&
          (await access
            .authorize(target, { scope: 'repo:write', role: 'member' })
            .then(() => true)
            .catch(() => false)));
      const username = principal.kind === 'user' ? principal.user.username : undefined;
      const writes = wire.mutates && canWrite;
      let protection: Protection | undefined;
      if (writes && username !== undefined && deps.protections !== undefined) {
        // only what judging a push needs (the rules travel to storage nodes in a header)
        const rules = (await deps.protections(target.repo.id)).map((r) => ({
          pattern: r.pattern,
          fast_forward_only: r.fast_forward_only,
          allow_deletion: r.allow_deletion,
          push: r.push,
        }));
        if (rules.length > 0)
          protection = { rules, pusher: { username, role: await access.roleIn(target.repo.orgId) } };
      }
      await transfer(
        {
          driver,
          repoPath: repo.path,
          subpath,
          scriptName: `/${orgName}/${urlRepo}`,
          query: wire.query,
          remoteUser: driver.transport.remoteUser(username, canWrite),
          write: op === 'write',
          protection,
          req,
          res,
        },
        writes
          ? {
              changes: deps.changes,
              senderId: principal.kind === 'user' ? principal.user.id : null,
              repo,
            }
          : undefined,
        { spool: deps.spool, log: deps.log, ...deps.limits },
      );
    } catch (e) {
      if (res.headersSent) {
        deps.log.error({ err: e }, 'repository transport failed after the response started');
        res.destroy();
      } else if (e instanceof Challenge) deny(res, 401, e.message);
      else if (e instanceof ApiError) {
        for (const [k, v] of Object.entries(e.headers)) res.setHeader(k, v); // Retry-After of a 429
        deny(res, e.status, e.message);
      } else throw e;
    }
  };
}
