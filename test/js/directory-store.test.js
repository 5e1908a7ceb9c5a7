// SPDX-License-Identifier: MIT
// DirectoryStore: one owner per name, no temp file outlives a failure, saves land in order (issue 19).
'use strict';
const fs = require('node:fs');
const fsp = require('node:fs/promises');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { Worker } = require('node:worker_threads');
const { DirectoryStore, Runtime } = require('../..');
const { runNode } = require('./helpers');

const entry = path.join(__dirname, '..', '..');

let dir;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lua-tasks-store-'));
});
afterEach(() => {
  jest.restoreAllMocks();
  fs.rmSync(dir, { recursive: true, force: true });
});

const temps = () => fs.readdirSync(dir).filter((f) => f.endsWith('.tmp'));
const snapshot = (name) => fs.readFileSync(path.join(dir, `${name}.state`));
const lockRecord = (name) => JSON.parse(fs.readFileSync(path.join(dir, `${name}.lock`), 'utf8'));

function injected(code, syscall) {
  return Object.assign(new Error(`${code}: injected failure, ${syscall}`), { code, syscall });
}

// Resolves `open` when the gate is reached; the operation waits for pass().
function gate() {
  let reached;
  let pass;
  const atGate = new Promise((r) => {
    reached = r;
  });
  const passed = new Promise((r) => {
    pass = r;
  });
  return {
    atGate,
    pass,
    wait: () => {
      reached();
      return passed;
    },
  };
}

// Wraps the FileHandles the store opens: `wrap(fh, file)` may replace their methods.
function onOpen(wrap) {
  const realOpen = fsp.open;
  jest.spyOn(fsp, 'open').mockImplementation(async (file, ...rest) => {
    const fh = await realOpen(file, ...rest);
    wrap(fh, String(file));
    return fh;
  });
}

// One way each file operation of save() can fail, and whether the rename had happened.
const faults = {
  'open of the temp file': () => {
    const realOpen = fsp.open;
    jest.spyOn(fsp, 'open').mockImplementation(async (file, ...rest) => {
      if (String(file).endsWith('.tmp')) throw injected('ENOSPC', 'open');
      return realOpen(file, ...rest);
    });
  },
  'write (after a partial write)': () =>
    onOpen((fh, file) => {
      if (!file.endsWith('.tmp')) return;
      const write = fh.write.bind(fh);
      let calls = 0;
      fh.write = async (buf, off, len, pos) => {
        if (calls++ > 0) throw injected('ENOSPC', 'write');
        return write(buf, off, Math.ceil(len / 2), pos); // half of it fits
      };
    }),
  'fsync of the temp file': () =>
    onOpen((fh, file) => {
      if (file.endsWith('.tmp')) {
        fh.sync = async () => {
          throw injected('EIO', 'fsync');
        };
      }
    }),
  'close of the temp file': () =>
    onOpen((fh, file) => {
      if (!file.endsWith('.tmp')) return;
      const close = fh.close.bind(fh);
      fh.close = async () => {
        await close(); // the descriptor is gone, as after a real EIO at close
        throw injected('EIO', 'close');
      };
    }),
  rename: () => {
    jest.spyOn(fsp, 'rename').mockImplementation(async () => {
      throw injected('EIO', 'rename');
    });
  },
  'open of the directory': () => {
    const realOpen = fsp.open;
    jest.spyOn(fsp, 'open').mockImplementation(async (file, ...rest) => {
      if (String(file) === dir) throw injected('EMFILE', 'open');
      return realOpen(file, ...rest);
    });
  },
  'fsync of the directory': () =>
    onOpen((fh, file) => {
      if (file === dir) {
        fh.sync = async () => {
          throw injected('EIO', 'fsync');
        };
      }
    }),
  'close of the directory': () =>
    onOpen((fh, file) => {
      if (file !== dir) return;
      const close = fh.close.bind(fh);
      fh.close = async () => {
        await close();
        throw injected('EIO', 'close');
      };
    }),
};
const beforeRename = [
  'open of the temp file',
  'write (after a partial write)',
  'fsync of the temp file',
  'close of the temp file',
  'rename',
];

describe('a failed save', () => {
  const old = Buffer.from('the previous snapshot');
  const next = Buffer.alloc(300000, 7);

  test.each(beforeRename)(
    'at %s rejects with the cause, leaves no temp file and the previous snapshot intact',
    async (where) => {
      const store = new DirectoryStore(dir);
      await store.save('s', old);
      faults[where]();
      const err = await store.save('s', next).then(
        () => null,
        (e) => e,
      );
      expect(err).toBeInstanceOf(Error);
      expect(err.message).toMatch(/injected failure/);
      expect(err.replaced).toBeUndefined();
      jest.restoreAllMocks();
      expect(temps()).toEqual([]);
      expect(snapshot('s').equals(old)).toBe(true);
    },
  );

  test.each(Object.keys(faults).filter((w) => !beforeRename.includes(w)))(
    'at %s says the new snapshot is in place but not confirmed durable (replaced: true)',
    async (where) => {
      const store = new DirectoryStore(dir);
      await store.save('s', old);
      faults[where]();
      const err = await store.save('s', next).then(
        () => null,
        (e) => e,
      );
      expect(err).toMatchObject({ replaced: true, path: path.join(dir, 's.state') });
      expect(err.message).toMatch(
        /^The new snapshot of "s" is in place \(.*s\.state\) but not confirmed durable: .*injected failure/,
      );
      expect(err.cause.message).toMatch(/injected failure/);
      expect(err.code).toBe(err.cause.code);
      jest.restoreAllMocks();
      expect(temps()).toEqual([]);
      expect(snapshot('s').equals(next)).toBe(true);
    },
  );

  test('inside COMMIT says the previous snapshot is intact when it is', async () => {
    const rt = await Runtime.open({ name: 'c', store: dir });
    rt.load('tasks.state.v = 1');
    await rt.commit();
    faults['fsync of the temp file']();
    rt.load('tasks.state.v = 2');
    const err = await rt.commit().then(
      () => null,
      (e) => e,
    );
    expect(err).toMatchObject({ code: 'ERR_COMMIT_FAILED', cause: { code: 'EIO' } });
    expect(err.message).toMatch(/The previous snapshot is intact\.$/);
    expect(err.replaced).toBeUndefined();
    jest.restoreAllMocks();
    await rt.close();
    expect(temps()).toEqual([]);
    const again = await Runtime.open({ name: 'c', store: dir });
    expect(again.load('return tasks.state.v')).toEqual([1]);
    await again.close();
  });

  test('inside COMMIT says the new snapshot is in place but not confirmed durable when the directory fsync failed', async () => {
    const rt = await Runtime.open({ name: 'c', store: dir });
    faults['fsync of the directory']();
    rt.load(`function t()
      tasks.state.v = 2
      local ok, e = pcall(coroutine.yield, "COMMIT")
      return tostring(e)
    end`);
    const message = await rt.call('t');
    expect(message).toMatch(/in place, but the store could not confirm it is durable/);
    expect(message).not.toMatch(/previous snapshot is intact/);
    const err = await rt.commit().then(
      () => null,
      (e) => e,
    );
    expect(err).toMatchObject({ code: 'ERR_COMMIT_FAILED', replaced: true });
    expect(err.message).toMatch(
      /^COMMIT failed: the new snapshot of "c" is in place, but the store could not confirm it is durable: EIO/,
    );
    jest.restoreAllMocks();
    await rt.close();
    const again = await Runtime.open({ name: 'c', store: dir });
    expect(again.load('return tasks.state.v')).toEqual([2]);
    await again.close();
  });
});

describe('acquire', () => {
  test("sweeps the temp files of that name left by dead writers, and no other name's", async () => {
    const mine = ['a.state.4242.0123456789ab.tmp', 'a.state.17.3.tmp'];
    const others = [
      'b.state.4242.0123456789ab.tmp', // another name
      'a.state.1.state.4242.0123456789ab.tmp', // the name "a.state.1"
      'ab.state.4242.0123456789ab.tmp',
      'a.state.4242.tmp',
      'a.state',
      'notes.txt',
    ];
    for (const f of [...mine, ...others]) fs.writeFileSync(path.join(dir, f), 'x');
    const lease = await new DirectoryStore(dir).acquire('a');
    expect(fs.readdirSync(dir).sort()).toEqual([...others, 'a.lock'].sort());
    await lease.release();
  });

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
    expect(snapshot('f').toString()).toBe('one');
    expect(temps()).toEqual([]);
  });

  test('release waits for a rename in progress: the next owner never has a snapshot land over its own', async () => {
    const store = new DirectoryStore(dir);
    const lease = await store.acquire('r');
    const g = gate();
    const realRename = fsp.rename;
    jest.spyOn(fsp, 'rename').mockImplementation(async (...args) => {
      await g.wait();
      return realRename(...args);
    });
    const saved = store.save('r', Buffer.from('landing'), { token: lease.token, seq: 1 });
    await g.atGate;
    let released = false;
    const release = lease.release().then(() => {
      released = true;
    });
    await expect(new DirectoryStore(dir).acquire('r')).rejects.toMatchObject({ code: 'ERR_STORE_LOCKED' });
    expect(released).toBe(false);
    g.pass();
    await saved;
    await release;
    const next = await new DirectoryStore(dir).acquire('r');
    expect(snapshot('r').toString()).toBe('landing');
    await next.release();
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

describe('saves in order', () => {
  test('an older save delayed past a newer one does not overwrite it, resolves, and leaves no temp file', async () => {
    const store = new DirectoryStore(dir);
    const lease = await store.acquire('o');
    const g = gate();
    let first = true;
    onOpen((fh, file) => {
      if (!file.endsWith('.tmp') || !first) return;
      first = false;
      const sync = fh.sync.bind(fh);
      fh.sync = async () => {
        await g.wait();
        return sync();
      };
    });
    let olderDone = false;
    const older = store.save('o', Buffer.from('older'), { token: lease.token, seq: 1 }).then(() => {
      olderDone = true;
    });
    await g.atGate;
    await store.save('o', Buffer.from('newer'), { token: lease.token, seq: 2 });
    expect(olderDone).toBe(false);
    g.pass();
    await older;
    expect(snapshot('o').toString()).toBe('newer');
    expect(temps()).toEqual([]);
    await lease.release();
  });

  test('saves of one seq or without one all land, in the order they reach the rename', async () => {
    const store = new DirectoryStore(dir);
    const lease = await store.acquire('q');
    await store.save('q', Buffer.from('a'), { token: lease.token, seq: 5 });
    await store.save('q', Buffer.from('b'), { token: lease.token, seq: 5 }); // a retry of the same snapshot
    expect(snapshot('q').toString()).toBe('b');
    await lease.release();
    await store.save('q', Buffer.from('c')); // no lease, no order: plain saves
    await store.save('q', Buffer.from('d'), { seq: 1 });
    expect(snapshot('q').toString()).toBe('d');
  });

  test('two stores saving one name without leases leave one whole snapshot, never a mix', async () => {
    // Each store used to count its temp files from 1: both wrote the same file at once.
    const a = new DirectoryStore(dir);
    const b = new DirectoryStore(dir);
    const big = Buffer.alloc(200000, 'A');
    for (let i = 0; i < 20; i++) {
      await Promise.all([a.save('same', big), b.save('same', Buffer.from('B'))]);
      const got = snapshot('same');
      expect(got.equals(big) || got.toString() === 'B').toBe(true);
    }
    expect(fs.readdirSync(dir)).toEqual(['same.state']);
  });
});

describe('load', () => {
  test('gives null for a name never saved, and the bytes of a big snapshot in one piece', async () => {
    const store = new DirectoryStore(dir);
    expect(await store.load('none')).toBeNull();
    const big = Buffer.alloc(8 << 20);
    for (let i = 0; i < big.length; i += 4096) big[i] = i & 0xff;
    fs.writeFileSync(path.join(dir, 'big.state'), big);
    expect((await store.load('big')).equals(big)).toBe(true);
    fs.writeFileSync(path.join(dir, 'empty.state'), '');
    expect((await store.load('empty')).length).toBe(0);
  });

  test('reads again when the file changed size while it was read, and gives up if it keeps changing', async () => {
    const store = new DirectoryStore(dir);
    const bytes = Buffer.from('0123456789abcdef');
    fs.writeFileSync(path.join(dir, 'g.state'), bytes);
    let lies = 1;
    onOpen((fh, file) => {
      if (!file.endsWith('g.state')) return;
      const stat = fh.stat.bind(fh);
      fh.stat = async () => {
        const st = await stat();
        return lies-- > 0 ? { ...st, size: st.size - 4 } : st;
      };
    });
    expect((await store.load('g')).equals(bytes)).toBe(true);
    lies = Infinity;
    await expect(store.load('g')).rejects.toMatchObject({ code: 'ERR_STORE_CORRUPT', path: path.join(dir, 'g.state') });
  });
});

describe('Runtime.open', () => {
  test('releases the name when the open fails after acquiring it', async () => {
    fs.writeFileSync(path.join(dir, 'junk.state'), 'not a snapshot');
    await expect(Runtime.open({ name: 'junk', store: dir })).rejects.toMatchObject({ code: 'ERR_STORE_CORRUPT' });
    fs.rmSync(path.join(dir, 'junk.state'));
    const rt = await Runtime.open({ name: 'junk', store: dir });
    await rt.close();
  });

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
