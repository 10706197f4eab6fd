/**
 * Protected refs for Fossil pushes. Fossil has no hook that could refuse a sync before what it
 * received becomes visible, so Triad checks first: a sync request that carries artifacts (`file`
 * or `cfile` cards) from a pusher to a repository with rules is run against a throw-away copy of
 * the repository, and the branches' leaves of the copy are compared with the repository's. When
 * the rules refuse what would change, the repository never sees the request: the client gets a
 * sync answer holding only an `error` card with the reason, which `fossil push`/`sync` prints
 * (`Error: <reason>`) before it stops. Otherwise the request runs against the repository itself.
 *
 * What a push moves, per branch (a branch's leaves, newest by check-in time first): a branch with
 * no leaf before is created; a branch with leaves before and none after is deleted; otherwise it
 * is updated from its newest leaf before to its newest leaf after, a fast-forward when every new
 * leaf descends from a leaf it had and every leaf it had is still an ancestor of one of its
 * leaves (a fork, a second leaf, is not one). Tags are not protected.
 */
import { createReadStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import { firstRefusal, mayPush, type Protection, type RefUpdate } from '../../protection/rules.ts';
import { FOSSIL } from '../constants.ts';
import { cgiEnv } from '../process/cgi.ts';
import type { Exit } from '../process/child.ts';
import { spawnChild } from '../process/spawner.ts';
import { output } from '../refs.ts';
import type { BackendRequest, CgiProgram } from '../transport.ts';
import { sqlText } from './sql.ts';

const inflate = promisify(zlib.inflate);

const COMPRESSED = 'application/x-fossil';

function contentType(b: Pick<BackendRequest, 'req'>): string {
  return (b.req.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
}

/**
 * The sync payload of a request body: `application/x-fossil` is a 4-byte big-endian length and a
 * zlib stream, `application/x-fossil-uncompressed` the cards themselves.
 */
export async function payload(body: Buffer, type: string): Promise<Buffer> {
  return type === COMPRESSED ? inflate(body.subarray(4)) : body;
}

/** A `file` or `cfile` card at the start of a line (the scanned text starts with a newline). */
const ARTIFACT_CARD = /\nc?file /;

/** Whether a sync payload sends artifacts (a push; a clone or pull round trip sends none). */
export function carriesArtifacts(cards: Buffer): boolean {
  return ARTIFACT_CARD.test(`\n${cards.toString('latin1')}`);
}

/**
 * `carriesArtifacts` of a spooled request body, read as a stream (inflated on the fly) that stops
 * at the first artifact card: a large push is never held in memory.
 */
export async function bodyCarriesArtifacts(file: string, type: string): Promise<boolean> {
  const raw = createReadStream(file, { start: type === COMPRESSED ? 4 : 0 });
  const cards = type === COMPRESSED ? raw.pipe(zlib.createInflate()) : raw;
  let tail = '\n';
  try {
    for await (const chunk of cards as AsyncIterable<Buffer>) {
      const text = tail + chunk.toString('latin1');
      if (ARTIFACT_CARD.test(text)) return true;
      tail = text.slice(-6);
    }
    return false;
  } catch {
    return true; // not a payload Fossil could read either: tried like a push (Fossil answers it)
  } finally {
    raw.destroy();
    cards.destroy();
  }
}

/** Fossil's escaping of a card argument (`fossilize`): no spaces or line breaks. */
export function fossilize(text: string): string {
  const map: Record<string, string> = { '\\': '\\\\', ' ': '\\s', '\n': '\\n', '\r': '\\r', '\t': '\\t' };
  return text.replace(
    /[\\ \n\r\t\v\f\0]/g,
    (c) => map[c] ?? (c === '\v' ? '\\v' : c === '\f' ? '\\f' : '\\0'),
  );
}

/** A sync answer holding one `error` card, in the encoding the request used. */
export function errorAnswer(message: string, type: string): Buffer {
  const cards = Buffer.from(`error ${fossilize(message)}\n`, 'utf8');
  if (type !== COMPRESSED) return cards;
  const size = Buffer.alloc(4);
  size.writeUInt32BE(cards.length);
  return Buffer.concat([size, zlib.deflateSync(cards)]);
}

type Leaf = { branch: string; uuid: string; mtime: number };

const BRANCH_OF = `(select value from tagxref x where x.rid = l.rid and x.tagtype > 0
  and x.tagid = (select tagid from tag where tagname = 'branch'))`;

/** One JSON value from `fossil sql` (hex-encoded, so any text survives its quoting). */
async function json<T>(file: string, query: string): Promise<T> {
  const text = await output(
    FOSSIL.bin,
    ['sql', '-R', file, '--readonly', `select hex(${query})`],
    FOSSIL.env,
  );
  return JSON.parse(Buffer.from(text.trim().replace(/^'|'$/g, ''), 'hex').toString('utf8')) as T;
}

/** Every branch's leaves, newest first. */
async function leaves(file: string): Promise<Map<string, Leaf[]>> {
  const rows = await json<[string, string, number][]>(
    file,
    `(select json_group_array(json_array(coalesce(${BRANCH_OF}, 'trunk'), b.uuid, e.mtime))
       from leaf l join blob b on b.rid = l.rid join event e on e.objid = l.rid)`,
  );
  const out = new Map<string, Leaf[]>();
  for (const [branch, uuid, mtime] of rows)
    out.set(branch, [...(out.get(branch) ?? []), { branch, uuid, mtime }]);
  for (const list of out.values()) list.sort((a, b) => b.mtime - a.mtime);
  return out;
}

/** Which of `targets` are ancestors of (or equal to) one of `from`, in repository `file`. */
async function ancestorsAmong(file: string, from: string[], targets: string[]): Promise<Set<string>> {
  if (from.length === 0 || targets.length === 0) return new Set();
  const list = (uuids: string[]) => uuids.map(sqlText).join(', ');
  const found = await json<string[]>(
    file,
    `(with recursive anc(rid) as (select rid from blob where uuid in (${list(from)})
        union select plink.pid from plink join anc on plink.cid = anc.rid)
      select json_group_array(b.uuid) from anc join blob b on b.rid = anc.rid where b.uuid in (${list(targets)}))`,
  );
  return new Set(found);
}

/** The branch updates between the leaves of `before` (the repository) and `after` (the trial copy). */
export async function branchUpdates(
  before: Map<string, Leaf[]>,
  after: Map<string, Leaf[]>,
  copy: string,
): Promise<RefUpdate[]> {
  const out: RefUpdate[] = [];
  for (const name of new Set([...before.keys(), ...after.keys()])) {
    const had = before.get(name) ?? [];
    const has = after.get(name) ?? [];
    const key = (l: Leaf[]) =>
      l
        .map((x) => x.uuid)
        .sort()
        .join(',');
    if (key(had) === key(has)) continue;
    const update = { name, type: 'branch' as const, old: had[0]?.uuid ?? null, new: has[0]?.uuid ?? null };
    if (had.length === 0 || has.length === 0) {
      out.push({ ...update, fastForward: true });
      continue;
    }
    const old = had.map((l) => l.uuid);
    const fresh = has.map((l) => l.uuid).filter((u) => !old.includes(u));
    // every leaf it had is below a leaf it has, and every new leaf is above a leaf it had
    let ff =
      (
        await ancestorsAmong(
          copy,
          has.map((l) => l.uuid),
          old,
        )
      ).size === old.length;
    for (const leaf of fresh) if (ff) ff = (await ancestorsAmong(copy, [leaf], old)).size > 0;
    out.push({ ...update, fastForward: ff });
  }
  return out;
}

/** Whether some rule could refuse something this pusher does (else no trial is needed). */
export function restricts(p: Protection): boolean {
  return p.rules.some((r) => !mayPush(r, p.pusher) || r.fast_forward_only || !r.allow_deletion);
}

/**
 * Why the repository's rules refuse this sync request, or undefined (it may run): a request that
 * sends no artifacts, or has no body, or from a pusher no rule restricts, is not tried.
 */
export async function refusedSync(b: BackendRequest): Promise<string | undefined> {
  const { protection, input } = b;
  if (protection === undefined || input === undefined || !restricts(protection)) return undefined;
  const type = contentType(b);
  if (!(await bodyCarriesArtifacts(input.file, type))) return undefined;
  const copy = path.join(b.tmpDir, 'trial.fossil');
  await fs.copyFile(b.repoPath, copy, fs.constants.COPYFILE_FICLONE);
  const script = path.join(b.tmpDir, 'trial.cgi');
  await fs.writeFile(script, `repository: ${copy}\n`);
  const env = cgiEnv({
    req: b.req,
    tmpDir: b.tmpDir,
    queryString: b.query,
    scriptName: b.scriptName,
    pathInfo: '/',
    remoteUser: b.remoteUser,
    input,
    env: {},
  });
  const answer = path.join(b.tmpDir, 'trial.out');
  const before = await leaves(b.repoPath);
  // its own process group, killed when the client leaves or the transfer's time runs out
  const child = await spawnChild(
    '/bin/sh',
    ['-c', 'exec "$0" "$1" <"$2" >"$3"', FOSSIL.bin, script, input.file, answer],
    { env, stdio: ['ignore', 'ignore', 'collect'] },
  );
  const stop = () => child.kill('SIGKILL');
  b.signal.addEventListener('abort', stop, { once: true });
  if (b.signal.aborted) stop();
  let exit: Exit;
  try {
    exit = await child.exited;
  } finally {
    b.signal.removeEventListener('abort', stop);
  }
  b.signal.throwIfAborted();
  // the check could not be made: the push fails (a server error), the repository is unchanged
  if (exit.code !== 0)
    throw new Error(
      `fossil trial run of a protected push failed (${exit.code ?? exit.signal}): ${child.stderr}`,
    );
  const updates = await branchUpdates(before, await leaves(copy), copy);
  return firstRefusal(protection.rules, updates, protection.pusher);
}

/** A CGI program answering the sync request with an `error` card: the client prints `message`. */
export async function refusalProgram(b: BackendRequest, message: string): Promise<CgiProgram> {
  const type = contentType(b) === COMPRESSED ? COMPRESSED : 'application/x-fossil-uncompressed';
  const body = errorAnswer(message, type);
  const file = path.join(b.tmpDir, 'refusal.cgi-answer');
  const head = `Status: 200 OK\r\nContent-Type: ${type}\r\nContent-Length: ${body.length}\r\n\r\n`;
  await fs.writeFile(file, Buffer.concat([Buffer.from(head, 'latin1'), body]));
  return { command: 'cat', args: [file], pathInfo: '/', env: {} };
}
