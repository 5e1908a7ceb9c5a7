// SPDX-License-Identifier: MIT
// DirectoryStore: one owner per name, batches fenced and grouped, migration of snapshot files (issues 19, 22).
'use strict';
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { Worker } = require('node:worker_threads');
const { DirectoryStore, Runtime } = require('../../..');
const { runNode } = require('../helpers');

const entry = path.join(__dirname, '..', '..', '..');

let dir;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lua-tasks-store-'));
});
afterEach(() => {
  jest.restoreAllMocks();
  fs.rmSync(dir, { recursive: true, force: true });
});

const lockRecord = (name) => JSON.parse(fs.readFileSync(path.join(dir, `${name}.lock`), 'utf8'));

describe('acquire', () => {
  test('creates the directory if it is missing', async () => {
    const store = new DirectoryStore(path.join(dir, 'deep', 'er'));
    const lease = await store.acquire('n');
    expect(fs.existsSync(path.join(dir, 'deep', 'er', 'n.lock'))).toBe(true);
    await lease.release();
  });

  test('refuses a second owner in the same process, naming this process and the lock file', async () => {
    const store = new DirectoryStore(dir);
    const lease = await store.acquire('game-1');
    for (const s of [store, new DirectoryStore(dir)]) {
      const err = await s.acquire('game-1').then(
        () => null,
        (e) => e,
      );
      expect(err).toMatchObject({
        code: 'ERR_STORE_LOCKED',
        holder: { pid: process.pid, host: os.hostname(), thread: 0 },
        path: path.join(dir, 'game-1.lock'),
      });
      expect(err.message).toMatch(
        /^Runtime "game-1" is already open in this process \(another Runtime on this thread, not yet closed; since \d{4}-\d\d-\d\dT/,
      );
      expect(err.message).toContain(path.join(dir, 'game-1.lock'));
      expect(err.message).toMatch(/there is no lock file to delete\.$/);
    }
    await lease.release();
  });

  test('works again after release; release is idempotent; the token grows with every acquire, across stores', async () => {
    const first = await new DirectoryStore(dir).acquire('t');
    expect(first.token).toBe(1);
    await first.release();
    await first.release();
    const second = await new DirectoryStore(dir).acquire('t');
    expect(second.token).toBe(2);
    expect(lockRecord('t')).toMatchObject({ pid: process.pid, token: 2 });
    await second.release();
    const other = await new DirectoryStore(dir).acquire('u'); // tokens count per name
    expect(other.token).toBe(1);
    await other.release();
  });

  test('a save under a released lease is refused and leaves the snapshot as it was', async () => {
    const store = new DirectoryStore(dir);
    const lease = await store.acquire('f');
    await store.save('f', Buffer.from('one'), { token: lease.token, seq: 1 });
    await lease.release();
    await expect(store.save('f', Buffer.from('two'), { token: lease.token, seq: 2 })).rejects.toMatchObject({
      code: 'ERR_STORE_LOCKED',
    });
    expect((await store.load('f')).toString()).toBe('one');
    await store.close();
  });

  test('release waits for a write in flight: the next owner never has a batch land over its own', async () => {
    const store = new DirectoryStore(dir);
    const lease = await store.acquire('r');
    const saved = store.save('r', Buffer.from('landing'), { token: lease.token, seq: 1 });
    let landed = false;
    saved.then(() => {
      landed = true;
    });
    const release = lease.release().then(() => {
      expect(landed).toBe(true); // the release waited for the write
    });
    // A second owner meanwhile is refused while the release waits; if the
    // write was quick enough for it to get the name, the write had landed.
    const attempt = await new DirectoryStore(dir).acquire('r').then(
      (l) => ({ l }),
      (e) => ({ e }),
    );
    if (attempt.e) {
      expect(attempt.e.code).toBe('ERR_STORE_LOCKED');
    } else {
      expect(landed).toBe(true);
      await attempt.l.release();
    }
    await saved;
    await release;
    const other = new DirectoryStore(dir);
    const next = await other.acquire('r');
    expect((await other.load('r')).toString()).toBe('landing');
    await next.release();
    await Promise.all([store.close(), other.close()]);
  });

  test('a lease kept referenced survives a GC; one nothing references is released when collected', async () => {
    // The GC is only a backstop: whoever can still save holds the lease (a Runtime does).
    const code = `
      const { DirectoryStore } = require(${JSON.stringify(entry)});
      const dir = ${JSON.stringify(dir)};
      const attempt = (name) => new DirectoryStore(dir).acquire(name).then((l) => l.release().then(() => 'free'), (e) => e.code);
      (async () => {
        const kept = await new DirectoryStore(dir).acquire('kept');
        await new DirectoryStore(dir).acquire('dropped');
        for (let i = 0; i < 3; i++) { gc(); await new Promise((r) => setImmediate(r)); }
        console.log(JSON.stringify([await attempt('kept'), await attempt('dropped'), kept.token]));
      })();`;
    const r = await runNode(['--expose-gc', '-e', code], { timeout: 60000 });
    expect(r.stderr).toBe('');
    expect(JSON.parse(r.stdout)).toEqual(['ERR_STORE_LOCKED', 'free', 1]);
  });

  test('a lock does not leak into a program spawned while it is held', async () => {
    const store = new DirectoryStore(dir);
    const lease = await store.acquire('x');
    const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 30000)'], { stdio: 'ignore' });
    await new Promise((r) => child.once('spawn', r));
    await lease.release();
    const again = await store.acquire('x');
    await again.release();
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
  });
});

describe('a lock held elsewhere', () => {
  // A child process that takes the lock of "p" and says { pid, token }.
  function holderProcess() {
    const code = `
      const { DirectoryStore } = require(${JSON.stringify(entry)});
      new DirectoryStore(${JSON.stringify(dir)}).acquire('p').then((l) => {
        globalThis.lease = l; // a lease that is collected is released
        process.stdout.write(JSON.stringify({ pid: process.pid, token: l.token }) + '\\n');
        setInterval(() => {}, 1000);
      });`;
    const child = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
    const said = new Promise((resolve) => {
      let out = '';
      child.stdout.on('data', (d) => {
        out += d;
        if (out.includes('\n')) resolve(JSON.parse(out));
      });
    });
    return { child, said };
  }

  test('by another process is refused naming its pid, and is free once that process is SIGKILLed', async () => {
    const { child, said } = holderProcess();
    const exit = new Promise((r) => child.once('exit', r));
    let token;
    try {
      const told = await said;
      token = told.token;
      expect(told.pid).toBe(child.pid);
      const err = await new DirectoryStore(dir).acquire('p').then(
        () => null,
        (e) => e,
      );
      expect(err).toMatchObject({ code: 'ERR_STORE_LOCKED', holder: { pid: child.pid, host: os.hostname() } });
      expect(err.message).toMatch(
        new RegExp(
          `^Runtime "p" is already open in process ${child.pid} on host "${os.hostname()}" \\(since [^)]+\\), holding .*p\\.lock\\. Close it there first \\(rt\\.close\\(\\)\\), or open another name\\.`,
        ),
      );
    } finally {
      child.kill('SIGKILL');
      await exit;
    }
    const lease = await new DirectoryStore(dir).acquire('p');
    expect(lease.token).toBe(token + 1);
    await lease.release();
  });

  function holderWorker(body) {
    return new Worker(
      `
      const { DirectoryStore, Runtime } = require(${JSON.stringify(entry)});
      const { parentPort } = require('node:worker_threads');
      const dir = ${JSON.stringify(dir)};
      ${body}`,
      { eval: true },
    );
  }
  const message = (w) =>
    new Promise((resolve, reject) => {
      w.once('message', resolve);
      w.once('error', reject);
    });
  const exited = (w) => new Promise((resolve) => w.once('exit', resolve));

  test("by a Worker that exits without releasing it is free after the Worker's exit", async () => {
    const w = holderWorker(`
      new DirectoryStore(dir).acquire('w').then((l) => {
        globalThis.lease = l; // a lease that is collected is released
        parentPort.postMessage(l.token);
        parentPort.once('message', () => parentPort.close()); // ends without release()
      });`);
    const exit = exited(w);
    expect(await message(w)).toBe(1);
    const err = await new DirectoryStore(dir).acquire('w').then(
      () => null,
      (e) => e,
    );
    expect(err).toMatchObject({ code: 'ERR_STORE_LOCKED', holder: { pid: process.pid, thread: w.threadId } });
    expect(err.message).toContain(`in this process (another Runtime in Worker thread ${w.threadId}, not yet closed;`);
    w.postMessage('go');
    expect(await exit).toBe(0);
    const lease = await new DirectoryStore(dir).acquire('w');
    expect(lease.token).toBe(2);
    await lease.release();
  });

  test("by a terminated Worker with an open Runtime is free after the Worker's exit", async () => {
    const w = holderWorker(`
      Runtime.open({ name: 'wr', store: dir }).then((rt) => {
        rt.load('function w() coroutine.yield("FOR", 60) end');
        rt.start('w');
        parentPort.postMessage('open');
      });`);
    const exit = exited(w);
    expect(await message(w)).toBe('open');
    await expect(Runtime.open({ name: 'wr', store: dir })).rejects.toMatchObject({ code: 'ERR_STORE_LOCKED' });
    await w.terminate();
    await exit;
    const rt = await Runtime.open({ name: 'wr', store: dir });
    await rt.close();
  });
});

describe('batches', () => {
  const { testing } = require('../../../lib/store/directory');

  test('an older batch than one written is dropped as superseded, and settles with the newer one', async () => {
    const store = new DirectoryStore(dir);
    const lease = await store.acquire('o');
    const newer = store.save('o', Buffer.from('newer'), { token: lease.token, seq: 2 });
    const older = store.save('o', Buffer.from('older'), { token: lease.token, seq: 1 });
    await Promise.all([newer, older]);
    expect((await store.load('o')).toString()).toBe('newer');
    await store.save('o', Buffer.from('again'), { token: lease.token, seq: 2 }); // a retry of the same seq lands
    expect((await store.load('o')).toString()).toBe('again');
    await lease.release();
    await store.save('o', Buffer.from('plain')); // no lease, no order: plain saves
    expect((await store.load('o')).toString()).toBe('plain');
    await store.close();
  });

  test('batches of many runtimes sharing one store object in one loop turn go out in one transaction', async () => {
    const store = new DirectoryStore(dir);
    const rts = [];
    for (let i = 0; i < 10; i++) rts.push(await Runtime.open({ name: `g${i}`, store }));
    const before = store.stats();
    await Promise.all(
      rts.map((rt, i) => {
        rt.load(`tasks.state.v = ${i}`);
        return rt.commit();
      }),
    );
    const after = store.stats();
    expect(after.batches - before.batches).toBe(10);
    expect(after.transactions - before.transactions).toBe(1);
    await Promise.all(rts.map((rt) => rt.close()));
    const again = await Runtime.open({ name: 'g7', store });
    expect(again.load('return tasks.state.v')).toEqual([7]);
    await again.close();
    await store.close();
  });

  test('a batch whose token the database does not record is refused, and the others of its transaction land', async () => {
    const store = new DirectoryStore(dir);
    const a = await store.acquire('a');
    const b = await store.acquire('b');
    await testing.nativeOf(store).claim('b', b.token + 5); // as if a newer owner had taken "b"
    const value = (s) => Buffer.from(`LTST\x03${s}`, 'latin1');
    const before = store.stats();
    const results = await Promise.allSettled([
      store.write({
        name: 'a',
        token: a.token,
        seq: 1,
        state: Buffer.from('A'),
        writes: [{ space: 1, key: 'k', value: value('a') }],
      }),
      store.write({
        name: 'b',
        token: b.token,
        seq: 1,
        state: Buffer.from('B'),
        writes: [{ space: 1, key: 'k', value: value('b') }],
      }),
    ]);
    expect(results[0].status).toBe('fulfilled');
    expect(results[1]).toMatchObject({ status: 'rejected', reason: { code: 'ERR_STORE_LOCKED' } });
    expect(results[1].reason.message).toMatch(
      /^The batch of "b" was not written: .*lua-tasks\.sqlite records another owner of "b" than token \d+\.$/,
    );
    expect((await store.load('a')).toString()).toBe('A');
    expect(await store.load('b')).toBeNull();
    expect(store.reader('b').keys('')).toEqual([]);
    expect(store.reader('a').keys('')).toEqual(['k']);
    // One transaction: "b" was rolled back to its savepoint, "a" committed.
    expect(store.stats().transactions - before.transactions).toBe(1);
    expect(store.stats().batches - before.batches).toBe(1);
    await Promise.all([a.release(), b.release()]);
    await store.close();
  });

  test('keyed values: get, keys in bytewise order with prefix, after and limit; a corrupt value names its key', async () => {
    const store = new DirectoryStore(dir);
    const lease = await store.acquire('k');
    // Looks like a value snapshot, but its checksum is missing.
    const bytes = Buffer.from('LTST\x03\x05\x01x', 'latin1');
    const writes = ['b', 'a/2', 'a/10', 'a/1', 'é', 'Z'].map((key) => ({ space: 1, key, value: bytes }));
    await store.write({ name: 'k', token: lease.token, seq: 1, writes });
    const r = store.reader('k');
    expect(r.keys('')).toEqual(['Z', 'a/1', 'a/10', 'a/2', 'b', 'é']);
    expect(r.keys('a/')).toEqual(['a/1', 'a/10', 'a/2']);
    expect(r.keys('a/', 'a/1')).toEqual(['a/10', 'a/2']);
    expect(r.keys('', undefined, 2)).toEqual(['Z', 'a/1']);
    expect(r.get('nope')).toBeNull();
    // Those bytes have no valid checksum: reading one is ERR_STORE_CORRUPT naming the name and key.
    expect(() => r.get('a/1')).toThrow(
      expect.objectContaining({
        code: 'ERR_STORE_CORRUPT',
        message: expect.stringContaining('store["a/1"] of runtime "k"'),
      }),
    );
    // A real codec snapshot reads back as written.
    let good;
    const memory = {
      load: async () => null,
      save: async (n, b) => {
        good = Buffer.from(b);
      },
    };
    const rt = await Runtime.open({ name: 'src', store: memory });
    rt.load('tasks.state.v = { 1, "two" }');
    await rt.commit();
    await rt.close();
    await store.write({ name: 'k', token: lease.token, seq: 2, writes: [{ space: 1, key: 'b', value: good }] });
    expect(r.get('b').equals(good)).toBe(true);
    await store.write({ name: 'k', token: lease.token, seq: 3, writes: [{ space: 1, key: 'b', value: null }] });
    expect(r.keys('b')).toEqual([]);
    expect(r.get('b')).toBeNull();
    await lease.release();
    await store.close();
  });

  test('a failed transaction rejects with its cause and writes nothing', async () => {
    const store = new DirectoryStore(dir);
    const lease = await store.acquire('f');
    await store.save('f', Buffer.from('one'), { token: lease.token, seq: 1 });
    testing.nativeOf(store).failNextTransactions(1);
    const err = await store.save('f', Buffer.from('two'), { token: lease.token, seq: 2 }).then(
      () => null,
      (e) => e,
    );
    expect(err).toMatchObject({ code: 'EIO', message: expect.stringMatching(/injected failure/) });
    expect((await store.load('f')).toString()).toBe('one');
    await lease.release();
    await store.close();
  });

  test('calls after close() fail clearly; close() is idempotent', async () => {
    const store = new DirectoryStore(dir);
    await store.save('c', Buffer.from('x'));
    await store.close();
    await store.close();
    await expect(store.load('c')).rejects.toMatchObject({
      code: 'ERR_INVALID_STATE',
      message: expect.stringMatching(/closed/),
    });
    const native = new (require('../../../lib/binding').NativeStore)(dir);
    native.close();
    native.close();
    expect(() => native.get('c', 'k')).toThrow(/cannot be called after close\(\)/);
  });

  test('a Worker that exits with writes in flight neither crashes nor hangs, and what it wrote is whole', async () => {
    const w = new Worker(
      `
      const { DirectoryStore } = require(${JSON.stringify(entry)});
      const store = new DirectoryStore(${JSON.stringify(dir)});
      for (let i = 0; i < 200; i++) store.save('w' + (i % 5), Buffer.alloc(10000, i));
      setImmediate(() => process.exit(0));`,
      { eval: true },
    );
    const code = await new Promise((resolve, reject) => {
      w.once('exit', resolve);
      w.once('error', reject);
    });
    expect(code).toBe(0);
    const store = new DirectoryStore(dir);
    for (let i = 0; i < 5; i++) {
      const b = await store.load(`w${i}`);
      if (b) expect(new Set(b).size).toBe(1);
    }
    await store.close();
  });
});

describe('the database', () => {
  test('a database of a newer format version is refused naming both versions', async () => {
    const store = new DirectoryStore(dir);
    await store.save('v', Buffer.from('x'));
    await store.close();
    // PRAGMA user_version is the big-endian u32 at byte 60 of the file's header.
    const file = path.join(dir, 'lua-tasks.sqlite');
    const fd = fs.openSync(file, 'r+');
    const v = Buffer.alloc(4);
    v.writeUInt32BE(7);
    fs.writeSync(fd, v, 0, 4, 60);
    fs.closeSync(fd);
    const err = await new DirectoryStore(dir).load('v').then(
      () => null,
      (e) => e,
    );
    expect(err).toMatchObject({ code: 'ERR_STORE_CORRUPT' });
    expect(err.message).toMatch(
      /has format version 7, written by a newer lua-tasks; this one reads format version 3 only/,
    );
    expect(err.message).toContain(file);
  });

  test('file() and locate() name the database', () => {
    const store = new DirectoryStore(dir);
    expect(store.file('n')).toBe(path.join(dir, 'lua-tasks.sqlite'));
    expect(store.locate('n')).toBe(path.join(dir, 'lua-tasks.sqlite'));
  });
});

describe('migration of <name>.state files', () => {
  // A snapshot as the store before v2 wrote it: the runtime's own bytes.
  async function snapshotOf(code) {
    let bytes;
    const memory = {
      load: async () => null,
      save: async (n, b) => {
        bytes = Buffer.from(b);
      },
    };
    const rt = await Runtime.open({ name: 'src', store: memory });
    rt.load(code);
    await rt.commit();
    await rt.close();
    return bytes;
  }

  test('a <name>.state file is imported on open, then renamed <name>.state.migrated', async () => {
    const bytes = await snapshotOf('tasks.state.v = { 1, "two" }');
    fs.writeFileSync(path.join(dir, 'm.state'), bytes);
    const rt = await Runtime.open({ name: 'm', store: dir });
    expect(rt.load('return tasks.state.v[2]')).toEqual(['two']);
    await rt.close();
    expect(fs.existsSync(path.join(dir, 'm.state'))).toBe(false);
    expect(fs.readFileSync(path.join(dir, 'm.state.migrated')).equals(bytes)).toBe(true);
    const again = await Runtime.open({ name: 'm', store: dir });
    expect(again.load('return tasks.state.v[1]')).toEqual([1]);
    await again.close();
  });

  test('the fixture written by the store before v2 (format 3) and a version 2 file both migrate', async () => {
    const fixture = path.join(__dirname, '..', 'fixtures', 'v1-store', 'players.state');
    fs.copyFileSync(fixture, path.join(dir, 'players.state'));
    const v3 = await snapshotOf('tasks.state.v = "old"');
    const v2 = Buffer.from(v3.subarray(0, v3.length - 4));
    v2[4] = 2;
    fs.writeFileSync(path.join(dir, 'old.state'), v2);
    const a = await Runtime.open({ name: 'players', store: dir });
    expect(a.load('return tasks.state.players[2].name, tasks.state.count')).toEqual(['bob', 2]);
    const b = await Runtime.open({ name: 'old', store: dir });
    expect(b.load('return tasks.state.v')).toEqual(['old']);
    await Promise.all([a.close(), b.close()]);
  });

  test('the database wins when both exist; a file that is not a snapshot is refused and left as it was', async () => {
    const store = new DirectoryStore(dir);
    await store.save('both', await snapshotOf('tasks.state.v = "db"'));
    fs.writeFileSync(path.join(dir, 'both.state'), await snapshotOf('tasks.state.v = "file"'));
    const rt = await Runtime.open({ name: 'both', store });
    expect(rt.load('return tasks.state.v')).toEqual(['db']);
    await rt.close();
    expect(fs.existsSync(path.join(dir, 'both.state.migrated'))).toBe(true);
    fs.writeFileSync(path.join(dir, 'junk.state'), 'not a snapshot');
    await expect(Runtime.open({ name: 'junk', store })).rejects.toMatchObject({
      code: 'ERR_STORE_CORRUPT',
      message: expect.stringMatching(/junk\.state: not a lua-tasks state snapshot/),
    });
    expect(fs.readFileSync(path.join(dir, 'junk.state'), 'utf8')).toBe('not a snapshot');
    fs.rmSync(path.join(dir, 'junk.state'));
    const free = await Runtime.open({ name: 'junk', store }); // the failed open left the name free
    await free.close();
    await store.close();
  });
});

describe('load', () => {
  test('gives null for a name never saved, and the bytes of a big snapshot in one piece', async () => {
    const store = new DirectoryStore(dir);
    expect(await store.load('none')).toBeNull();
    const big = Buffer.alloc(8 << 20);
    for (let i = 0; i < big.length; i += 4096) big[i] = i & 0xff;
    await store.save('big', big);
    expect((await store.load('big')).equals(big)).toBe(true);
    await store.save('empty', Buffer.alloc(0));
    expect((await store.load('empty')).length).toBe(0);
    await store.close();
  });
});

describe('Runtime.open', () => {
  test('close() gives the name back only after a save in flight has landed', async () => {
    const a = await Runtime.open({ name: 'inflight', store: dir });
    a.load('tasks.state.v = 42');
    const committed = a.commit();
    await a.close();
    await committed;
    const b = await Runtime.open({ name: 'inflight', store: dir });
    expect(b.load('return tasks.state.v')).toEqual([42]);
    await b.close();
  });
});

// Issue 32: damage to the directory store is loud, never a silent loss.
describe('damage', () => {
  const db = () => path.join(dir, 'lua-tasks.sqlite');
  const removeWal = () => {
    for (const f of ['lua-tasks.sqlite-wal', 'lua-tasks.sqlite-shm']) fs.rmSync(path.join(dir, f), { force: true });
  };
  // A child that COMMITs tasks.state.n = 1..count under `name`, prints each
  // acknowledged one, then runs `end` (JS, with rt in scope).
  const committer = (name, count, end) => `
    const { Runtime } = require(${JSON.stringify(entry)});
    (async () => {
      const rt = await Runtime.open({ name: ${JSON.stringify(name)}, store: ${JSON.stringify(dir)} });
      for (let i = 1; i <= ${count}; i++) {
        rt.load('tasks.state.n = ' + i);
        await rt.commit();
        process.stdout.write('acked ' + i + '\\n');
      }
      ${end}
    })();`;

  const walDamage = {
    deleted: removeWal,
    'truncated to half': () => {
      const wal = path.join(dir, 'lua-tasks.sqlite-wal');
      fs.truncateSync(wal, Math.floor(fs.statSync(wal).size / 2));
    },
    'damaged (a byte flipped in its middle)': () => {
      const wal = path.join(dir, 'lua-tasks.sqlite-wal');
      const bytes = fs.readFileSync(wal);
      bytes[Math.floor(bytes.length / 2)] ^= 0xff;
      fs.writeFileSync(wal, bytes);
    },
  };

  test.each(Object.keys(walDamage))(
    'the -wal %s after SIGKILL: the open fails ERR_STORE_CORRUPT naming the store, the name and what is missing',
    async (damage) => {
      const child = spawn(process.execPath, ['-e', committer('acked', 20, 'setInterval(() => {}, 1000);')], {
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      let out = '';
      await new Promise((resolve) => {
        child.stdout.on('data', (d) => {
          out += d;
          if (out.includes('acked 20\n')) resolve();
        });
      });
      child.kill('SIGKILL');
      await new Promise((resolve) => child.on('exit', resolve));
      walDamage[damage]();
      const err = await Runtime.open({ name: 'acked', store: dir }).then(
        () => null,
        (e) => e,
      );
      expect(err).toMatchObject({ code: 'ERR_STORE_CORRUPT' });
      expect(err.message).toContain(`Runtime "acked" cannot be opened from ${dir}`);
      expect(err.message).toMatch(
        /is behind its high-water mark .*lua-tasks\.mark: it holds \d+ write transactions and \d+ were acknowledged, so the last \d+ .* are missing/,
      );
      expect(err.message).toContain(`delete ${path.join(dir, 'lua-tasks.mark')}`);
      // Deleting the mark accepts the loss: the name opens with what the database holds.
      fs.rmSync(path.join(dir, 'lua-tasks.mark'));
      const rt = await Runtime.open({ name: 'acked', store: dir });
      expect(rt.load('return tasks.state.n')[0] ?? 0).toBeLessThan(20);
      await rt.close();
    },
  );

  test.each([
    ['rt.close() then process.exit()', 'await rt.close(); process.exit(0);'],
    ['process.exit() with the runtime open', 'process.exit(0);'],
  ])('after %s the database holds everything: a -wal lost then loses nothing', async (_, end) => {
    const r = await runNode(['-e', committer('clean', 7, end)]);
    expect(r).toMatchObject({ code: 0, stderr: '' });
    expect(r.stdout).toContain('acked 7\n');
    removeWal();
    const rt = await Runtime.open({ name: 'clean', store: dir });
    expect(rt.load('return tasks.state.n')).toEqual([7]);
    await rt.close();
  });

  test("the store's last runtime closing checkpoints: the -wal is empty while the store stays open", async () => {
    const store = new DirectoryStore(dir);
    const wal = path.join(dir, 'lua-tasks.sqlite-wal');
    const a = await Runtime.open({ name: 'a', store });
    const b = await Runtime.open({ name: 'b', store });
    for (const rt of [a, b]) {
      rt.load('tasks.state.v = 1');
      await rt.commit();
    }
    await a.close();
    expect(fs.statSync(wal).size).toBeGreaterThan(0); // b is still open
    await b.close();
    expect(fs.statSync(wal).size).toBe(0);
    await store.close();
  });

  test('a bit flipped in a stored key: neither the record it was nor the key it became reads, both ERR_STORE_CORRUPT', async () => {
    const store = new DirectoryStore(dir);
    const rt = await Runtime.open({ name: 'keys', store });
    rt.load('for i = 1, 3 do tasks.store.set("player/" .. i, { score = i }) end');
    await rt.commit();
    await rt.close();
    await store.close(); // checkpointed: the keys are in the database file
    const bytes = fs.readFileSync(db());
    const at = bytes.indexOf('player/1');
    expect(at).toBeGreaterThan(0);
    expect(bytes.indexOf('player/1', at + 1)).toBe(-1);
    bytes[at + 7] ^= 0x01; // '1' -> '0'
    fs.writeFileSync(db(), bytes);
    const again = new DirectoryStore(dir);
    const r = again.reader('keys');
    for (const key of ['player/0', 'player/1']) {
      expect(() => r.get(key)).toThrow(
        expect.objectContaining({ code: 'ERR_STORE_CORRUPT', message: expect.stringContaining(db()) }),
      );
    }
    expect(() => r.keys('player/')).toThrow(expect.objectContaining({ code: 'ERR_STORE_CORRUPT' }));
    expect(r.get('player/3')).not.toBeNull(); // the rest still reads
    await again.close();
  });

  test('the store directory removed while open: a COMMIT fails ERR_COMMIT_FAILED naming it, never acknowledged', async () => {
    const rt = await Runtime.open({ name: 'gone', store: dir });
    rt.load('tasks.state.v = 1');
    await rt.commit();
    fs.rmSync(dir, { recursive: true, force: true });
    for (const v of [2, 3]) {
      rt.load(`tasks.state.v = ${v}`);
      const err = await rt.commit().then(
        () => null,
        (e) => e,
      );
      expect(err).toMatchObject({ code: 'ERR_COMMIT_FAILED', cause: { code: 'ENOENT' } });
      expect(err.message).toContain(`The store directory ${dir} was removed or changed while the store was open`);
    }
    await rt.close();
  });
});
