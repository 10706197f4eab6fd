import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { describe, expect, test } from '@jest/globals';
import {
  bodyCarriesArtifacts,
  carriesArtifacts,
  errorAnswer,
  fossilize,
  payload,
  restricts,
} from '../../src/vcs/fossil/protect.ts';

describe("Fossil's sync payloads for protected branches", () => {
  test('an error card escapes what a card argument cannot hold, as fossilize does', () => {
    expect(fossilize('branch a b\\c\nd\te')).toBe('branch\\sa\\sb\\\\c\\nd\\te');
  });

  test('a refusal answer decodes to one error card, compressed or not', async () => {
    const message = 'branch trunk is protected by rule "trunk": only organization owners may push to it';
    for (const type of ['application/x-fossil', 'application/x-fossil-uncompressed']) {
      const cards = (await payload(errorAnswer(message, type), type)).toString('utf8');
      expect(cards).toBe(`error ${message.replaceAll(' ', '\\s')}\n`);
    }
  });

  test('a payload with file or cfile cards sends artifacts; pull and igot cards do not', () => {
    expect(carriesArtifacts(Buffer.from('push a b\nfile 0123 10\n0123456789'))).toBe(true);
    expect(carriesArtifacts(Buffer.from('cfile 0123 10 8\nxxxxxxxx'))).toBe(true);
    expect(carriesArtifacts(Buffer.from('pull a b\nigot 0123\nclone 3 0\n'))).toBe(false);
    expect(carriesArtifacts(Buffer.from('login x y z\npragma file-thing\n'))).toBe(false);
  });
});

describe('a spooled sync body', () => {
  test('is scanned as a stream for artifact cards, compressed or not, across chunk boundaries', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'fossil-protect-'));
    try {
      const padding = `igot ${'0'.repeat(40)}\n`.repeat(20_000); // > one read chunk (64 KiB)
      const cases: [string, boolean][] = [
        [`push a b\n${padding}file 0123 3\nabc`, true],
        [`pull a b\n${padding}`, false],
      ];
      for (const [cards, expected] of cases) {
        const plain = path.join(dir, 'plain');
        await fs.writeFile(plain, cards);
        expect(await bodyCarriesArtifacts(plain, 'application/x-fossil-uncompressed')).toBe(expected);
        const packed = path.join(dir, 'packed');
        const size = Buffer.alloc(4);
        size.writeUInt32BE(cards.length);
        await fs.writeFile(packed, Buffer.concat([size, zlib.deflateSync(cards)]));
        expect(await bodyCarriesArtifacts(packed, 'application/x-fossil')).toBe(expected);
      }
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});

describe('which pushes are tried first', () => {
  const rule = { pattern: 'trunk', fast_forward_only: false, allow_deletion: true, push: 'members' as const };
  const member = { username: 'mia', role: 'member' as const };
  test('only a pusher some rule restricts (who may push, fast-forward only, deletion)', () => {
    expect(restricts({ rules: [rule], pusher: member })).toBe(false);
    expect(restricts({ rules: [rule, { ...rule, push: 'owners' }], pusher: member })).toBe(true);
    expect(restricts({ rules: [{ ...rule, fast_forward_only: true }], pusher: member })).toBe(true);
    expect(restricts({ rules: [{ ...rule, allow_deletion: false }], pusher: member })).toBe(true);
  });
});
