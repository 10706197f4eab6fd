import type { IncomingMessage, RequestListener, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/**
 * Connections accepted above `TRIAD_MAX_CONNECTIONS` for health probes only (`/healthz`,
 * `/readyz`), at most `PROBE_RESERVE_PER_CLIENT` of them per client address; each answers one
 * probe and is closed, or answers 503 to anything else.
 */
export const PROBE_RESERVE = 16;
export const PROBE_RESERVE_PER_CLIENT = 2;
/** A probe connection must send its request within this (or the first-request timeout if shorter). */
const PROBE_FIRST_REQUEST_MS = 2_000;
const PROBE_PATHS = new Set(['/healthz', '/readyz']);

/** Why a connection was closed without an answer. */
export type DropReason = 'max_connections' | 'per_client' | 'first_request_timeout';

export type ConnectionLimits = {
  /** Open connections at most (then the probe reserve; beyond it closed on arrival). */
  max: number;
  /** Open connections per client address at most (0: no limit); trusted proxies are exempt. */
  perClient: number;
  /** A connection that has not sent a complete first request within this is closed. */
  firstRequestMs: number;
  /** Whether a peer address is a trusted proxy (`TRIAD_TRUST_PROXY`, as express trusts it). */
  isProxy: (address: string) => boolean;
  onDrop?: (reason: DropReason) => void;
};

type State = {
  /** The per-client key; undefined for a trusted proxy (not counted). */
  client: string | undefined;
  /** Accepted from the probe reserve. */
  probe: boolean;
  /** Closes the connection if no request arrives in time; cleared at the first request. */
  timer: NodeJS.Timeout | undefined;
  /** Requests being served on it. */
  active: number;
};

/** The peer address as a counting key (IPv4-mapped IPv6 addresses as plain IPv4). */
function clientKey(address: string): string {
  return address.startsWith('::ffff:') && address.includes('.') ? address.slice(7) : address;
}

function add(map: Map<string, number>, key: string, by: number): void {
  const n = (map.get(key) ?? 0) + by;
  if (n > 0) map.set(key, n);
  else map.delete(key);
}

/** 503 on a probe-reserve connection for anything but a probe (the server is at its cap). */
function refuse(res: ServerResponse): void {
  const body = JSON.stringify({
    error: {
      code: 'service_unavailable',
      message: 'the server is at its connection limit (TRIAD_MAX_CONNECTIONS); retry later',
    },
  });
  res.writeHead(503, {
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': Buffer.byteLength(body),
    'Retry-After': '5',
    'Cache-Control': 'no-store',
    'X-Content-Type-Options': 'nosniff',
    Connection: 'close',
  });
  res.end(body);
}

/**
 * Serves `app` on `server` within connection limits, and tracks the sockets so shutdown can close
 * every connection that is not serving a request:
 *
 * - a client address (the TCP peer; trusted proxies exempt, their clients being many) holds at
 *   most `perClient` open connections; more are closed on arrival;
 * - a connection must send a complete first request (its head) within `firstRequestMs`, or is
 *   closed: idle or trickling connections cannot pile up; after a request, the server's
 *   keep-alive timeout applies;
 * - above `max` open connections, `PROBE_RESERVE` more are accepted for `/healthz` and
 *   `/readyz` only, so orchestrators see a saturated server as alive; beyond, connections are
 *   closed on arrival (`server.maxConnections`).
 *
 * `server.closeIdleConnections()` misses sockets that never sent a request (clients such as undici
 * open a spare one after an aborted request), and a keep-alive socket that finishes its last
 * request during the drain would otherwise stay open until the drain deadline: `closeIdle` closes
 * both.
 */
export function serveConnections(
  server: Server,
  app: RequestListener,
  limits: ConnectionLimits,
): { closeIdle: () => void } {
  const states = new Map<Socket, State>();
  const perClient = new Map<string, number>();
  const probesPerClient = new Map<string, number>();
  let normal = 0;
  let probes = 0;
  let closing = false;
  server.maxConnections = limits.max + PROBE_RESERVE;
  const drop = (socket: Socket, reason: DropReason) => {
    socket.destroy();
    limits.onDrop?.(reason);
  };

  server.on('connection', (socket: Socket) => {
    const peer = socket.remoteAddress;
    if (peer === undefined) {
      socket.destroy(); // already gone
      return;
    }
    const key = clientKey(peer);
    const client = limits.isProxy(peer) ? undefined : key;
    if (client !== undefined && limits.perClient > 0 && (perClient.get(client) ?? 0) >= limits.perClient) {
      drop(socket, 'per_client');
      return;
    }
    const probe = normal >= limits.max;
    if (probe && (probes >= PROBE_RESERVE || (probesPerClient.get(key) ?? 0) >= PROBE_RESERVE_PER_CLIENT)) {
      drop(socket, 'max_connections');
      return;
    }
    const wait = probe ? Math.min(limits.firstRequestMs, PROBE_FIRST_REQUEST_MS) : limits.firstRequestMs;
    const timer = setTimeout(() => drop(socket, 'first_request_timeout'), wait);
    timer.unref();
    states.set(socket, { client, probe, timer, active: 0 });
    if (client !== undefined) add(perClient, client, 1);
    if (probe) {
      probes += 1;
      add(probesPerClient, key, 1);
    } else normal += 1;
    socket.once('close', () => {
      const state = states.get(socket);
      states.delete(socket);
      if (state === undefined) return;
      clearTimeout(state.timer);
      if (state.client !== undefined) add(perClient, state.client, -1);
      if (state.probe) {
        probes -= 1;
        add(probesPerClient, key, -1);
      } else normal -= 1;
    });
  });

  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket;
    const state = states.get(socket);
    if (state !== undefined) {
      clearTimeout(state.timer);
      state.timer = undefined;
      state.active += 1;
      res.once('close', () => {
        state.active -= 1;
        if (closing && state.active === 0) socket.destroySoon();
      });
    }
    if (state?.probe === true) {
      res.setHeader('Connection', 'close');
      const path = (req.url ?? '').split('?')[0] ?? '';
      if ((req.method === 'GET' || req.method === 'HEAD') && PROBE_PATHS.has(path)) app(req, res);
      else refuse(res);
      return;
    }
    app(req, res);
  });

  return {
    closeIdle: () => {
      closing = true;
      for (const [socket, state] of states) if (state.active === 0) socket.destroy();
    },
  };
}

/**
 * Aborted when the client leaves before its answer is complete. Already aborted when it left
 * before this was called (while the request was authorised or recorded): a `close` listener
 * added then never hears of it, and a long poll would claim work for nobody.
 */
export function clientLeft(req: IncomingMessage, res: ServerResponse): AbortSignal {
  const ac = new AbortController();
  const onClose = () => {
    if (!res.writableFinished) ac.abort(new Error('the client left'));
  };
  res.on('close', onClose);
  if (res.closed || req.socket.destroyed) onClose();
  return ac.signal;
}
