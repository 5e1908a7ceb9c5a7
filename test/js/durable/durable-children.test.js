'use strict';
// Durable children (docs/durable.md#children): a task a durable task starts
// with tasks.start is durable with it, and the parent's join of it works
// across close and reopen at every stage (before the children end, after
// some, after all of them but before the join ran), lazily restored and
// with durableRestore: 'all'; a join of a task that is gone answers at
// once; what cannot be a durable child is refused, saying why.
const { Runtime } = require('../../..');
const { until: loopUntil, tempDirs } = require('../helpers');

const tmpdir = tempDirs('lua-tasks-children-');

// kid(i) waits (resumed from JS), counts its effect, and returns i * 10;
// fan(n) starts n kids, reports their ids, waits at a gate, then joins each.
const SOURCE = `
function kid(i)
  coroutine.yield("INDEFINITELY")
  effect("kid" .. i)
  return i * 10
end
function fan(n)
  local ids = {}
  for i = 1, n do ids[i] = tasks.start(kid, i) end
  report(table.concat(ids, " "))
  coroutine.yield("INDEFINITELY") -- the gate: the kids may end before the joins run
  local got = {}
  for i = 1, n do got[i] = tasks.wait(ids[i]) end
  return table.concat(got, ",")
end
`;

// Opens `dir` with SOURCE; `calls` counts effect() by argument, `ids`
// receives the kids' ids the parent reports.
function open(dir, calls, ids, extra = {}) {
  return Runtime.open({
    name: 'fan',
    store: dir,
    ...extra,
    setup: (r) => {
      r.set('effect', (x) => {
        calls.set(x, (calls.get(x) || 0) + 1);
      });
      r.set('report', (s) => ids.push(...s.split(' ')));
      r.load(SOURCE);
    },
  });
}

const status = (rt, id) => (rt.task(id) || {}).status;
const waitingOn = (rt, id) => {
  const t = rt.task(id);
  return t && t.waiting ? t.waiting.instruction : undefined;
};
const N = 5;
const EXPECTED = '10,20,30,40,50';

for (const [mode, extra] of [
  ['lazy restore', {}],
  ["durableRestore: 'all'", { durableRestore: 'all' }],
]) {
  describe(`a durable fan-out with tasks.start and tasks.wait survives close and reopen (${mode})`, () => {
    // Runs the fan-out: `endBefore` kids end before the close, and the gate
    // opens before the close when `gateBefore`. Then reopens, ends the rest,
    // opens the gate, and checks the parent's result and every effect once.
    async function stage(endBefore, gateBefore) {
      const dir = tmpdir();
      const calls = new Map();
      const ids = [];
      let rt = await open(dir, calls, ids, extra);
      const parent = rt.spawn('fan', { durable: true, key: 'fan', args: [N] });
      await loopUntil(() => waitingOn(rt, parent.id) === 'INDEFINITELY');
      expect(ids).toHaveLength(N);
      for (const id of ids) expect(rt.task(id)).toMatchObject({ status: 'waiting' });
      for (let i = 0; i < endBefore; i++) expect(rt.resume(ids[i])).toBe(true);
      for (let i = 0; i < endBefore; i++) await loopUntil(() => status(rt, ids[i]) === 'done');
      if (gateBefore) {
        expect(rt.resume(parent.id)).toBe(true);
        await loopUntil(() => waitingOn(rt, parent.id) === 'JOIN' || status(rt, parent.id) === 'done');
      }
      await rt.close();

      rt = await open(dir, calls, ids, extra);
      expect(ids).toHaveLength(N); // report() replayed, not called again
      const again = rt.spawn('fan', { durable: true, key: 'fan', args: [N] });
      expect(again.id).toBe(parent.id);
      for (let i = endBefore; i < N; i++) expect(rt.resume(ids[i])).toBe(true);
      if (!gateBefore) {
        await loopUntil(() => waitingOn(rt, parent.id) === 'INDEFINITELY');
        expect(rt.resume(parent.id)).toBe(true);
      }
      expect(await again.result).toBe(EXPECTED);
      for (let i = 1; i <= N; i++) expect(calls.get(`kid${i}`)).toBe(1);
      expect(rt.tasks()).toHaveLength(0);
      await rt.close();
    }

    test('closed before any child ended', () => stage(0, false));
    test('closed after some children ended', () => stage(2, false));
    test('closed after every child ended, before the parent joined them', () => stage(N, false));
    test('closed while the parent waits in its join, some children done', () => stage(3, true));
  });
}

test('a join of a child that ended before a restart answers from its end record, error or cancel included', async () => {
  const dir = tmpdir();
  const source = `
    function ok() return "fine" end
    function bad() error("boom", 0) end
    function idle() coroutine.yield("INDEFINITELY") end
    function parent()
      local a, b, c = tasks.start(ok), tasks.start(bad), tasks.start(idle)
      tasks.cancel(c)
      coroutine.yield("INDEFINITELY")
      local okb, e = pcall(tasks.wait, b)
      local okc, ec = pcall(tasks.wait, c)
      return tasks.wait(a) .. "|" .. tostring(okb) .. " " .. e .. "|" .. tostring(okc) .. " " .. ec
    end`;
  const load = (r) => r.load(source);
  let rt = await Runtime.open({ name: 'p', store: dir, setup: load });
  rt.on('taskerror', () => {}); // bad() fails, on purpose
  const t = rt.spawn('parent', { durable: true, key: 'p' });
  await loopUntil(() => waitingOn(rt, t.id) === 'INDEFINITELY');
  await rt.close();
  rt = await Runtime.open({ name: 'p', store: dir, setup: load });
  const again = rt.spawn('parent', { durable: true, key: 'p' });
  await loopUntil(() => waitingOn(rt, again.id) === 'INDEFINITELY');
  expect(rt.resume(again.id)).toBe(true);
  expect(await again.result).toBe('fine|false boom|false task cancelled');
  await rt.close();
});

test("a joined child's JS error, which cannot persist, is the parent's error live and its message after a replay", async () => {
  const dir = tmpdir();
  const setup = (r) => {
    r.set('boom', async () => {
      throw new Error('kaboom');
    });
    r.load(`
      function failing() return boom() end
      function joiner()
        local ok, e = pcall(tasks.wait, tasks.start(failing))
        local seen = tostring(ok) .. " " .. type(e) .. " " .. (type(e) == "string" and e or e.message)
        coroutine.yield("INDEFINITELY")
        return seen
      end`);
  };
  let rt = await Runtime.open({ name: 'joins', store: dir, setup });
  rt.on('taskerror', () => {}); // the child's failure
  const id = rt.spawn('joiner', { durable: true, key: 'j' }).id;
  await loopUntil(() => rt.task(id) && rt.task(id).waiting && rt.task(id).waiting.instruction === 'INDEFINITELY');
  expect(rt.resume(id)).toBe(true);
  expect(await rt.spawn('joiner', { durable: true, key: 'j' }).result).toBe('false userdata kaboom');
  await rt.close();
  // Again, replayed: the parent is stopped at its wait and reopened.
  const dir2 = tmpdir();
  rt = await Runtime.open({ name: 'joins', store: dir2, setup });
  rt.on('taskerror', () => {});
  const id2 = rt.spawn('joiner', { durable: true, key: 'j' }).id;
  await loopUntil(() => rt.task(id2) && rt.task(id2).waiting && rt.task(id2).waiting.instruction === 'INDEFINITELY');
  await rt.close();
  rt = await Runtime.open({ name: 'joins', store: dir2, setup, durableRestore: 'all' });
  rt.on('taskerror', () => {});
  expect(rt.resume(id2)).toBe(true);
  expect(await rt.spawn('joiner', { durable: true, key: 'j' }).result).toBe('false string Error: kaboom');
  await rt.close();
});

test('a join of a task that does not exist answers at once, durable or not, after a restart too', async () => {
  const dir = tmpdir();
  const source = `
    function probe()
      local a, ma = tasks.wait("t" .. string.rep("0", 26) .. "-" .. string.rep("0", 13))
      local b, mb = tasks.wait("nonsense")
      return tostring(a) .. " " .. ma .. "|" .. tostring(b) .. " " .. mb
    end
    function later()
      coroutine.yield("INDEFINITELY")
      return probe()
    end`;
  const load = (r) => r.load(source);
  let rt = await Runtime.open({ name: 'm', store: dir, setup: load });
  const want =
    'nil no such task (unknown, or finished too long ago)|nil no such task (unknown, or finished too long ago)';
  expect(await rt.spawn('probe').result).toBe(want);
  expect(await rt.spawn('probe', { durable: true }).result).toBe(want);
  const t = rt.spawn('later', { durable: true, key: 'l' });
  await loopUntil(() => waitingOn(rt, t.id) === 'INDEFINITELY');
  await rt.close();
  rt = await Runtime.open({ name: 'm', store: dir, setup: load });
  await loopUntil(() => waitingOn(rt, t.id) === 'INDEFINITELY');
  expect(rt.resume(t.id)).toBe(true);
  expect(await rt.spawn('later', { durable: true, key: 'l' }).result).toBe(want);
  await rt.close();
});

test('a join of a child that ended and is no longer retained answers at once with nil and a message', async () => {
  const dir = tmpdir();
  const source = `
    function idle() coroutine.yield("INDEFINITELY") end
    function parent()
      local id = tasks.start(idle)
      tell(id)
      coroutine.yield("INDEFINITELY")
      local v, m = tasks.wait(id)
      return tostring(v) .. " " .. tostring(m)
    end`;
  let child;
  const setup = (r) => {
    r.set('tell', (id) => {
      child = id;
    });
    r.load(source);
  };
  // durableRetention 0: an end is not kept, as past its retention.
  let rt = await Runtime.open({ name: 'g', store: dir, durableRetention: 0, setup });
  const t = rt.spawn('parent', { durable: true, key: 'g' });
  await loopUntil(() => waitingOn(rt, t.id) === 'INDEFINITELY');
  expect(rt.resume(child)).toBe(true);
  await loopUntil(() => status(rt, child) !== 'waiting');
  await rt.close();
  rt = await Runtime.open({ name: 'g', store: dir, durableRetention: 0, setup });
  const again = rt.spawn('parent', { durable: true, key: 'g' });
  await loopUntil(() => waitingOn(rt, again.id) === 'INDEFINITELY');
  expect(rt.resume(again.id)).toBe(true);
  expect(await again.result).toBe('nil no such task (unknown, or finished too long ago)');
  await rt.close();
});

test('what cannot be a durable child is refused, saying why; a name or a module field is taken', async () => {
  const dir = tmpdir();
  const source = `
    local kids = require("kids")
    function twice(x) return x * 2 end
    function try(what)
      local ok, e = pcall(function()
        if what == "closure" then return tasks.start(function() end) end
        if what == "coroutine" then return tasks.start(coroutine.create(twice)) end
        if what == "args" then return tasks.start(twice, function() end) end
        if what == "number" then return tasks.start(42) end
        if what == "name" then return tasks.wait(tasks.start("twice", 4)) end
        if what == "global" then return tasks.wait(tasks.start(twice, 5)) end
        if what == "module" then return tasks.wait(tasks.start(kids.run, 6)) end
      end)
      return tostring(ok) .. " " .. tostring(e)
    end`;
  const rt = await Runtime.open({
    name: 'r',
    store: dir,
    modules: { kids: 'return { run = function(x) return x + 1 end }' },
    setup: (r) => r.load(source),
  });
  const run = (what) => rt.spawn('try', { durable: true, args: [what] }).result;
  expect(await run('closure')).toMatch(
    /^false .*tasks\.start: a durable task's child is durable too, and a restart finds its function again by name: give a global function or a "mod\.fn" name/,
  );
  expect(await run('coroutine')).toMatch(/a coroutine cannot be \(its frames do not persist\)/);
  expect(await run('args')).toMatch(/tasks\.start: its arguments must persist: .*function/);
  expect(await run('number')).toMatch(/bad argument #1 to 'start' \(function or entry name expected, got number\)/);
  expect(await run('name')).toBe('true 8');
  expect(await run('global')).toBe('true 10');
  expect(await run('module')).toBe('true 7');
  // Outside a durable task, a name starts an ordinary task.
  expect(await rt.spawn('try', { args: ['name'] }).result).toBe('true 8');
  await rt.close();
});
