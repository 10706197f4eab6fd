import { randomBytes, createHash } from 'node:crypto';
import { createWriteStream, mkdirSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';

/**
 * Raw downloads' bytes kept as plain files, so a file downloaded again is copied from the disk
 * (a large one by `cat`, straight to the connection) instead of being read out of the store again
 * (Git and Fossil inflate it, Mercurial rebuilds it from deltas): a 60 MB file from Git takes
 * about half the time. An entry is named by the repository's storage path and the id of the file's
 * content in its store (`RawFile.object`), which always names the same bytes, so an entry never
 * goes stale; a repository's entries are in a directory of its own, removed when it is deleted.
 *
 * A file is written to the cache after a download of it ended, by a second read of the store in
 * the background (one at a time; a file asked for while another is being written waits for its
 * next download), flushed to the disk before it gets its name. At most `maxBytes` are kept, the
 * least recently used going first; a file above a quarter of that is never kept, nor one that
 * would leave less than a tenth of the file system free. A cache that fails is passed by. The
 * index lives in this process (filled from the directory when first used, oldest file first), so
 * the directory should be this instance's own; a file found gone or of another size when asked
 * for is dropped and read from the store again.
 */
export class RawCache {
  private readonly dir: string;
  private readonly maxBytes: number;
  /** Entries by name, least recently used first, with their sizes. */
  private readonly entries = new Map<string, number>();
  private total = 0;
  private loaded: Promise<void> | undefined;
  /** The write under way, if any. */
  private writing: Promise<void> | undefined;

  constructor(opts: { dir: string; maxBytes: number }) {
    this.dir = opts.dir;
    this.maxBytes = opts.maxBytes;
    // Made now, at start: the CI sandbox hides the directories that exist when it starts.
    try {
      mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    } catch {
      // the cache stays empty: every download reads the store
    }
  }

  /** Whether a file of `size` bytes would be kept. */
  keeps(size: number | undefined): boolean {
    return size === undefined || size <= this.maxBytes / 4;
  }

  /**
   * The kept file for a content id of a repository, as a path and its size (which must equal
   * `size` when that is known), marked as used; undefined when there is none, or when the cache
   * cannot be read (a download then reads the store, as without the cache).
   */
  async get(
    repoPath: string,
    object: string,
    size: number | undefined,
  ): Promise<{ file: string; size: number } | undefined> {
    try {
      return await this.lookUp(entryName(repoPath, object), size);
    } catch {
      return undefined;
    }
  }

  private async lookUp(
    name: string,
    size: number | undefined,
  ): Promise<{ file: string; size: number } | undefined> {
    await this.load();
    const have = this.entries.get(name);
    if (have === undefined) return undefined;
    const file = path.join(this.dir, name);
    // (the file may be gone or changed: another server sharing the directory, a cleaner)
    const st = await fs.lstat(file).catch(() => undefined);
    if ((size !== undefined && have !== size) || st?.isFile() !== true || st.size !== have) {
      await this.drop(name);
      return undefined;
    }
    this.entries.delete(name);
    this.entries.set(name, have);
    // the order survives a restart: the index is rebuilt by modification time
    const now = new Date();
    void fs.utimes(file, now, now).catch(() => undefined);
    return { file, size: have };
  }

  /**
   * Keeps a file's bytes, read by `open` (`size` of them when known), unless it is kept already,
   * too large, or another file is being written. Runs in the background; failures only leave the
   * file out.
   */
  put(
    repoPath: string,
    object: string,
    size: number | undefined,
    open: () => Promise<AsyncIterable<Buffer>>,
  ): void {
    if (this.writing !== undefined || !this.keeps(size)) return;
    this.writing = this.write(entryName(repoPath, object), size, open)
      .catch(() => undefined)
      .finally(() => (this.writing = undefined));
  }

  /** Removes every kept file of a repository (deleted: its files must not outlive it). */
  async forget(repoPath: string): Promise<void> {
    const key = repoKey(repoPath);
    await this.settled(); // a write of its file under way would put it back
    for (const name of [...this.entries.keys()]) if (name.startsWith(`${key}/`)) await this.drop(name);
    await fs.rm(path.join(this.dir, key), { recursive: true, force: true });
  }

  /** Resolves once the write under way, if any, has ended (kept or not). */
  async settled(): Promise<void> {
    await this.writing;
  }

  private async write(
    name: string,
    size: number | undefined,
    open: () => Promise<AsyncIterable<Buffer>>,
  ): Promise<void> {
    await this.load();
    if (this.entries.has(name)) return;
    await fs.mkdir(this.dir, { recursive: true, mode: 0o700 }); // (removed since it was read)
    const disk = await fs.statfs(this.dir);
    // never the file system's last tenth (it holds the repositories and the database by default)
    if ((disk.bavail - disk.blocks / 10) * disk.bsize < (size ?? this.maxBytes / 4)) return;
    const tmp = path.join(this.dir, `${TMP}${randomBytes(6).toString('hex')}`);
    try {
      await pipeline(Readable.from(await open()), createWriteStream(tmp, { flags: 'wx', mode: 0o600 }));
      const fh = await fs.open(tmp, 'r');
      let written: number;
      try {
        // on the disk before it has its name: after a crash, an entry is whole or absent
        await fh.sync();
        written = (await fh.stat()).size;
      } finally {
        await fh.close();
      }
      if ((size !== undefined && written !== size) || !this.keeps(written)) throw new Error('not kept');
      await this.makeRoom(written);
      await fs.mkdir(path.join(this.dir, path.dirname(name)), { recursive: true, mode: 0o700 });
      await fs.rename(tmp, path.join(this.dir, name));
      this.entries.set(name, written);
      this.total += written;
    } catch (e) {
      await fs.rm(tmp, { force: true });
      throw e;
    }
  }

  private async makeRoom(bytes: number): Promise<void> {
    for (const name of this.entries.keys()) {
      if (this.total + bytes <= this.maxBytes) return;
      await this.drop(name);
    }
  }

  private async drop(name: string): Promise<void> {
    const size = this.entries.get(name);
    if (size === undefined) return;
    this.entries.delete(name);
    this.total -= size;
    await fs.rm(path.join(this.dir, name), { force: true });
  }

  /**
   * Reads the directory once: entries oldest first; files a write left half done are removed. A
   * directory that is not this user's, or that others may write to, is not used.
   */
  private load(): Promise<void> {
    this.loaded ??= (async () => {
      await fs.mkdir(this.dir, { recursive: true, mode: 0o700 });
      const own = await fs.lstat(this.dir);
      if (!own.isDirectory() || own.uid !== process.getuid?.() || (own.mode & 0o022) !== 0)
        throw new Error(`${this.dir}: not a directory of this user's that only it may write to`);
      const found: { name: string; size: number; at: number }[] = [];
      for (const top of await fs.readdir(this.dir)) {
        if (top.startsWith(TMP)) {
          await fs.rm(path.join(this.dir, top), { force: true });
          continue;
        }
        if (!KEY.test(top)) continue;
        const sub = path.join(this.dir, top);
        if ((await fs.lstat(sub)).isDirectory() !== true) continue;
        for (const name of await fs.readdir(sub)) {
          const st = await fs.lstat(path.join(sub, name)).catch(() => undefined);
          if (KEY.test(name) && st?.isFile() === true)
            found.push({ name: `${top}/${name}`, size: st.size, at: st.mtimeMs });
        }
      }
      found.sort((a, b) => a.at - b.at);
      for (const f of found) {
        this.entries.set(f.name, f.size);
        this.total += f.size;
      }
      await this.makeRoom(0);
    })();
    this.loaded.catch(() => (this.loaded = undefined));
    return this.loaded;
  }
}

const TMP = '.writing-';
const KEY = /^[0-9a-f]{64}$/;

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/** A repository's entries are in a directory of its own, named by its storage path. */
const repoKey = (repoPath: string) => sha256(repoPath);

/** `<repository key>/<content key>`, relative to the cache's directory. */
function entryName(repoPath: string, object: string): string {
  return `${repoKey(repoPath)}/${sha256(object)}`;
}
