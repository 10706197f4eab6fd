import { describe, expect, test } from '@jest/globals';
import { LogLimiter } from '../../agent/log-limit.ts';

function run(max: number | undefined, writes: string[]): string {
  let out = '';
  const l = new LogLimiter((d) => (out += d.toString()), max);
  for (const w of writes) l.write(Buffer.from(w));
  l.finish();
  return out;
}

describe('step log limit on the agent', () => {
  test('without a limit, or under it, everything passes unchanged', () => {
    const text = 'x'.repeat(10_000);
    expect(run(undefined, [text, text])).toBe(text + text);
    expect(run(20_000, [text, text])).toBe(text + text);
  });

  test('over the limit: the head, a marker with the bytes left out, and the tail, within the limit', () => {
    const writes = Array.from({ length: 2000 }, (_, i) => `line ${i}\n`);
    const full = writes.join('');
    const out = run(4096, writes);
    expect(out.length).toBeLessThanOrEqual(4096);
    const m = /\n\[triad\] log truncated: (\d+) bytes omitted here \(step log limit 4096 bytes\)\n/.exec(
      out,
    )!;
    const head = out.slice(0, m.index);
    const tail = out.slice(m.index + m[0].length);
    expect(full.startsWith(head)).toBe(true);
    expect(full.endsWith(tail)).toBe(true);
    expect(tail.length).toBe(1024);
    expect(head.length + Number(m[1]) + tail.length).toBe(full.length);
  });
});
