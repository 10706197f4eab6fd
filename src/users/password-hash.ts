/**
 * Password hashing with argon2id from `node:crypto` (Node 24), stored in the PHC string form
 * `$argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash>` (base64 without padding), so the parameters
 * travel with each hash and can be raised later without breaking stored ones.
 */
import { argon2, randomBytes, timingSafeEqual } from 'node:crypto';

/** OWASP's argon2id minimum: 19 MiB of memory, 2 passes, 1 lane (about 35 ms here). */
const PARAMS = { memory: 19_456, passes: 2, parallelism: 1 } as const;
const TAG_BYTES = 32;
const SALT_BYTES = 16;

type Parsed = { memory: number; passes: number; parallelism: number; salt: Buffer; hash: Buffer };

function derive(password: string, p: Omit<Parsed, 'hash'>, tagLength: number): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    argon2(
      'argon2id',
      {
        message: Buffer.from(password, 'utf8'),
        nonce: p.salt,
        memory: p.memory,
        passes: p.passes,
        parallelism: p.parallelism,
        tagLength,
      },
      (err, key) => (err === null ? resolve(key) : reject(err)),
    ),
  );
}

const b64 = (b: Buffer) => b.toString('base64').replace(/=+$/, '');

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(SALT_BYTES);
  const hash = await derive(password, { ...PARAMS, salt }, TAG_BYTES);
  const { memory: m, passes: t, parallelism: p } = PARAMS;
  return `$argon2id$v=19$m=${m},t=${t},p=${p}$${b64(salt)}$${b64(hash)}`;
}

function parse(encoded: string): Parsed | undefined {
  const m = /^\$argon2id\$v=19\$m=(\d+),t=(\d+),p=(\d+)\$([A-Za-z0-9+/]+)\$([A-Za-z0-9+/]+)$/.exec(encoded);
  if (m === null) return undefined;
  return {
    memory: Number(m[1]),
    passes: Number(m[2]),
    parallelism: Number(m[3]),
    salt: Buffer.from(m[4]!, 'base64'),
    hash: Buffer.from(m[5]!, 'base64'),
  };
}

/** A hash no password matches, checked when a sign-in names nobody (the same work either way). */
let decoy: Promise<string> | undefined;

/**
 * Does `password` match `encoded`? Compared in constant time. With `encoded` undefined (no such
 * user, or no password set) the same work is done against a decoy and the answer is false, so the
 * time taken does not tell whether the account exists.
 */
export async function verifyPassword(password: string, encoded: string | undefined | null): Promise<boolean> {
  const parsed =
    parse(encoded ?? '') ?? parse(await (decoy ??= hashPassword(randomBytes(18).toString('hex'))));
  if (parsed === undefined) return false;
  const got = await derive(password, parsed, parsed.hash.length);
  return timingSafeEqual(got, parsed.hash) && encoded !== undefined && encoded !== null;
}
