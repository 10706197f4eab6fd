import { describe, expect, test } from '@jest/globals';
import { createLogger, type LogOutput } from '../../src/telemetry/logger.ts';

/** A log output that collects what is written; `isTTY` as a terminal's stdout has it. */
function output(isTTY: boolean): LogOutput & { text: () => string } {
  const chunks: string[] = [];
  return { isTTY, write: (t: string) => chunks.push(t), text: () => chunks.join('') };
}

describe('log format', () => {
  test('when the output is not a terminal, then each line is one JSON object', () => {
    const out = output(false);
    createLogger('info', { output: out }).info({ port: 3000 }, 'Triad listening');
    const line = JSON.parse(out.text()) as Record<string, unknown>;
    expect(line).toMatchObject({ level: 30, service: 'triad', port: 3000, msg: 'Triad listening' });
  });

  test('when the output is a terminal, then a line reads as time, level, message and fields', () => {
    const out = output(true);
    const log = createLogger('debug', { output: out });
    log.info({ url: 'http://localhost:3000', port: 3000, note: 'two words', empty: '' }, 'Triad listening');
    log.debug('quiet');
    expect(out.text()).not.toContain('{');
    const plain = out.text().replace(new RegExp(`${String.fromCharCode(27)}\\[\\d+m`, 'g'), '');
    expect(plain.split('\n')).toEqual([
      expect.stringMatching(
        /^\d\d:\d\d:\d\d\.\d{3} INFO {2}Triad listening url=http:\/\/localhost:3000 port=3000 note="two words" empty=""$/,
      ),
      expect.stringMatching(/^\d\d:\d\d:\d\d\.\d{3} DEBUG quiet$/),
      '',
    ]);
  });

  test('an error shows its message and stack under the line', () => {
    const out = output(false);
    createLogger('info', { output: out, format: 'pretty' }).error(
      { err: new Error('disk full') },
      'write failed',
    );
    const [head, stack] = out.text().split('\n');
    expect(head).toMatch(/ ERROR write failed$/);
    expect(stack).toBe('    Error: disk full');
    expect(out.text()).toMatch(/\n {8}at /);
  });

  test('LOG_FORMAT=json on a terminal keeps JSON', () => {
    const out = output(true);
    createLogger('info', { output: out, format: 'json' }).warn('careful');
    expect(JSON.parse(out.text())).toMatchObject({ level: 40, msg: 'careful' });
  });
});
