import { randomBytes } from 'node:crypto';
import { FOSSIL } from '../constants.ts';
import {
  blobContent,
  DEFAULT_LIMITS,
  isoUtc,
  Lru,
  ReadNotFound,
  sortEntries,
  splitMessage,
  type BlobContent,
  type Changeset,
  type CompareOptions,
  type ContentLimits,
  type Comparison,
  type DiffResult,
  type LogEntry,
  type LogPage,
  type RawFile,
  refCommit,
  type RefPage,
  type RefType,
  type RepoReader,
  type TreeEntry,
} from '../reader.ts';
import { PersistentProcess, Respawning, type Parser } from '../process/process.ts';
import { cappedDiff, type SizedChange } from '../diff.ts';
import { sqlText } from './sql.ts';
import { rangeOf, treeDiff, type FossilRange } from './compare.ts';

type Row = {
  rid: number;
  uuid: string;
  mtime: number;
  user: string;
  comment: string;
  branch: string | null;
  tags: string[];
};

const ENTRY_JSON = `json_object('rid', e.objid, 'uuid', b.uuid, 'mtime', e.mtime, 'user', coalesce(e.euser, e.user, ''),
  'comment', coalesce(e.ecomment, e.comment, ''),
  'branch', (SELECT x.value FROM tagxref x JOIN tag t ON t.tagid = x.tagid WHERE t.tagname = 'branch' AND x.rid = e.objid AND x.tagtype > 0),
  'tags', json((SELECT json_group_array(substr(t.tagname, 5)) FROM tagxref x JOIN tag t ON t.tagid = x.tagid
    WHERE x.rid = e.objid AND x.tagtype = 1 AND t.tagname GLOB 'sym-*')))`;

/**
 * The refs of a kind as `(name, rid)` rows, a name once, at its newest check-in: the branches
 * whose newest check-in is not closed (what `fossil branch ls` lists), and the tags Fossil calls
 * singleton (`fossil tag list --tagtype singleton`; a branch's propagating tag is not one).
 */
const REF_ROWS = {
  branch: `SELECT name, rid FROM (SELECT x.value AS name, x.rid AS rid, max(e.mtime)
      FROM tagxref x JOIN event e ON e.objid = x.rid
      WHERE x.tagid = (SELECT tagid FROM tag WHERE tagname = 'branch') AND x.tagtype > 0 GROUP BY x.value) br
    WHERE NOT EXISTS (SELECT 1 FROM tagxref c WHERE c.rid = br.rid AND c.tagtype > 0
      AND c.tagid = (SELECT tagid FROM tag WHERE tagname = 'closed'))`,
  tag: `SELECT substr(t.tagname, 5) AS name, x.rid AS rid, max(e.mtime)
      FROM tagxref x JOIN tag t ON t.tagid = x.tagid JOIN event e ON e.objid = x.rid
      WHERE t.tagname GLOB 'sym-*' AND x.tagtype = 1 AND e.type = 'ci' GROUP BY t.tagname`,
};

/** Julian day (Fossil's event.mtime) to ISO UTC. */
function julianIso(mtime: number): string {
  return isoUtc(Math.round((mtime - 2440587.5) * 86_400_000));
}

/**
 * Fossil: one `fossil sql --readonly` per repository; every read is one SQL statement answering a
 * single JSON line, framed by a unique marker line. The warm process keeps Fossil's artifact cache,
 * so delta chains of old revisions are expanded once.
 */
export class FossilReader implements RepoReader {
  private readonly proc: Respawning;
  private readonly orders = new Lru<number, number[]>(16);
  private readonly ranges = new Lru<string, FossilRange>(16);
  private seq = 0;
  private readonly tag = randomBytes(6).toString('hex');

  constructor(file: string) {
    this.proc = new Respawning(() => {
      const p = new PersistentProcess(FOSSIL.bin, ['sql', '--readonly', '-R', file], { env: FOSSIL.env });
      const ready = Buffer.from('~ready~\n');
      const parse: Parser<undefined> = (buf) => {
        const at = buf.indexOf(ready);
        return at < 0 ? undefined : { value: undefined, used: at + ready.length };
      };
      p.request(".mode list\n.headers off\nSELECT '~ready~';\n", parse).catch(() => undefined);
      return p;
    });
  }

  busy(): boolean {
    return this.proc.busy();
  }
  close(): void {
    this.proc.close();
  }

  /** Runs one statement (or several): its output before the end marker, and what it wrote to stderr. */
  private exec(sql: string): Promise<{ out: string; err: string }> {
    this.seq += 1;
    const marker = `~end-${this.tag}-${this.seq}~`;
    const oneLine = sql.replace(/\s*\n\s*/g, ' ').trim();
    const text = `${oneLine};\nSELECT '${marker}';\n`;
    const endLine = Buffer.from(`${marker}\n`);
    const parse: Parser<string> = (buf) => {
      const at = buf.indexOf(endLine);
      if (at < 0) return undefined;
      return { value: buf.toString('utf8', 0, at), used: at + endLine.length };
    };
    return this.proc.run(async (p) => {
      const out = (await p.request(text, parse)).trim();
      return { out, err: p.takeStderr().trim() };
    });
  }

  /** Runs one statement returning one JSON value (undefined when it failed or returned no row). */
  private async query<T>(sql: string): Promise<T | undefined> {
    const { out, err } = await this.exec(sql);
    if (out === '') {
      if (err !== '') throw new Error(`fossil sql: ${err}`);
      return undefined;
    }
    return JSON.parse(out) as T;
  }

  /**
   * One read-only statement answering one JSON value per row (JSON text never holds a raw
   * newline), for the Fossil operations (ops.ts) that share this process. Anything on stderr is
   * an error. Every statement runs in its own read transaction (the shell is in autocommit mode),
   * so it sees every check-in committed before it started, also without `ProcessPool.invalidate`.
   */
  async sqlRows<T>(sql: string): Promise<T[]> {
    const { out, err } = await this.exec(sql);
    if (err !== '') throw new Error(`fossil sql: ${err}`);
    return out
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as T);
  }

  private ci(rev: string): string {
    return `(SELECT rid, uuid FROM blob WHERE rid = symbolic_name_to_rid(${sqlText(rev)}, 'ci'))`;
  }

  /** Check-ins' rids (the earlier API variant's `rev`), by their full ids. */
  async revs(ids: readonly string[]): Promise<Map<string, number>> {
    const wanted = ids.filter((id) => /^[0-9a-f]{40,64}$/.test(id));
    if (wanted.length === 0) return new Map();
    const rows = await this.sqlRows<[string, number]>(
      `SELECT json_array(b.uuid, b.rid) FROM blob b JOIN event e ON e.objid = b.rid AND e.type = 'ci'
        WHERE b.uuid IN (${wanted.map(sqlText).join(', ')})`,
    );
    return new Map(rows);
  }

  async resolve(rev: string): Promise<string | undefined> {
    const r = await this.query<{ uuid: string | null }>(
      `SELECT json_object('uuid', (SELECT uuid FROM ${this.ci(rev)}))`,
    );
    return r?.uuid ?? undefined;
  }

  private async rid(rev: string): Promise<{ rid: number; uuid: string }> {
    const r = await this.query<{ rid: number | null; uuid: string | null }>(
      `SELECT json_object('rid', c.rid, 'uuid', c.uuid) FROM (SELECT NULL) LEFT JOIN ${this.ci(rev)} c`,
    );
    if (r?.rid === null || r?.rid === undefined || r.uuid === null) throw new ReadNotFound('revision');
    return { rid: r.rid, uuid: r.uuid };
  }

  async tree(rev: string, p: string): Promise<TreeEntry[]> {
    const prefix = p === '' ? '' : `${p}/`;
    const where = prefix === '' ? '1' : `instr(f.filename, ${sqlText(prefix)}) = 1`;
    const r = await this.query<{ uuid: string | null; files: [string, number][]; isfile: number }>(
      `SELECT json_object('uuid', c.uuid,
        'files', json((SELECT json_group_array(json_array(f.filename, b.size)) FROM files_of_checkin(c.uuid) f
           JOIN blob b ON b.uuid = f.uuid WHERE ${where})),
        'isfile', (SELECT count(*) FROM files_of_checkin(c.uuid) f WHERE f.filename = ${sqlText(p)}))
       FROM (SELECT NULL) LEFT JOIN ${this.ci(rev)} c`,
    );
    if (r === undefined || r.uuid === null) throw new ReadNotFound('revision');
    if (r.isfile > 0) throw new ReadNotFound('directory');
    if (r.files.length === 0 && p !== '') throw new ReadNotFound('path');
    const dirs = new Set<string>();
    const entries: TreeEntry[] = [];
    for (const [name, size] of r.files) {
      const rest = name.slice(prefix.length);
      const slash = rest.indexOf('/');
      if (slash >= 0) dirs.add(rest.slice(0, slash));
      else entries.push({ name: rest, is_dir: false, size: Math.max(0, size) });
    }
    for (const d of dirs) entries.push({ name: d, is_dir: true, size: 0 });
    return sortEntries(entries);
  }

  async blob(rev: string, p: string, maxBytes = DEFAULT_LIMITS.blobMaxBytes): Promise<BlobContent> {
    if (p === '') {
      await this.rid(rev);
      throw new ReadNotFound('file');
    }
    const max = Math.max(1, Math.trunc(maxBytes));
    // Only the first `max` bytes leave the process (substr of a BLOB counts bytes).
    const r = await this.query<{ uuid: string | null; file: [number, string] | null }>(
      `SELECT json_object('uuid', c.uuid,
        'file', (SELECT json_array(b.size, hex(substr(content(f.uuid), 1, ${max})))
           FROM files_of_checkin(c.uuid) f JOIN blob b ON b.uuid = f.uuid WHERE f.filename = ${sqlText(p)}))
       FROM (SELECT NULL) LEFT JOIN ${this.ci(rev)} c`,
    );
    if (r === undefined || r.uuid === null) throw new ReadNotFound('revision');
    if (r.file === null) throw new ReadNotFound('path');
    const data = Buffer.from(r.file[1], 'hex');
    return blobContent(p, data, Math.max(r.file[0], data.length), max);
  }

  /** The size is the blob table's (the artifact's full size, however it is stored). */
  async file(rev: string, p: string, inline = -1): Promise<RawFile> {
    if (p === '') {
      await this.rid(rev);
      throw new ReadNotFound('file');
    }
    const max = Math.trunc(inline);
    const r = await this.query<{ uuid: string | null; file: [number, string | null, string] | null }>(
      `SELECT json_object('uuid', c.uuid,
        'file', (SELECT json_array(b.size,
             CASE WHEN b.size BETWEEN 0 AND ${max} THEN hex(content(f.uuid)) END, f.uuid)
           FROM files_of_checkin(c.uuid) f JOIN blob b ON b.uuid = f.uuid
           WHERE f.filename = ${sqlText(p)}))
       FROM (SELECT NULL) LEFT JOIN ${this.ci(rev)} c`,
    );
    if (r === undefined || r.uuid === null) throw new ReadNotFound('revision');
    if (r.file === null) throw new ReadNotFound('path');
    const [size, hex, object] = r.file;
    if (hex !== null) {
      const data = Buffer.from(hex, 'hex');
      return { commit: r.uuid, size: data.length, data, object };
    }
    // -1: a phantom (content not in this repository); `fossil cat` fails on it
    return { commit: r.uuid, size: size < 0 ? undefined : size, object };
  }

  private entry(row: Row): LogEntry {
    return {
      id: row.uuid,
      short_id: row.uuid.slice(0, FOSSIL.shortId),
      author: row.user,
      date: julianIso(row.mtime),
      ...splitMessage(row.comment),
      branch: row.branch ?? '',
      tags: row.tags,
    };
  }

  /** Check-in ancestors newest first (timeline order), cached per check-in: history is immutable. */
  private async order(rid: number): Promise<number[]> {
    const hit = this.orders.get(rid);
    if (hit !== undefined) return hit;
    const ids = await this.query<number[]>(
      `WITH RECURSIVE anc(rid) AS (SELECT ${rid} UNION SELECT p.pid FROM plink p JOIN anc ON p.cid = anc.rid)
       SELECT json_group_array(rid) FROM (SELECT anc.rid AS rid FROM anc JOIN event e ON e.objid = anc.rid
         ORDER BY e.mtime DESC, anc.rid DESC)`,
    );
    const list = ids ?? [];
    this.orders.set(rid, list);
    return list;
  }

  private async rows(rids: number[]): Promise<Row[]> {
    if (rids.length === 0) return [];
    const rows =
      (await this.query<Row[]>(
        `SELECT json_group_array(${ENTRY_JSON}) FROM event e JOIN blob b ON b.rid = e.objid
         WHERE e.objid IN (${rids.map((r) => String(Math.trunc(r))).join(',')})`,
      )) ?? [];
    const byRid = new Map(rows.map((r) => [r.rid, r]));
    return rids.flatMap((r) => {
      const row = byRid.get(r);
      return row === undefined ? [] : [row];
    });
  }

  async log(rev: string, page: number, perPage: number): Promise<LogPage> {
    const { rid } = await this.rid(rev);
    const order = await this.order(rid);
    const rows = await this.rows(order.slice((page - 1) * perPage, page * perPage));
    return { entries: rows.map((r) => this.entry(r)), total: order.length };
  }

  /** Branches and tags (Fossil has no bookmarks), in byte order (SQLite's binary collation). */
  async refs(
    type: RefType,
    page: number,
    perPage: number,
    defaultBranch: string,
  ): Promise<RefPage | undefined> {
    if (type === 'bookmark') return undefined;
    const offset = (Math.trunc(page) - 1) * Math.trunc(perPage);
    const r = await this.query<{ total: number; refs: [string, number][] }>(
      `WITH refs AS (${REF_ROWS[type]})
       SELECT json_object('total', (SELECT count(*) FROM refs),
         'refs', json((SELECT json_group_array(json_array(name, rid))
           FROM (SELECT name, rid FROM refs ORDER BY name LIMIT ${Math.trunc(perPage)} OFFSET ${offset}))))`,
    );
    const refs = r?.refs ?? [];
    const rows = new Map((await this.rows(refs.map(([, rid]) => rid))).map((row) => [row.rid, row]));
    const entries = refs.flatMap(([name, rid]) => {
      const row = rows.get(rid);
      if (row === undefined) return [];
      const e = this.entry(row);
      return [{ name, type, default: type === 'branch' && name === defaultBranch, commit: refCommit(e) }];
    });
    return { entries, total: r?.total ?? 0 };
  }

  async changeset(rev: string, limits = DEFAULT_LIMITS): Promise<Changeset> {
    const { rid } = await this.rid(rev);
    const [row] = await this.rows([rid]);
    if (row === undefined) throw new ReadNotFound('revision');
    type Change = {
      name: string;
      oldName: string | null;
      newUuid: string | null;
      oldUuid: string | null;
      newPerm: number;
      oldSize: number | null;
      newSize: number | null;
    };
    // Names, ids and sizes first; contents are read only within the caps (see cappedDiff).
    const rows =
      (await this.query<Change[]>(
        `SELECT json_group_array(json_object('name', fn.name, 'oldName', pfn.name,
            'newUuid', nb.uuid, 'oldUuid', ob.uuid, 'newPerm', m.mperm,
            'oldSize', ob.size, 'newSize', nb.size))
         FROM mlink m JOIN filename fn ON fn.fnid = m.fnid
           LEFT JOIN filename pfn ON pfn.fnid = m.pfnid
           LEFT JOIN blob nb ON nb.rid = m.fid AND m.fid > 0
           LEFT JOIN blob ob ON ob.rid = m.pid AND m.pid > 0
         WHERE m.mid = ${rid} AND NOT m.isaux`,
      )) ?? [];
    rows.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    const mode = (perm: number) => (perm === 1 ? '100755' : perm === 2 ? '120000' : '100644');
    const changes: SizedChange[] = rows
      .filter((c) => c.newUuid !== c.oldUuid || (c.oldName !== null && c.oldName !== c.name))
      .map((c) => ({
        oldPath: c.oldUuid === null ? undefined : (c.oldName ?? c.name),
        newPath: c.newUuid === null ? undefined : c.name,
        newMode: mode(c.newPerm),
        oldId: c.oldUuid ?? undefined,
        newId: c.newUuid ?? undefined,
        oldSize: c.oldUuid === null ? undefined : Math.max(0, c.oldSize ?? 0),
        newSize: c.newUuid === null ? undefined : Math.max(0, c.newSize ?? 0),
      }));
    return { ...this.entry(row), ...(await cappedDiff(changes, (ids) => this.contents(ids), limits)) };
  }
  async compare(base: string, head: string, opts: CompareOptions): Promise<Comparison> {
    const hex = /^([0-9a-f]{40}|[0-9a-f]{64})$/;
    if (!hex.test(base) || !hex.test(head)) throw new ReadNotFound('revision');
    const range = await this.range(base, head);
    const rows = await this.rows(range.ids.slice((opts.page - 1) * opts.perPage, opts.page * opts.perPage));
    const diff =
      opts.limits === undefined ? undefined : await this.treeDiff(range.mergeBase, head, opts.limits);
    return {
      mergeBase: range.mergeBase ?? undefined,
      commits: rows.map((r) => this.entry(r)),
      totalCommits: range.ids.length,
      diff,
    };
  }

  private range(base: string, head: string): Promise<FossilRange> {
    const key = `${base}...${head}`;
    const hit = this.ranges.get(key);
    if (hit !== undefined) return Promise.resolve(hit);
    return rangeOf((sql) => this.query(sql), base, head).then((r) => {
      this.ranges.set(key, r);
      return r;
    });
  }

  private treeDiff(from: string | null, to: string, limits: ContentLimits): Promise<DiffResult> {
    return treeDiff(
      (sql) => this.query(sql),
      (ids) => this.contents(ids),
      from,
      to,
      limits,
    );
  }

  /** File contents by artifact id (absent: a phantom). */
  private async contents(ids: string[]): Promise<Map<string, Buffer | undefined>> {
    const list = ids.map((id) => sqlText(id)).join(', ');
    const got =
      (await this.query<Record<string, string | null>>(
        `SELECT json_group_object(b.uuid, hex(content(b.uuid))) FROM blob b WHERE b.uuid IN (${list})`,
      )) ?? {};
    return new Map(ids.map((id) => [id, got[id] == null ? undefined : Buffer.from(got[id], 'hex')]));
  }
}
