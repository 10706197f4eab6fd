import { describe, expect, test } from '@jest/globals';
import { carriesArtifacts, errorAnswer, fossilize, payload } from '../../src/vcs/fossil/protect.ts';

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
