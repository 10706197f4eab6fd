import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { backoff, HttpError, retryable, sleep } from './client.ts';

export const MAX_CHUNK = 1024 * 1024;

export type ShipFn = (offset: number, chunk: Buffer) => Promise<number>;

export type ShipperOptions = {
  /** Bytes held in memory before new output spills to a temporary file. */
  memoryLimit?: number;
  /** How long output may wait to be batched into a chunk. */
  flushIntervalMs?: number;
  maxChunk?: number;
  tmpDir?: string;
  /** Acknowledged bytes kept to send again when the server turns out to have lost them (409). */
  historyLimit?: number;
  onShipped?: (bytes: number) => void;
  onError?: (e: unknown) => void;
  /** Aborted: stop retrying (what is not acknowledged yet is given up). */
  signal?: AbortSignal;
};

/**
 * Ships one step's output to the server in order, in chunks of at most 1 MiB cut at a line
 * boundary when the chunk holds one, each with its byte offset, retrying every chunk until the
 * server acknowledges it (so a server outage loses nothing). Memory stays bounded: beyond
 * `memoryLimit` unsent output goes to a temporary file and is read back in order.
 */
export class LogShipper {
  private readonly ship: ShipFn;
  private readonly memoryLimit: number;
  private readonly flushIntervalMs: number;
  private readonly maxChunk: number;
  private readonly tmpDir: string;
  private readonly opts: ShipperOptions;

  private mem: Buffer[] = [];
  private memBytes = 0;
  private spill: { file: string; handle: fs.FileHandle; written: number; read: number } | undefined;
  /** Every spill-file operation runs on this chain, in order. */
  private spillWrites: Promise<void> = Promise.resolve();
  /** True from the first spilled write until the spill file is drained: new output must queue behind it. */
  private spilling = false;
  private queuedSpills = 0;
  /** Bytes the server has acknowledged. */
  private acked = 0;
  /** The last acknowledged bytes (up to historyLimit), starting at offset historyStart. */
  private history: Buffer[] = [];
  private historyStart = 0;
  private historyBytes = 0;
  private closing = false;
  private wake: (() => void) | undefined;
  private readonly loop: Promise<void>;

  constructor(ship: ShipFn, opts: ShipperOptions = {}) {
    this.ship = ship;
    this.opts = opts;
    this.memoryLimit = opts.memoryLimit ?? 8 * 1024 * 1024;
    this.flushIntervalMs = opts.flushIntervalMs ?? 250;
    this.maxChunk = opts.maxChunk ?? MAX_CHUNK;
    this.tmpDir = opts.tmpDir ?? os.tmpdir();
    // Never an unhandled rejection (e.g. the spill file cannot be written): report and stop shipping.
    this.loop = this.run().catch((e: unknown) => this.opts.onError?.(e));
  }

  get shippedBytes(): number {
    return this.acked;
  }

  write(data: Buffer): void {
    if (data.length === 0) return;
    if (this.closing) throw new Error('log shipper is closed');
    if (this.spilling || this.memBytes + data.length > this.memoryLimit) {
      this.spilling = true;
      this.queuedSpills++;
      this.spillWrite(Buffer.from(data));
    } else {
      this.mem.push(Buffer.from(data));
      this.memBytes += data.length;
    }
    if (this.memBytes >= this.maxChunk) this.wake?.();
  }

  /** Ships everything written so far and stops; resolves when the server has acknowledged all of it. */
  async close(): Promise<void> {
    this.closing = true;
    this.wake?.();
    await this.loop;
  }

  private spillWrite(data: Buffer): void {
    this.spillWrites = this.spillWrites.then(async () => {
      if (this.spill === undefined) {
        const file = path.join(
          this.tmpDir,
          `triad-log-${process.pid}-${Date.now()}-${Math.random().toString(36).slice(2)}`,
        );
        const handle = await fs.open(file, 'w+');
        this.spill = { file, handle, written: 0, read: 0 };
      }
      await this.spill.handle.write(data, 0, data.length, this.spill.written);
      this.spill.written += data.length;
      this.queuedSpills--;
    });
  }

  /** Moves spilled bytes back into memory once memory has room. */
  private async refill(): Promise<void> {
    this.spillWrites = this.spillWrites.then(async () => {
      const s = this.spill;
      if (s === undefined || this.memBytes >= this.maxChunk) return;
      const want = Math.min(this.maxChunk * 2, s.written - s.read);
      if (want > 0) {
        const buf = Buffer.alloc(want);
        const { bytesRead } = await s.handle.read(buf, 0, want, s.read);
        s.read += bytesRead;
        this.mem.push(buf.subarray(0, bytesRead));
        this.memBytes += bytesRead;
      }
      if (s.read >= s.written && this.queuedSpills === 0) {
        this.spill = undefined;
        this.spilling = false;
        await s.handle.close();
        await fs.rm(s.file, { force: true });
      }
    });
    await this.spillWrites;
  }

  /**
   * The next chunk from memory: at most maxChunk bytes, ending after the last newline it holds.
   * Without `all`, a trailing partial line stays behind when the buffer has a newline at all.
   */
  private takeChunk(all: boolean): Buffer | undefined {
    if (this.memBytes === 0) return undefined;
    const buf = this.mem.length === 1 ? this.mem[0]! : Buffer.concat(this.mem);
    let end = Math.min(buf.length, this.maxChunk);
    if (buf.length > this.maxChunk || !all) {
      const nl = buf.lastIndexOf(0x0a, end - 1);
      if (nl >= 0) end = nl + 1;
    }
    const chunk = buf.subarray(0, end);
    const rest = buf.subarray(end);
    this.mem = rest.length > 0 ? [rest] : [];
    this.memBytes = rest.length;
    return chunk;
  }

  private idle(): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(t);
        this.wake = undefined;
        resolve();
      };
      const t = setTimeout(done, this.flushIntervalMs);
      this.wake = done;
    });
  }

  private async run(): Promise<void> {
    for (;;) {
      await this.refill();
      const backlog = this.memBytes >= this.maxChunk || this.spilling;
      if (backlog || (this.closing && this.memBytes > 0)) {
        const chunk = this.takeChunk(this.closing && !backlog);
        if (chunk !== undefined) await this.send(chunk);
        else await this.idle();
        continue;
      }
      if (this.closing && !this.spilling && this.memBytes === 0) return;
      await this.idle();
      // What waited a whole interval goes out, through its last complete line when it has one.
      if (!this.closing && this.memBytes > 0 && this.memBytes < this.maxChunk && !this.spilling) {
        await this.send(this.takeChunk(false)!);
      }
    }
  }

  private remember(chunk: Buffer): void {
    const limit = this.opts.historyLimit ?? 8 * 1024 * 1024;
    this.history.push(chunk);
    this.historyBytes += chunk.length;
    while (this.history.length > 1 && this.historyBytes - this.history[0]!.length >= limit) {
      const dropped = this.history.shift()!;
      this.historyBytes -= dropped.length;
      this.historyStart += dropped.length;
    }
  }

  /** Acknowledged bytes [from, to) from the history. */
  private historySlice(from: number, to: number): Buffer {
    const all = this.history.length === 1 ? this.history[0]! : Buffer.concat(this.history);
    return all.subarray(from - this.historyStart, to - this.historyStart);
  }

  /** The size a 409 says the server has, when the history can fill the gap from there. */
  private replayableFrom(e: unknown, offset: number): number | undefined {
    if (!(e instanceof HttpError) || e.status !== 409) return undefined;
    const size = Number(e.headers.get('x-svc-log-size') ?? NaN);
    return Number.isSafeInteger(size) && size >= this.historyStart && size < offset ? size : undefined;
  }

  /**
   * Sends the acknowledged bytes [from, to) again (the server lost them): afterwards the server
   * holds everything up to `to`. False when it cannot be done.
   */
  private async replay(from: number, to: number): Promise<boolean> {
    let at = from;
    for (let attempt = 0; at < to;) {
      const piece = this.historySlice(at, Math.min(to, at + this.maxChunk));
      try {
        await this.ship(at, piece);
        at += piece.length;
        attempt = 0;
      } catch (e) {
        this.opts.onError?.(e);
        const size = this.replayableFrom(e, at);
        if (size !== undefined) at = size;
        else if (!retryable(e) || this.opts.signal?.aborted === true) return false;
        else await sleep(backoff(attempt++, 250, 5000), this.opts.signal);
      }
    }
    return true;
  }

  private async send(chunk: Buffer): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      const offset = this.acked;
      try {
        const size = await this.ship(offset, chunk);
        this.remember(chunk);
        this.acked = Math.max(offset + chunk.length, size);
        this.opts.onShipped?.(chunk.length);
        return;
      } catch (e) {
        this.opts.onError?.(e);
        if (e instanceof HttpError && e.status === 409) {
          // The server has less than it acknowledged (it lost the end of the log): send the
          // missing part again from the size it reports, then this chunk.
          const from = this.replayableFrom(e, offset);
          if (from !== undefined && (await this.replay(from, offset))) continue;
          this.acked = offset + chunk.length;
          return;
        }
        // the step is gone (404), the chunk is refused, or the agent is stopping: give up on it
        if (!retryable(e) || this.opts.signal?.aborted === true) return;
        await sleep(backoff(attempt, 250, 5000), this.opts.signal);
      }
    }
  }
}
