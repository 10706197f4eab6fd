import { describe, expect, test } from '@jest/globals';
import { InvalidRefName } from '../../src/vcs/ops.ts';
import { BOB, OPS_BASE, opsSuite } from '../helpers/vcs-ops.ts';
import { ok } from '../helpers/vcs.ts';

/** What only git has; the cases every kind has are in vcs-ops.test.ts. */
describe('git operations', () => {
  const c = opsSuite('git', OPS_BASE);

  test('createTag: lightweight and annotated tags, tag_exists, not_found, invalid names', async () => {
    const { fx, ops, base } = c;
    const t = await c.line('t-tag');
    expect(await ops.createTag(fx.srv, { name: 'v1.0', target: 't-tag', author: BOB })).toEqual({
      kind: 'created',
      name: 'v1.0',
      commit: t,
    });
    expect(await ok('git', ['-C', fx.srv, 'cat-file', '-t', 'refs/tags/v1.0'], fx.root)).toBe('commit\n');
    expect(
      await ops.createTag(fx.srv, {
        name: 'v1.1',
        target: base.slice(0, 10),
        message: 'Release 1.1',
        author: BOB,
      }),
    ).toEqual({
      kind: 'created',
      name: 'v1.1',
      commit: base,
    });
    const tagObj = await ok('git', ['-C', fx.srv, 'cat-file', '-p', 'refs/tags/v1.1'], fx.root);
    expect(tagObj).toContain(`object ${base}`);
    expect(tagObj).toContain('tagger Bob Builder <bob@example.test>');
    expect(tagObj).toContain('Release 1.1');
    expect(await ops.createTag(fx.srv, { name: 'v1.0', target: base, author: BOB })).toEqual({
      kind: 'tag_exists',
      commit: t,
    });
    expect(await ops.createTag(fx.srv, { name: 'v2', target: 'no-such-branch', author: BOB })).toEqual({
      kind: 'not_found',
    });
    expect(await ops.createTag(fx.srv, { name: 'v3', target: 'v1.1', author: BOB })).toMatchObject({
      kind: 'created',
      commit: base,
    });
    expect(await ops.resolveCommit(fx.srv, t)).toBe(t);
    expect(await ops.resolveCommit(fx.srv, 'HEAD~1')).toBeUndefined();
    for (const name of ['-v1', 'v 1', 'v1..2', 'v1.lock', 'a:b', '@', 'v1^', '']) {
      await expect(ops.createTag(fx.srv, { name, target: base, author: BOB })).rejects.toThrow(
        InvalidRefName,
      );
    }
    await expect(ops.createTag(fx.srv, { name: 'v1.0/x', target: base, author: BOB })).rejects.toThrow(
      InvalidRefName,
    );
  });
});
