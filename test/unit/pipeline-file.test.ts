import { describe, expect, test } from '@jest/globals';
import { globMatch, parsePipelineFile } from '../../src/pipelines/pipeline-file.ts';

describe('branch globs', () => {
  test.each([
    ['main', 'main', true],
    ['release/*', 'release/1.x', true],
    ['release/*', 'release/1/x', false],
    ['release/**', 'release/1/x', true],
    ['*', 'a/b', false],
    ['**', 'a/b', true],
    ['v?', 'v1', true],
    ['v?', 'v12', false],
    ['fe*-x', 'feat-x', true],
  ])('%s against %s is %s', (glob, branch, expected) => {
    expect(globMatch(glob, branch)).toBe(expected);
  });

  test('a pattern built to make backtracking regexes explode answers at once', () => {
    // A backtracking matcher would not finish this in any test run (its time grows exponentially).
    expect(globMatch('*a*a*a*a*a*a*a*a*a*a*a*ab', 'a'.repeat(255))).toBe(false);
  });
});

describe('pipeline file parsing never throws', () => {
  test('an alias bomb and NUL characters are errors with a message', () => {
    const bomb = ['a: &a ["x","x"]', ...Array.from({ length: 120 }, (_, i) => `b${i}: &b${i} [*a, *a]`)].join(
      '\n',
    );
    const r = parsePipelineFile(bomb);
    expect(r.ok).toBe(false);
    const nul = parsePipelineFile('steps:\n  - name: "a\\0b"\n    image: alpine\n    commands: [x]\n');
    expect(nul).toEqual({ ok: false, error: '.pipeline.yml: NUL characters are not allowed' });
  });
});

describe('step timeout', () => {
  const file = (timeout: string) =>
    `steps:\n  - name: a\n    image: alpine\n    commands: [make]\n    timeout: ${timeout}\n`;

  test.each([
    ['30m', 1800],
    ['90s', 90],
    ['1h30m', 5400],
    ['2h', 7200],
    ['1m30s', 90],
  ])('%s is %d seconds', (text, seconds) => {
    const r = parsePipelineFile(file(text));
    expect(r.ok && r.file.steps[0]!.timeout).toBe(seconds);
  });

  test.each([['10'], ['0s'], ['abc'], ['30 minutes'], ['-5m'], ['1.5h']])(
    '%s is an error naming the field',
    (text) => {
      const r = parsePipelineFile(file(text));
      expect(r).toEqual({
        ok: false,
        error: '.pipeline.yml line 5 (steps[0].timeout): must be a duration such as 90s, 30m or 1h30m',
      });
    },
  );
});

describe('unknown keys', () => {
  test.each([
    [
      'steps:\n  - name: a\n    image: alpine\n    command: [make]\n',
      '.pipeline.yml line 4 (steps[0]): unknown key "command" (did you mean "commands")',
    ],
    [
      'step:\n  - name: a\n    image: alpine\n    commands: [make]\n',
      '.pipeline.yml line 1: unknown key "step" (did you mean "steps")',
    ],
    [
      'steps:\n  - name: a\n    image: alpine\n    commands: [make]\n    env:\n      A: b\n',
      '.pipeline.yml line 5 (steps[0]): unknown key "env" (did you mean "environment")',
    ],
    [
      'when:\n  events: push\nsteps:\n  - name: a\n    image: alpine\n    commands: [make]\n',
      '.pipeline.yml line 2 (when): unknown key "events" (did you mean "event")',
    ],
    [
      'steps:\n  - name: a\n    image: alpine\n    commands: [make]\n    when: {branches: main}\n',
      '.pipeline.yml line 5 (steps[0].when): unknown key "branches" (did you mean "branch")',
    ],
    [
      'steps:\n  - name: a\n    image: alpine\n    commands: [make]\nservices: [db]\n',
      '.pipeline.yml line 5: unknown key "services" (known keys: when, labels, steps)',
    ],
  ])('%j names the key and the nearest known one', (text, error) => {
    expect(parsePipelineFile(text)).toEqual({ ok: false, error });
  });
});
