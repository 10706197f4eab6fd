/** Room kept for the marker line between the head and the tail of a truncated log. */
const MARKER_ROOM = 200;

/**
 * Keeps a step log under `maxBytes`: the first part goes out as it comes; once the head is full,
 * only the last `tail` bytes are kept, and at the end a marker line saying how many bytes were
 * left out is written before that tail. So a log that overflows keeps both its beginning and its
 * end (where the error usually is). Without a limit everything passes through.
 */
export class LogLimiter {
  private readonly sink: (d: Buffer) => void;
  private readonly max: number | undefined;
  private readonly headMax: number;
  private readonly tailMax: number;
  private head = 0;
  private tail: Buffer[] = [];
  private tailBytes = 0;
  private omitted = 0;

  constructor(sink: (d: Buffer) => void, maxBytes: number | undefined) {
    this.sink = sink;
    this.max = maxBytes;
    const max = maxBytes ?? Number.MAX_SAFE_INTEGER;
    this.tailMax = Math.min(1024 * 1024, Math.floor(max / 4));
    this.headMax = Math.max(0, max - this.tailMax - MARKER_ROOM);
  }

  get truncated(): boolean {
    return this.omitted > 0;
  }

  write(data: Buffer): void {
    if (this.max === undefined) return this.sink(data);
    let d = data;
    if (this.head < this.headMax) {
      const part = d.subarray(0, this.headMax - this.head);
      this.head += part.length;
      this.sink(part);
      d = d.subarray(part.length);
    }
    if (d.length === 0) return;
    this.tail.push(Buffer.from(d));
    this.tailBytes += d.length;
    // nothing is cut while the whole output still fits
    if (this.omitted === 0 && this.head + this.tailBytes <= this.max) return;
    while (this.tailBytes > this.tailMax) {
      const first = this.tail[0]!;
      const excess = this.tailBytes - this.tailMax;
      if (first.length <= excess) {
        this.tail.shift();
        this.tailBytes -= first.length;
        this.omitted += first.length;
      } else {
        this.tail[0] = first.subarray(excess);
        this.tailBytes -= excess;
        this.omitted += excess;
      }
    }
  }

  /** Writes what is held back (marker and tail); call once, after the last write. */
  finish(): void {
    if (this.omitted > 0) {
      this.sink(
        Buffer.from(
          `\n[triad] log truncated: ${this.omitted} bytes omitted here (step log limit ${this.max} bytes)\n`,
        ),
      );
    }
    for (const b of this.tail) this.sink(b);
    this.tail = [];
    this.tailBytes = 0;
  }
}
