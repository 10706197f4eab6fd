import { describe, expect, test } from '@jest/globals';
import { ApiException, type KubeConfig, type V1Lease } from '@kubernetes/client-node';
import { pino } from 'pino';
import { LeaderElector } from '../../src/operator/leader.ts';

/** A Lease store standing in for the coordination API; `failing` makes every call throw a 503. */
class FakeLeases {
  lease: V1Lease | undefined;
  failing = false;
  private version = 0;

  private check(): void {
    if (this.failing) throw new ApiException(503, 'unavailable', {}, {});
  }

  readNamespacedLease = (): Promise<V1Lease> => {
    this.check();
    if (this.lease === undefined) throw new ApiException(404, 'not found', {}, {});
    return Promise.resolve(structuredClone(this.lease));
  };

  createNamespacedLease = ({ body }: { body: V1Lease }): Promise<V1Lease> => {
    this.check();
    if (this.lease !== undefined) throw new ApiException(409, 'exists', {}, {});
    this.lease = { ...body, metadata: { ...body.metadata, resourceVersion: String(++this.version) } };
    return Promise.resolve(this.lease);
  };

  replaceNamespacedLease = ({ body }: { body: V1Lease }): Promise<V1Lease> => {
    this.check();
    if (body.metadata?.resourceVersion !== this.lease?.metadata?.resourceVersion)
      throw new ApiException(409, 'conflict', {}, {});
    this.lease = { ...body, metadata: { ...body.metadata, resourceVersion: String(++this.version) } };
    return Promise.resolve(this.lease);
  };
}

const until = async (what: string, ok: () => boolean) => {
  for (let i = 0; i < 600 && !ok(); i++) await new Promise((r) => setTimeout(r, 50));
  if (!ok()) throw new Error(`timed out waiting for ${what}`);
};

function elector(leases: FakeLeases, identity: string, events: string[]) {
  const kc = { makeApiClient: () => leases } as unknown as KubeConfig;
  return new LeaderElector(
    kc,
    { namespace: 'ns', name: 'lease', identity, leaseSeconds: 1, retryMs: 100 },
    pino({ level: 'silent' }),
    () => events.push(`${identity} leads`),
    () => events.push(`${identity} lost`),
  );
}

describe('operator leader election', () => {
  test('when renewing the lease keeps failing for the lease duration, then the leader stops leading', async () => {
    const leases = new FakeLeases();
    const events: string[] = [];
    const e = elector(leases, 'a', events);
    e.start();
    try {
      await until('leading', () => e.isLeader);
      leases.failing = true;
      await until('the lease given up', () => events.includes('a lost'));
      expect(events).toEqual(['a leads', 'a lost']);
      expect(e.isLeader).toBe(false);
    } finally {
      await e.stop();
    }
  });

  test('a lease whose holder stopped renewing is taken over after the lease duration by the local clock, even with a renew time from the future', async () => {
    const leases = new FakeLeases();
    const events: string[] = [];
    // a holder with a clock an hour ahead that then died
    leases.lease = {
      metadata: { name: 'lease', namespace: 'ns', resourceVersion: '0' },
      spec: {
        holderIdentity: 'skewed',
        leaseDurationSeconds: 1,
        renewTime: new Date(Date.now() + 3_600_000),
      },
    };
    const b = elector(leases, 'b', events);
    b.start();
    try {
      await until('b leading', () => b.isLeader);
      expect(events).toEqual(['b leads']);
      expect(leases.lease?.spec?.holderIdentity).toBe('b');
    } finally {
      await b.stop();
    }
  });
});
