// SPDX-License-Identifier: MIT
// The operations a member runs by name (member.spawn, run, send, resume, cancel, call, task): what each does where the name is hosted, and their errors.
'use strict';

const { makeError, typeName } = require('../errors');
const { checkName } = require('../store/contract');

/** The operations a member routes by name. */
const OPS = ['spawn', 'run', 'send', 'resume', 'cancel', 'call', 'task'];

/** Checks a routed operation's name and kind. */
function checkOp(name, op) {
  checkName(name);
  if (!OPS.includes(op)) throw new Error(`unknown fleet operation ${op}`);
}

// A fleet task's entry that is not a name.
function badEntry(entry) {
  return makeError(
    'ERR_INVALID_ARG_TYPE',
    `A fleet task starts from a global name or a "module.fn" path (it is durable). Received ${typeName(entry)}.`,
  );
}

// A routed operation whose request row is gone (past its deadline, or lost
// by PostgreSQL): nobody may run it now, and it may have run at its holder.
function unclaimable(name, op) {
  return makeError(
    'ERR_FLEET_TIMEOUT',
    `The ${op} of "${name}" was sent to a member that did not acknowledge it, and its request record is gone (its deadline passed, or PostgreSQL restarted): it was not run here, and may have run there.`,
    { runtime: name, op },
  );
}

/** An operation on the runtime `rt`, hosted here as `name`: its answer. */
async function execute(name, rt, op, a) {
  switch (op) {
    case 'spawn': {
      const task = rt.spawn(a.entry, { durable: true, key: a.key, args: a.args });
      task.result.catch(() => {}); // its outcome is the runtime's listeners'
      await rt.commit(); // its start is durable before the answer
      return task.id;
    }
    case 'run': {
      const options = { durable: true, key: a.key, args: a.args };
      if (a.label !== undefined) options.name = a.label;
      const out = await Promise.resolve()
        .then(() => rt.spawn(a.entry, options).result)
        .then(
          (value) => ({ value }),
          (error) => ({ error }),
        );
      // Its end is durable before the answer. Not written (the name taken
      // over meanwhile, the runtime closed, the store failed), there is no
      // answer, not the commit's error: a repeat finds the task by its key.
      await rt.commit().catch((e) => Promise.reject(notAnswered(name, e)));
      if ('error' in out) throw out.error;
      return out.value;
    }
    case 'send':
      return rt.sendDurable(a.id, ...a.values);
    case 'resume':
      return rt.resumeDurable(a.id, ...a.values);
    case 'cancel': {
      const ok = rt.cancel(a.id, a.reason);
      // A refusal too: "already ended" holds only once that end is written.
      await rt.commit();
      return ok;
    }
    case 'call':
      return rt.call(a.fn, ...a.args);
    case 'task':
      return rt.task(a.id);
  }
  throw new Error(`unknown fleet operation ${op}`);
}

// A run whose end could not be written: not answered (docs/fleet.md#run-once).
const notAnswered = (name, e) =>
  makeError(
    'ERR_FLEET_TIMEOUT',
    `The run in "${name}" was not answered: its end could not be written (${e && e.message}). Run it again with the same key: the task is found wherever "${name}" is hosted then.`,
    { runtime: name, op: 'run' },
  );

/** An error answered by another member, as an Error again. */
function rebuild(r) {
  const { message, name, ...props } = r;
  const e = r.code ? makeError(r.code, message, props) : Object.assign(new Error(message), props);
  if (name && e.name !== name) Object.defineProperty(e, 'name', { value: name, configurable: true, writable: true });
  return e;
}

module.exports = { OPS, checkOp, badEntry, unclaimable, execute, rebuild };
