import type { Request, RequestHandler, Response } from 'express';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
import { Access, hashToken, type Directory, type Principal } from '../http/auth.ts';
import { ApiError } from '../http/errors.ts';
import type { AuthThrottle } from '../http/throttle.ts';
import { emitEvents } from '../events/outbox.ts';
import { FOSSIL_READER, FOSSIL_WRITER, type VcsKind } from '../vcs/index.ts';
import { pushEvents, snapshot, type PushEvent } from '../vcs/pushes.ts';
import { classify, mutates, serveBackend } from '../vcs/transport.ts';
import { RESERVED_ORG_NAMES } from '../orgs/service.ts';
import type { ReposService } from './service.ts';

const PUSH_LOCK = 0x70757368; // "push"

type Deps = {
  repos: ReposService;
  dir: Directory;
  em: () => EntityManager;
  log: Logger;
  baseUrl: () => string;
  /** Failed-authentication throttle shared with the API (429 for a blocked client address). */
  throttle?: AuthThrottle;
  /** Called after a push changed a repository (cache invalidation). */
  onPushed?: (repoId: number, repoPath: string) => void;
  /** Called inside the push transaction with the push's events (CI triggers). */
  onPushEvents?: (
    tx: EntityManager,
    repoId: number,
    events: PushEvent[],
    senderId: number | null,
  ) => Promise<unknown>;
};

class Challenge extends Error {}

function deny(res: Response, status: number, message: string): void {
  if (status === 401) res.setHeader('WWW-Authenticate', 'Basic realm="Triad", charset="UTF-8"');
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
 * Mercurial wire protocol and Fossil sync, each served by the VCS's own backend. Pull needs
 * repo:read (anonymous for public repositories); push needs repo:write and org membership.
 * Pushes to one repository are serialised by a PostgreSQL advisory lock held in the transaction
 * that records the push events, so several replicas can share the repository volume.
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
    const rest = params.rest;
    const subpath = rest === undefined ? '' : `/${rest.join('/')}`;
    try {
      const principal = await principalOf(req, deps.dir, deps.throttle);
      const access = new Access(principal, deps.dir);
      const org = await deps.dir.orgByName(orgName);
      let ref = org === undefined ? undefined : await deps.dir.repoByName(org, repoName);
      if (ref === undefined && org !== undefined && repoName.toLowerCase().endsWith('.git')) {
        repoName = repoName.slice(0, -4);
        ref = await deps.dir.repoByName(org, repoName);
      }
      const visible = ref !== undefined && (await access.canSee(ref));
      if (!visible) {
        if (principal.kind === 'anonymous') throw new Challenge('authentication required');
        deny(res, 404, 'repository not found');
        return;
      }
      const repo = await deps.repos.get(ref!.id);
      const vcs = repo.vcs as VcsKind;
      const query = new URL(req.originalUrl, 'http://x').searchParams;
      const op = classify(vcs, req.method, subpath, query);
      let remoteUser: string | undefined;
      if (op === 'write') {
        if (principal.kind === 'anonymous') throw new Challenge('authentication required to push');
        await access.repo(orgName, repoName, { scope: 'repo:write', role: 'member' });
        remoteUser = principal.kind === 'user' ? principal.user.username : undefined;
      } else {
        if (repo.isPrivate && principal.kind === 'anonymous') throw new Challenge('authentication required');
        await access.repo(orgName, repoName, { scope: 'repo:read' });
        remoteUser = principal.kind === 'user' ? principal.user.username : undefined;
      }
      if (vcs === 'fossil') {
        const canWrite = await access
          .repo(orgName, repoName, { scope: 'repo:write', role: 'member' })
          .then(() => true)
          .catch(() => false);
        remoteUser = canWrite ? FOSSIL_WRITER : FOSSIL_READER;
      }
      const repoPath = deps.repos.path(repo);
      const scriptName = `/${orgName}/${urlRepo}`;
      const backend = { vcs, repoPath, subpath, scriptName, remoteUser, write: op === 'write', req, res };
      if (!mutates(vcs, req.method, op) || (vcs === 'fossil' && remoteUser !== FOSSIL_WRITER)) {
        await serveBackend(backend);
        res.end();
        return;
      }
      const senderId = principal.kind === 'user' ? principal.user.id : null;
      let served: Buffer | undefined;
      let changed = false;
      try {
        changed = await deps
          .em()
          .fork()
          .transactional(async (tx) => {
            await tx.execute('select pg_advisory_xact_lock(?, ?)', [PUSH_LOCK, repo.id]);
            const before = await snapshot(vcs, repoPath);
            served = (await serveBackend({ ...backend, buffer: true })).body;
            const after = await snapshot(vcs, repoPath);
            const ctx = {
              vcs,
              dir: repoPath,
              defaultBranch: repo.defaultBranch,
              commitUrl: (id: string) =>
                `${deps.baseUrl()}/api/v1/repos/${orgName}/${repo.name}/changeset/${id}`,
            };
            const events = await pushEvents(ctx, before, after);
            await emitEvents(
              tx,
              events.map((e) => ({ type: e.type, repoId: repo.id, senderId, payload: e.payload })),
            );
            if (events.length > 0 && deps.onPushEvents !== undefined) {
              // In a savepoint: a CI trigger that fails must not take the push's events with it.
              const trigger = deps.onPushEvents;
              try {
                await tx.transactional((sp) => trigger(sp, repo.id, events, senderId));
              } catch (err) {
                deps.log.error({ err, repo: repo.id }, 'CI triggers failed; push events kept');
              }
            }
            return events.length > 0;
          });
      } catch (e) {
        // The push itself went through: answer the client, and report the bookkeeping failure.
        if (served === undefined) throw e;
        deps.log.error({ err: e, repo: repo.id }, 'push served but its events could not be recorded');
      }
      if (!res.writableEnded) res.end(served);
      if (changed) deps.onPushed?.(repo.id, repoPath);
    } catch (e) {
      if (res.headersSent) {
        deps.log.error({ err: e }, 'repository transport failed after the response started');
        res.end();
      } else if (e instanceof Challenge) deny(res, 401, e.message);
      else if (e instanceof ApiError) {
        for (const [k, v] of Object.entries(e.headers)) res.setHeader(k, v); // Retry-After of a 429
        deny(res, e.status, e.message);
      } else throw e;
    }
  };
}
