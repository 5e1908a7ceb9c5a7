// SPDX-License-Identifier: MIT
// The dashboard's script: reads the handler's JSON and builds the page with textContent only (never HTML from data).
'use strict';

(() => {
  const $ = (id) => document.getElementById(id);
  let allowActions = false;

  // An element with text; data never becomes markup.
  function el(tag, text, attrs) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    return e;
  }

  function row(cells, tag = 'td') {
    const tr = el('tr');
    for (const c of cells) {
      const td = el(tag);
      if (c instanceof Node) td.append(c);
      else td.textContent = c === undefined || c === null ? '' : String(c);
      tr.append(td);
    }
    return tr;
  }

  function say(text, error) {
    const s = $('status');
    s.textContent = text;
    s.className = error ? 'error' : '';
  }

  async function get(path) {
    const r = await fetch(path, { headers: { Accept: 'application/json' } });
    const body = await r.json();
    if (!r.ok) throw new Error(body.error || `HTTP ${r.status}`);
    return body;
  }

  // Actions carry the header the handler requires (its CSRF guard).
  async function post(path, body) {
    const r = await fetch(path, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-Lua-Tasks-Dashboard': '1' },
      body: JSON.stringify(body),
    });
    const out = await r.json();
    if (!r.ok) throw new Error(out.error || `HTTP ${r.status}`);
    return out;
  }

  function waitText(t) {
    if (!t.waiting) return '';
    return t.waiting.until ? `${t.waiting.instruction} until ${t.waiting.until}` : t.waiting.instruction;
  }

  function button(text, onClick, attrs) {
    const b = el('button', text, { type: 'button', ...attrs });
    b.addEventListener('click', () => {
      onClick().catch((e) => say(e.message, true));
    });
    return b;
  }

  function actions(label, t) {
    const span = el('span');
    span.append(
      button('Inspect', () => showTask({ runtime: label, id: t.id }), { 'data-action': 'inspect', 'data-id': t.id }),
    );
    if (allowActions && t.status === 'waiting') {
      span.append(
        button(
          'Resume',
          async () => {
            const r = await post('api/resume', { runtime: label, id: t.id });
            say(r.ok ? `Resumed ${t.id}.` : `${t.id} was not waiting.`);
            await refresh();
          },
          { 'data-action': 'resume', 'data-id': t.id },
        ),
      );
    }
    if (allowActions && t.status !== 'done' && t.status !== 'failed' && t.status !== 'cancelled') {
      span.append(
        button(
          'Cancel',
          async () => {
            const r = await post('api/cancel', { runtime: label, id: t.id });
            say(r.ok ? `Cancelled ${t.id}.` : `${t.id} was not live.`);
            await refresh();
          },
          { 'data-action': 'cancel', 'data-id': t.id },
        ),
      );
    }
    return span;
  }

  function renderRuntimes(list) {
    const box = $('runtime-list');
    box.replaceChildren();
    if (list.length === 0) box.append(el('p', 'No runtime.'));
    for (const r of list) {
      box.append(el('h3', r.label));
      if (r.error) box.append(el('p', r.error, { class: 'error' }));
      if (r.tasks.length === 0) {
        box.append(el('p', 'No live task.'));
        continue;
      }
      const table = el('table', null, { 'data-runtime': r.label });
      table.append(row(['id', 'name', 'status', 'wait', ''], 'th'));
      for (const t of r.tasks) {
        const tr = row([t.id, t.name, t.status, waitText(t), actions(r.label, t)]);
        tr.setAttribute('data-task', t.id);
        table.append(tr);
      }
      box.append(table);
    }
  }

  function renderFailures(list) {
    const box = $('failure-list');
    box.replaceChildren();
    if (list.length === 0) return box.append(el('p', 'None since the dashboard started.'));
    const table = el('table');
    table.append(row(['when', 'runtime', 'task', 'name', 'error'], 'th'));
    for (const f of list) table.append(row([f.at, f.runtime, f.id, f.name, f.message]));
    return box.append(table);
  }

  async function showStoreTasks(name, after) {
    const q = new URLSearchParams({ name });
    if (after) q.set('after', after);
    const page = await get(`api/tasks?${q}`);
    const box = $('store-tasks');
    if (!after) box.replaceChildren(el('h3', `Durable tasks of ${name}`));
    const table = el('table', null, { 'data-name': name });
    table.append(row(['id', 'name', 'status', 'wait or end', 'entry', 'args', ''], 'th'));
    for (const t of page.tasks) {
      const inspect = button('History', () => showTask({ name, id: t.id }), { 'data-action': 'history' });
      const end = t.ended ? `${t.status} at ${t.ended}` : waitText(t);
      table.append(row([t.id, t.name, t.status, end, t.entry, (t.args || []).join(', '), inspect]));
    }
    box.append(table);
    if (page.next) box.append(button('More', () => showStoreTasks(name, page.next)));
  }

  function renderNames(names) {
    if (names === null) return;
    $('store').hidden = false;
    const box = $('name-list');
    box.replaceChildren();
    if (names.length === 0) box.append(el('p', 'The store holds no name.'));
    for (const n of names) box.append(button(n, () => showStoreTasks(n), { 'data-action': 'name' }));
  }

  async function showTask(which) {
    const t = await get(`api/task?${new URLSearchParams(which)}`);
    $('detail').hidden = false;
    $('detail-id').textContent = t.id;
    const dl = $('detail-fields');
    dl.replaceChildren();
    for (const key of ['status', 'name', 'meta', 'durable', 'entry', 'key', 'args']) {
      if (t[key] === undefined) continue;
      dl.append(el('dt', key));
      const v = t[key];
      dl.append(el('dd', Array.isArray(v) ? v.join(', ') : typeof v === 'object' ? JSON.stringify(v) : v));
    }
    if (t.waiting) {
      dl.append(el('dt', 'wait'));
      dl.append(el('dd', waitText(t)));
    }
    const where = t.where ? t.where.traceback || t.where.error : 'Not a live task here.';
    $('detail-where').textContent = where || '';
    const history = $('detail-history');
    history.replaceChildren();
    if (t.history) {
      history.append(row(['#', 'kind', 'what', 'values'], 'th'));
      if (t.historySkipped) history.append(row(['', '', `${t.historySkipped} records not shown`, '']));
      for (const r of t.history) {
        const values = r.args || r.values || [];
        const what = [r.what, r.instruction, r.deadline && `until ${r.deadline}`, r.error].filter(Boolean).join(' ');
        history.append(row([r.seq, r.kind, what, values.join(', ')]));
      }
    } else {
      history.append(row(['Not a durable task with a store.']));
    }
  }

  async function refresh() {
    try {
      const o = await get('api/overview');
      allowActions = o.allowActions;
      $('mode').textContent = allowActions ? 'actions enabled' : 'read-only';
      renderRuntimes(o.runtimes);
      renderFailures(o.failures);
      renderNames(o.names);
      say(`Updated ${new Date().toLocaleTimeString()}.`);
      document.body.setAttribute('data-loaded', '1');
    } catch (e) {
      say(e.message, true);
    }
  }

  $('refresh').addEventListener('click', () => refresh());
  refresh();
})();
