import { first, type Db } from '../db/query.ts';

/** The queries of the storage node registry (table `storage_nodes`). */

export type NodeRow = {
  name: string;
  address: string;
  state: 'up' | 'draining';
  capacityBytes: number;
  freeBytes: number;
  version: string;
  heartbeatAt: Date;
  /** Repositories whose row names it. */
  repositories: number;
};

const COLUMNS = `n.name, n.address, n.state, n.capacity_bytes::float8 as "capacityBytes",
  n.free_bytes::float8 as "freeBytes", n.version, n.heartbeat_at as "heartbeatAt"`;

/** A node (re)registers: its address, room and version change; its state (a drain) stays. */
export async function register(
  db: Db,
  n: Pick<NodeRow, 'name' | 'address' | 'capacityBytes' | 'freeBytes' | 'version'>,
): Promise<void> {
  await db.execute(
    `insert into storage_nodes (name, address, capacity_bytes, free_bytes, version)
     values (?, ?, ?, ?, ?)
     on conflict (name) do update set address = excluded.address, capacity_bytes = excluded.capacity_bytes,
       free_bytes = excluded.free_bytes, version = excluded.version, heartbeat_at = now()`,
    [n.name, n.address, n.capacityBytes, n.freeBytes, n.version],
  );
}

export async function heartbeat(db: Db, name: string, room: { capacityBytes: number; freeBytes: number }) {
  await db.execute(
    'update storage_nodes set heartbeat_at = now(), capacity_bytes = ?, free_bytes = ? where name = ?',
    [room.capacityBytes, room.freeBytes, name],
  );
}

/** Every node with how many repositories it holds, by name. */
export function list(db: Db): Promise<NodeRow[]> {
  return db.execute(
    `select ${COLUMNS}, (select count(*)::int from repos r where r.storage_node = n.name) as repositories
       from storage_nodes n order by n.name`,
  );
}

export async function address(db: Db, name: string): Promise<string | undefined> {
  return (await first<{ address: string }>(db, 'select address from storage_nodes where name = ?', [name]))
    ?.address;
}

/**
 * The node a new repository goes to: among the `up` nodes whose last heartbeat is recent, those
 * with less than a GiB less free room than the roomiest, then the fewest repositories, then by
 * name. Nodes on volumes of one size fill evenly; a difference under a GiB does not count, not even
 * across a whole GiB (two reports of one shared volume taken a moment apart).
 */
export async function pick(db: Db, freshSeconds: number): Promise<string | undefined> {
  const r = await first<{ name: string }>(
    db,
    `with fresh as (
       select n.name, n.free_bytes from storage_nodes n
        where n.state = 'up' and n.heartbeat_at > now() - make_interval(secs => ?))
     select f.name from fresh f
      where f.free_bytes > (select max(free_bytes) from fresh) - 1073741824
      order by (select count(*) from repos r where r.storage_node = f.name), f.name
      limit 1`,
    [freshSeconds],
  );
  return r?.name;
}

/** Sets a node's state; false when there is no such node. */
export async function setState(db: Db, name: string, state: NodeRow['state']): Promise<boolean> {
  const r = await db.execute<{ name: string }[]>(
    'update storage_nodes set state = ? where name = ? returning name',
    [state, name],
  );
  return r.length > 0;
}
