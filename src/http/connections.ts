import type { Server } from 'node:http';
import type { Socket } from 'node:net';

/**
 * Tracks a server's sockets and how many requests each is serving, so shutdown can close every
 * connection that is not serving a request. `server.closeIdleConnections()` misses sockets that
 * never sent a request (clients such as undici open a spare one after an aborted request), and a
 * keep-alive socket that finishes its last request during the drain would otherwise stay open
 * until the drain deadline.
 */
export function trackConnections(server: Server): { closeIdle: () => void } {
  const sockets = new Set<Socket>();
  const active = new WeakMap<Socket, number>();
  let closing = false;
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  server.on('request', (req, res) => {
    const socket = req.socket;
    active.set(socket, (active.get(socket) ?? 0) + 1);
    res.once('close', () => {
      const left = (active.get(socket) ?? 1) - 1;
      active.set(socket, left);
      if (closing && left === 0) socket.destroySoon();
    });
  });
  return {
    closeIdle: () => {
      closing = true;
      for (const socket of sockets) if ((active.get(socket) ?? 0) === 0) socket.destroy();
    },
  };
}
