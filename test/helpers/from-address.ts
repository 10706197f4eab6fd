import http from 'node:http';

export type Answer = { status: number; headers: http.IncomingHttpHeaders; body: any };

/**
 * One request on a new connection sent from a chosen loopback address (the whole 127.0.0.0/8
 * range is local), so tests can be several clients; a JSON body is parsed.
 */
export function requestFrom(
  base: string,
  localAddress: string,
  path: string,
  headers: Record<string, string> = {},
  method = 'GET',
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${base}${path}`, { method, localAddress, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        const json = (res.headers['content-type'] ?? '').includes('json') && text !== '';
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: json ? JSON.parse(text) : text });
      });
    });
    req.on('error', reject);
    req.end();
  });
}
