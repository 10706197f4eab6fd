import { describe, expect, test } from '@jest/globals';
import { isoTime } from '../../src/db/sql.ts';

describe('timestamps as API text', () => {
  test('when PostgreSQL gives a UTC timestamp, then it becomes ISO 8601 with milliseconds, whatever its fraction', () => {
    expect(isoTime('2026-11-25 15:20:07+00')).toBe('2026-11-25T15:20:07.000Z');
    expect(isoTime('2026-11-25 15:20:07.1+00')).toBe('2026-11-25T15:20:07.100Z');
    expect(isoTime('2026-11-25 15:20:07.12+00')).toBe('2026-11-25T15:20:07.120Z');
    expect(isoTime('2026-11-25 15:20:07.123+00')).toBe('2026-11-25T15:20:07.123Z');
    // microseconds are cut, never rounded up (a time is never moved into the next millisecond)
    expect(isoTime('2026-11-25 15:20:07.999999+00')).toBe('2026-11-25T15:20:07.999Z');
    expect(isoTime('0020-02-29 00:00:00+00')).toBe('0020-02-29T00:00:00.000Z');
  });

  test('when the text has another offset, a year beyond four digits, an era or a T, then it is still converted to UTC', () => {
    expect(isoTime('2026-01-01 00:30:00.5+01')).toBe('2025-12-31T23:30:00.500Z');
    expect(isoTime('2026-01-01 00:00:00-05:30')).toBe('2026-01-01T05:30:00.000Z');
    expect(isoTime('1900-01-01 00:00:00+00:09:21')).toBe('1899-12-31T23:50:39.000Z');
    expect(isoTime('12026-01-01 00:00:00+00')).toBe('+012026-01-01T00:00:00.000Z');
    expect(isoTime('0044-03-15 12:00:00+00 BC')).toBe('-000043-03-15T12:00:00.000Z');
    expect(isoTime('2026-11-25T15:20:07Z')).toBe('2026-11-25T15:20:07.000Z');
    expect(isoTime(new Date(Date.UTC(2026, 10, 25, 15, 20, 7, 42)))).toBe('2026-11-25T15:20:07.042Z');
  });

  test('when many UTC timestamps are converted, then the text rewrite agrees with the date arithmetic', () => {
    for (let i = 0; i < 2000; i++) {
      const ms = Date.UTC(
        1970 + (i % 60),
        i % 12,
        1 + (i % 28),
        i % 24,
        (i * 7) % 60,
        (i * 13) % 60,
        i % 1000,
      );
      const d = new Date(ms);
      const micro = String(d.getUTCMilliseconds() * 1000 + (i % 1000))
        .padStart(6, '0')
        .replace(/0+$/, '');
      const text = `${d.toISOString().slice(0, 10)} ${d.toISOString().slice(11, 19)}${micro === '' ? '' : `.${micro}`}+00`;
      expect(isoTime(text)).toBe(d.toISOString());
    }
  });
});
