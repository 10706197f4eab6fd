/**
 * CSRF rules of every unsafe web request (DESIGN section 9): the browser says the request comes
 * from this origin (`Sec-Fetch-Site: same-origin`, or, from a browser that does not send fetch
 * metadata, an `Origin` equal to the base URL's), and a signed-in user's form carries the
 * session's form token. Either alone would do against most attacks; both are required.
 */
import { timingSafeEqual } from 'node:crypto';
import type { Request } from 'express';
import type { FormState } from './context.ts';

/** Why the request is refused (a sentence for the form shown again), or undefined when it passes. */
export function csrfRefusal(
  req: Request,
  baseUrl: string,
  formToken: string | undefined,
  values: FormState['values'],
): string | undefined {
  const site = req.headers['sec-fetch-site'];
  const origin = req.headers.origin;
  const sameOrigin =
    typeof site === 'string'
      ? site === 'same-origin'
      : origin !== undefined && origin === new URL(baseUrl).origin;
  if (!sameOrigin) {
    return 'This form was sent from another site, so nothing was changed. If you sent it, send it again from this page.';
  }
  if (formToken === undefined) return undefined;
  const sent = values._csrf;
  if (typeof sent !== 'string' || !sameSecret(sent, formToken)) {
    return 'This form is out of date (you signed in again since it was shown), so nothing was changed. Check it and send it again.';
  }
  return undefined;
}

function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
