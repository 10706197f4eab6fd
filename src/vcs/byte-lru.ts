/**
 * A least-recently-used map bounded by the total size of its values (each value's size told by
 * `sizeOf`, about its bytes in memory): the highlighted files, the parsed changesets and compares are kept
 * in one each. A value larger than the whole bound is not kept.
 */
export class ByteLru<K, V> {
  private readonly map = new Map<K, { v: V; size: number }>();
  private total = 0;
  private readonly max: number;
  private readonly sizeOf: (v: V) => number;

  constructor(maxBytes: number, sizeOf: (v: V) => number) {
    this.max = maxBytes;
    this.sizeOf = sizeOf;
  }

  get(k: K): V | undefined {
    const e = this.map.get(k);
    if (e === undefined) return undefined;
    this.map.delete(k);
    this.map.set(k, e);
    return e.v;
  }

  set(k: K, v: V): void {
    const size = this.sizeOf(v);
    const old = this.map.get(k);
    if (old !== undefined) {
      this.map.delete(k);
      this.total -= old.size;
    }
    if (size > this.max) return;
    this.map.set(k, { v, size });
    this.total += size;
    for (const [key, e] of this.map) {
      if (this.total <= this.max) break;
      this.map.delete(key);
      this.total -= e.size;
    }
  }

  /** The total size of the values kept. */
  get bytes(): number {
    return this.total;
  }
}
