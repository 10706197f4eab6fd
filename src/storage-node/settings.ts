import os from 'node:os';
import { z } from 'zod';

/** The variables of storage nodes (docs/storage.md), read by servers and nodes. */
export const storageEnvShape = {
  TRIAD_STORAGE: z.enum(['local', 'nodes']).default('local'),
  TRIAD_STORAGE_SECRET: z.string().min(16, 'must be at least 16 characters').optional(),
  TRIAD_STORAGE_NAME: z
    .string()
    .regex(/^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$/, 'must be a lowercase DNS label (a pod name)')
    .optional(),
  TRIAD_STORAGE_ADDRESS: z.string().url().optional(),
  TRIAD_STORAGE_PORT: z.coerce.number().int().min(0).max(65535).default(3100),
};
type StorageEnv = z.infer<z.ZodObject<typeof storageEnvShape>>;

export type StorageSettings = {
  /** `local`: repositories in TRIAD_REPO_DIR, in-process; `nodes`: on storage nodes. */
  mode: 'local' | 'nodes';
  /** Shared by servers and nodes; every internal request carries it. */
  secret: string | undefined;
  /** A node's name (TRIAD_STORAGE_NAME, else the host name: the StatefulSet pod's). */
  name: string;
  /** A node's port for the internal protocol. */
  port: number;
  /** How servers reach a node (undefined: `http://<host name>:<port>`, or the bound port in tests). */
  address: string | undefined;
};

/** Storage nodes: the server's mode, and a node's own name, address and port (docs/storage.md). */
export function storageSettings(e: StorageEnv): StorageSettings {
  if (e.TRIAD_STORAGE === 'nodes' && e.TRIAD_STORAGE_SECRET === undefined) {
    throw new Error('invalid configuration: TRIAD_STORAGE_SECRET is required with TRIAD_STORAGE=nodes');
  }
  const name =
    e.TRIAD_STORAGE_NAME ??
    os
      .hostname()
      .toLowerCase()
      .replace(/[^a-z0-9.-]/g, '-');
  return {
    mode: e.TRIAD_STORAGE,
    secret: e.TRIAD_STORAGE_SECRET,
    name,
    port: e.TRIAD_STORAGE_PORT,
    address: e.TRIAD_STORAGE_ADDRESS?.replace(/\/+$/, ''),
  };
}
