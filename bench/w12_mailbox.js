// SPDX-License-Identifier: MIT
// W12: messages to a task (rt.send -> tasks.receive), one way and round trip, beside MessageChannel and EventEmitter.
//
// One way: JS sends N numbers back to back; the receiver sums them, and a rep
// ends when the sum is back in JS. lua-tasks: rt.send to a task looping on
// tasks.receive() (its mailbox bound raised to N), the sum its result. Node:
// port1.postMessage -> port2.onmessage on one thread (a MessageChannel), and
// emit -> a listener (an EventEmitter, synchronous: the floor).
// Round trip: JS sends i and waits for the reply before sending i + 1.
// lua-tasks: the task receives i and calls a JS function `reply(i)` that
// settles the promise JS awaits; MessageChannel: port2 posts i back to port1;
// EventEmitter: a 'ping' listener emits 'pong', which settles the promise.
// Every implementation checks the sum of what came back. ns per message.
'use strict';

const { EventEmitter } = require('node:events');
const { MessageChannel } = require('node:worker_threads');
const { nowMs, sample, check } = require('./harness');

const N = 10000; // one way, per rep
const R = 2000; // round trips, per rep
const sumTo = (n) => (n * (n + 1)) / 2;

const LUA = `
function sink(n)
  local s = 0
  for _ = 1, n do s = s + tasks.receive() end
  return s
end
function echo(n)
  for _ = 1, n do reply(tasks.receive()) end
end`;

async function run() {
  const { Runtime } = require('..');
  const rt = new Runtime({ mailboxLimit: N });
  let settle = null;
  rt.set('reply', (v) => settle(v));
  rt.load(LUA);

  const oneWay = [
    {
      name: 'lua-tasks',
      async once() {
        const task = rt.start('sink', N);
        const t = nowMs();
        for (let i = 1; i <= N; i++) rt.send(task.id, i);
        const s = await task.result;
        const ms = nowMs() - t;
        check('lua-tasks one way', s, sumTo(N));
        return { ns: (ms * 1e6) / N };
      },
    },
    {
      name: 'MessageChannel',
      async once() {
        const { port1, port2 } = new MessageChannel();
        let s = 0;
        let got = 0;
        const done = new Promise((resolve) => {
          port2.onmessage = (e) => {
            s += e.data;
            if (++got === N) resolve();
          };
        });
        const t = nowMs();
        for (let i = 1; i <= N; i++) port1.postMessage(i);
        await done;
        const ms = nowMs() - t;
        port1.close();
        check('MessageChannel one way', s, sumTo(N));
        return { ns: (ms * 1e6) / N };
      },
    },
    {
      name: 'EventEmitter',
      async once() {
        const ee = new EventEmitter();
        let s = 0;
        ee.on('m', (v) => {
          s += v;
        });
        const t = nowMs();
        for (let i = 1; i <= N; i++) ee.emit('m', i);
        const ms = nowMs() - t;
        check('EventEmitter one way', s, sumTo(N));
        return { ns: (ms * 1e6) / N };
      },
    },
  ];

  const roundTrip = [
    {
      name: 'lua-tasks',
      async once() {
        const task = rt.start('echo', R);
        let s = 0;
        const t = nowMs();
        for (let i = 1; i <= R; i++) {
          const back = new Promise((resolve) => {
            settle = resolve;
          });
          rt.send(task.id, i);
          s += await back;
        }
        const ms = nowMs() - t;
        await task.result;
        check('lua-tasks round trip', s, sumTo(R));
        return { ns: (ms * 1e6) / R };
      },
    },
    {
      name: 'MessageChannel',
      async once() {
        const { port1, port2 } = new MessageChannel();
        port2.onmessage = (e) => port2.postMessage(e.data);
        let back = null;
        port1.onmessage = (e) => back(e.data);
        let s = 0;
        const t = nowMs();
        for (let i = 1; i <= R; i++) {
          const p = new Promise((resolve) => {
            back = resolve;
          });
          port1.postMessage(i);
          s += await p;
        }
        const ms = nowMs() - t;
        port1.close();
        check('MessageChannel round trip', s, sumTo(R));
        return { ns: (ms * 1e6) / R };
      },
    },
    {
      name: 'EventEmitter',
      async once() {
        const ee = new EventEmitter();
        ee.on('ping', (v) => ee.emit('pong', v));
        let s = 0;
        const t = nowMs();
        for (let i = 1; i <= R; i++) {
          const p = new Promise((resolve) => ee.once('pong', resolve));
          ee.emit('ping', i);
          s += await p;
        }
        const ms = nowMs() - t;
        check('EventEmitter round trip', s, sumTo(R));
        return { ns: (ms * 1e6) / R };
      },
    },
  ];

  const rows = [];
  const notes = {
    'one way': {
      'lua-tasks': 'rt.send to a task summing tasks.receive() (mailboxLimit N)',
      MessageChannel: 'port1.postMessage -> port2.onmessage, same thread',
      EventEmitter: 'emit -> listener (synchronous)',
    },
    'round trip': {
      'lua-tasks': 'rt.send; the task receives and calls a JS reply(v) that settles the awaited promise',
      MessageChannel: 'port1 -> port2 -> port1, awaited',
      EventEmitter: "'ping' listener emits 'pong', awaited",
    },
  };
  for (const [kind, impls, n] of [
    ['one way', oneWay, N],
    ['round trip', roundTrip, R],
  ]) {
    for (const impl of impls) {
      impl.warmup = 3;
      impl.reps = 15;
    }
    const stats = await sample(impls);
    const base = stats.get('lua-tasks').ns.median;
    for (const impl of impls) {
      const m = stats.get(impl.name).ns;
      rows.push({
        case: `${n.toLocaleString('en')} messages, ${kind}`,
        impl: impl.name,
        value: m.median,
        min: m.min,
        unit: 'ns/msg',
        ratio: m.median / base,
        note: `${notes[kind][impl.name]}; ${Math.round(1e9 / m.median).toLocaleString('en')} msg/s`,
      });
    }
  }
  rt.closeSync();
  return rows;
}

module.exports = {
  id: 'w12',
  title:
    'W12: messages to a task (rt.send -> tasks.receive), one way and round trip, beside MessageChannel and EventEmitter (sums checked)',
  run,
};
