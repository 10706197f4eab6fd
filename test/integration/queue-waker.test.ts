import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import pg from 'pg';
import pino from 'pino';
import { NOTIFY_CHANNEL } from '../../src/pipelines/model.ts';
import { QueueWaker } from '../../src/pipelines/queue-waker.ts';
import { freshDatabase } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';

// The long-poll wakeups against a real PostgreSQL: a NOTIFY between reading the queue and waiting
// is not lost, and a lost listener comes back even when the first reconnects fail.
let url: string;
let dbName: string;
let admin: pg.Client;
const messages: string[] = [];
let waker: QueueWaker;

beforeAll(async () => {
  url = await freshDatabase();
  dbName = new URL(url).pathname.slice(1);
  admin = new pg.Client({ connectionString: `${process.env.TRIAD_TEST_PG}/postgres` });
  await admin.connect();
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      messages.push(String((JSON.parse(chunk.toString()) as { msg: string }).msg));
      cb();
    },
  });
  waker = new QueueWaker(url, pino({ level: 'info' }, sink));
  await waker.start();
});
afterAll(async () => {
  await waker.close();
  await admin.query(`alter database ${dbName} allow_connections true`);
  await admin.end();
});

async function notify(): Promise<void> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  await c.query(`notify ${NOTIFY_CHANNEL}`);
  await c.end();
}

/** A NOTIFY reaches the waker: `seen` moves on. */
async function notified(): Promise<void> {
  const before = waker.seen;
  await notify();
  await waitFor('the notification', () => Promise.resolve(waker.seen !== before ? true : undefined));
}

describe('the pipeline queue waker', () => {
  test('when a NOTIFY arrives after the caller read `seen` but before it waits, then the wait answers at once', async () => {
    const seen = waker.seen;
    await notified();
    // a wait of ten minutes that must not wait: the test's own timeout would fail it
    await waker.wait(600_000, undefined, seen);
    // with the current value it does wait, until the next notification
    let woken = false;
    const waiting = waker.wait(600_000, undefined, waker.seen).then(() => (woken = true));
    expect(woken).toBe(false);
    await notify();
    await waiting;
    expect(woken).toBe(true);
  }, 60_000);

  test('when the listener connection is lost and reconnecting fails several times, then it keeps trying and listens again once the database is back', async () => {
    await admin.query(`alter database ${dbName} allow_connections false`);
    const r = await admin.query(
      `select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and query like 'listen %'`,
      [dbName],
    );
    expect(r.rowCount).toBe(1);
    await waitFor(
      'two failed reconnects',
      () =>
        Promise.resolve(
          messages.filter((m) => m === 'pipeline queue listener reconnect failed').length >= 2
            ? true
            : undefined,
        ),
      60_000,
    );
    await admin.query(`alter database ${dbName} allow_connections true`);
    await waitFor(
      'the listener to be back',
      () => Promise.resolve(messages.includes('pipeline queue listener reconnected') ? true : undefined),
      60_000,
    );
    await notified();
  }, 120_000);
});
