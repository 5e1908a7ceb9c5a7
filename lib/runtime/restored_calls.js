// SPDX-License-Identifier: MIT
// The embedder's calls on a durable task being read from the store: made once it is restored.
'use strict';

const { makeError } = require('../errors');
const { reasonText } = require('./commit_queue');

// rt.resume, rt.send and rt.cancel on a dormant task that a store reading
// asynchronously (PostgreSQL) is restoring: the native side answers from
// its index entry (AFTER_RESTORE) and the call itself waits here for the
// read, in the order the calls came (docs/durable.md#restore-at-open).
class RestoredCalls {
  #restorer;
  #commits;

  /**
   * @param {() => import('./durable_restore').DurableRestore} restorer the runtime's, once it opened
   * @param {import('./commit_queue').CommitQueue|null} commits the runtime's writes
   */
  constructor(restorer, commits) {
    this.#restorer = restorer;
    this.#commits = commits;
  }

  /**
   * Makes `call` once the task `id` is restored. `durable`: resolves with
   * { answer, written } (its write asked for in the same turn, so no close
   * comes between), or undefined if the runtime closed first; otherwise
   * answers true at once and a failure of the call, with no caller left, is
   * a process warning (LUA_TASKS_RESTORED_CALL).
   */
  later(id, call, durable) {
    const made = this.#restorer().after(id, () => {
      const answer = call();
      return { answer, written: durable && this.#commits ? this.#commits.request() : null };
    });
    if (durable) return made;
    made.catch((e) =>
      process.emitWarning(
        `A call on the durable task ${id}, answered while it was read from the store, failed once it was restored: ${reasonText(e)}`,
        { code: 'LUA_TASKS_RESTORED_CALL' },
      ),
    );
    return true;
  }

  /**
   * sendDurable's and resumeDurable's answer once what it answered is
   * written: `answer` a boolean, or later()'s promise for a task that was
   * being read.
   */
  async written(id, answer) {
    if (answer === true || answer === false) {
      if (this.#commits) await this.#commits.request();
      return answer;
    }
    const made = await answer;
    if (made === undefined) {
      throw makeError(
        'ERR_RUNTIME_CLOSED',
        `This Lua runtime was closed while the durable task ${id} was read from the store: the call was not made.`,
      );
    }
    await made.written;
    return made.answer;
  }
}

module.exports = { RestoredCalls };
