import { describe, expect, test } from '@jest/globals';
import {
  aboveMaximum,
  bytesQuantity,
  parseQuantity,
  quantityNanos,
  quantityProblem,
} from '../../src/pipelines/quantity.ts';
import { parsePipelineFile } from '../../src/pipelines/pipeline-file.ts';

describe('Kubernetes quantities', () => {
  test.each([
    ['500m', 0.5],
    ['2', 2],
    ['0.5', 0.5],
    ['.5', 0.5],
    ['1k', 1000],
    ['1Ki', 1024],
    ['512Mi', 512 * 2 ** 20],
    ['1.5Gi', 1.5 * 2 ** 30],
    ['2G', 2e9],
    ['1e3', 1000],
    ['1E-3', 0.001],
    ['100n', 1e-7],
  ])('%s is %d', (text, value) => {
    expect(parseQuantity(text)).toBe(value);
  });

  test.each([[''], ['.'], ['-1'], ['1 Gi'], ['1gi'], ['1GB'], ['Gi'], ['1.2.3'], ['1e'], ['0x10']])(
    '%j is not a quantity',
    (text) => {
      expect(parseQuantity(text)).toBeUndefined();
    },
  );

  test('equal amounts written differently compare equal, exactly', () => {
    expect(quantityNanos('1.1')).toBe(quantityNanos('1100m'));
    expect(quantityNanos('1Gi')).toBe(quantityNanos('1073741824'));
    expect(quantityNanos('0.001')).toBe(quantityNanos('1m'));
  });

  test('bytes read as the shortest exact binary quantity', () => {
    expect([4 * 2 ** 30, 1536 * 2 ** 20, 2 ** 10, 1000].map(bytesQuantity)).toEqual([
      '4Gi',
      '1536Mi',
      '1Ki',
      '1000',
    ]);
  });

  test('cpu needs at least a millicore, memory whole bytes', () => {
    expect(quantityProblem('cpu', '100m')).toBeUndefined();
    expect(quantityProblem('cpu', '0.1m')).toBe('must be at least 1m (one thousandth of a CPU)');
    expect(quantityProblem('cpu', 'lots')).toBe('must be a Kubernetes quantity such as 500m or 2');
    expect(quantityProblem('memory', '512Mi')).toBeUndefined();
    expect(quantityProblem('memory', '500m')).toBe('must be a whole number of bytes such as 512Mi or 2Gi');
    expect(quantityProblem('memory', '0')).toBe('must be a whole number of bytes such as 512Mi or 2Gi');
  });
});

describe('a step against the pool maximum', () => {
  test('a step within the maximum, or asking for nothing, or under a pool without one, fits', () => {
    expect(
      aboveMaximum('build', { cpu: '1', memory: '4Gi' }, { cpu: '1000m', memory: '4096Mi' }),
    ).toBeUndefined();
    expect(aboveMaximum('build', {}, { cpu: '1', memory: '1Gi' })).toBeUndefined();
    expect(aboveMaximum('build', { cpu: '64', memory: '1Ti' }, {})).toBeUndefined();
  });

  test('a step above names itself, the resource, its value and the maximum', () => {
    expect(aboveMaximum('build', { memory: '8Gi' }, { memory: '4Gi' })).toBe(
      "step build asks for memory 8Gi, above this pool's maximum 4Gi (spec.steps.maxResources)",
    );
    expect(aboveMaximum('test', { cpu: '2001m', memory: '1Gi' }, { cpu: '2', memory: '2Gi' })).toBe(
      "step test asks for cpu 2001m, above this pool's maximum 2 (spec.steps.maxResources)",
    );
  });
});

describe('resources in the pipeline file', () => {
  const file = (resources: string) =>
    `steps:\n  - name: a\n    image: alpine\n    commands: [make]\n    resources:\n${resources}`;

  test('cpu and memory are kept as written, numbers too', () => {
    const r = parsePipelineFile(file('      cpu: 500m\n      memory: 2Gi\n'));
    expect(r.ok && r.file.steps[0]!.resources).toEqual({ cpu: '500m', memory: '2Gi' });
    const n = parsePipelineFile(file('      cpu: 1.5\n'));
    expect(n.ok && n.file.steps[0]!.resources).toEqual({ cpu: '1.5' });
    const none = parsePipelineFile('steps:\n  - name: a\n    image: alpine\n    commands: [make]\n');
    expect(none.ok && none.file.steps[0]!.resources).toBeUndefined();
  });

  test.each([
    [
      '      cpu: 500m\n      memory: 2GB\n',
      '.pipeline.yml line 7 (steps[0].resources.memory): must be a Kubernetes quantity such as 512Mi or 2Gi',
    ],
    [
      '      cpu: two\n',
      '.pipeline.yml line 6 (steps[0].resources.cpu): must be a Kubernetes quantity such as 500m or 2',
    ],
    [
      '      memroy: 1Gi\n',
      '.pipeline.yml line 6 (steps[0].resources): unknown key "memroy" (did you mean "memory")',
    ],
    [
      '      storage: 1Gi\n',
      '.pipeline.yml line 6 (steps[0].resources): unknown key "storage" (known keys: cpu, memory)',
    ],
    [
      '      memory: 1.5\n',
      '.pipeline.yml line 6 (steps[0].resources.memory): must be a whole number of bytes such as 512Mi or 2Gi',
    ],
  ])('%j is an error naming the line and the field', (resources, error) => {
    expect(parsePipelineFile(file(resources))).toEqual({ ok: false, error });
  });
});
