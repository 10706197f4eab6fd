import { isIP } from 'node:net';
import { z } from 'zod';

/** The HTTP front settings read from the environment (config.ts): trusted proxies and CORS origins. */

/** `false`, `true`, a hop count, or a comma list of proxy addresses/CIDRs (or loopback, linklocal, uniquelocal). */
export const trustProxy = z.string().transform((v, ctx): boolean | number | string => {
  const t = v.trim().toLowerCase();
  if (t === 'false' || t === '0' || t === 'no') return false;
  if (t === 'true' || t === 'yes') return true;
  if (/^\d+$/.test(t)) return Number(t);
  const items = t.split(',').map((x) => x.trim());
  const okItem = (x: string) => {
    if (['loopback', 'linklocal', 'uniquelocal'].includes(x)) return true;
    const [addr = '', bits, ...more] = x.split('/');
    const family = isIP(addr);
    if (family === 0 || more.length > 0) return false;
    return bits === undefined || (/^\d+$/.test(bits) && Number(bits) <= (family === 4 ? 32 : 128));
  };
  if (items.every(okItem)) return items.join(',');
  ctx.addIssue({
    code: 'custom',
    message: 'must be false, true, a hop count or a comma list of addresses/CIDRs',
  });
  return z.NEVER;
});

/** A comma list of web origins (`https://app.example`), each as browsers send it in `Origin`. */
export const corsOrigins = z.string().transform((v, ctx): string[] => {
  const items = v
    .split(',')
    .map((x) => x.trim())
    .filter((x) => x !== '');
  const origins: string[] = [];
  for (const item of items) {
    const origin = /^https?:\/\/[^/?#\s]+\/?$/i.test(item) ? URL.parse(item)?.origin : undefined;
    if (origin === undefined || origin === 'null') {
      ctx.addIssue({ code: 'custom', message: `${item}: an origin is scheme://host[:port], without a path` });
      return z.NEVER;
    }
    origins.push(origin);
  }
  return origins;
});
