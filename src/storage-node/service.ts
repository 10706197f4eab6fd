import type { EntityManager } from '@mikro-orm/postgresql';
import { ApiError } from '../http/errors.ts';
import type { NodeLocator } from '../vcs/remote/client.ts';
import * as db from './repository.ts';
import type { NodeRow } from './repository.ts';

export type { NodeRow };

/** A node whose last heartbeat is older than this is not given new repositories. */
export const FRESH_SECONDS = 30;
/** How long a server keeps a node's address before reading it again. */
const ADDRESS_TTL_MS = 10_000;

/**
 * The storage node registry (docs/storage.md): nodes register and heartbeat; servers read where
 * a node is, choose the node of a new repository, and an administrator drains a node.
 */
export class StorageNodes {
  private readonly em: () => EntityManager;
  private readonly addresses = new Map<string, { address: string | undefined; at: number }>();

  constructor(deps: { em: () => EntityManager }) {
    this.em = deps.em;
  }

  /** The node of a new repository, in its creating transaction: 503 when no node is healthy. */
  async pick(tx: EntityManager): Promise<string> {
    const name = await db.pick(tx, FRESH_SECONDS);
    if (name === undefined) {
      throw new ApiError(503, 'storage_unavailable', 'no storage node is available for a new repository', {
        'Retry-After': '10',
      });
    }
    return name;
  }

  /** The locator of the remote driver: addresses (cached briefly) and a repository's node now. */
  locator(nodeOf: (repoId: number) => Promise<string | undefined>): NodeLocator {
    return {
      address: async (name) => {
        const hit = this.addresses.get(name);
        if (hit !== undefined && Date.now() - hit.at < ADDRESS_TTL_MS && hit.address !== undefined)
          return hit.address;
        const address = await db.address(this.em().fork(), name);
        this.addresses.set(name, { address, at: Date.now() });
        return address;
      },
      nodeOf,
    };
  }

  register(n: Parameters<typeof db.register>[1]): Promise<void> {
    return db.register(this.em().fork(), n);
  }

  heartbeat(name: string, room: { capacityBytes: number; freeBytes: number }): Promise<void> {
    return db.heartbeat(this.em().fork(), name, room);
  }

  list(): Promise<NodeRow[]> {
    return db.list(this.em().fork());
  }

  /** `draining`: no new repositories (empty it with moves); `up`: back in the placement. */
  async setState(name: string, state: NodeRow['state']): Promise<void> {
    if (!(await db.setState(this.em().fork(), name, state))) throw ApiError.notFound('storage node');
  }

  /** Whether a node's heartbeat is recent. */
  static healthy(n: Pick<NodeRow, 'heartbeatAt'>, now = Date.now()): boolean {
    return now - new Date(n.heartbeatAt).getTime() < FRESH_SECONDS * 1000;
  }
}
