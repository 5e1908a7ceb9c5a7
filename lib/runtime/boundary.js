// SPDX-License-Identifier: MIT
// The JS half of the capability boundary: what Lua may see of a JS value, found without running any of its code.
//
// The addon calls these (never Lua code directly) when a JS value enters Lua
// or Lua reads from one. None of them runs code that belongs to the value: no
// getter, no Proxy trap, no toString/valueOf, no Symbol.toStringTag. They use
// only the intrinsics captured below, so a later change to Object or
// Reflect in this realm does not change them. docs/security.md has the
// policy they implement.
'use strict';

const { isProxy, isMap, isNativeError } = require('node:util').types;

const { getOwnPropertyDescriptor, getPrototypeOf, freeze, create, hasOwn, isExtensible, defineProperty } = Object;
const StringCtor = String;
const { apply } = Reflect;

// V8's own getter of an error's `stack`. From Node 22 (V8 12) every error
// carries `stack` as an own accessor with this one shared getter (Node 20 had
// a data property); it formats the captured trace and runs no code of the
// error's (only the host's Error.prepareStackTrace, as Node 20's did). Errors
// made in another realm (a vm context) have that realm's getter, not this one.
const STACK_GETTER = getOwnPropertyDescriptor(new Error(), 'stack')?.get;

// `this` of every JS function Lua calls: never globalThis (a sloppy-mode
// function given undefined or null gets globalThis), and nothing to reach
// from: no prototype, no properties, frozen, the same object for every call.
const RECEIVER = freeze(create(null));

// How a JS object crosses into Lua (native/addon/values/js_to_lua.cpp reads these numbers).
const KIND_PLAIN = 0; // copied into a table
const KIND_MAP = 1; // copied into a table keyed by its converted keys
const KIND_OBJECT = 2; // by reference: own data properties readable
const KIND_ERROR = 3; // an error value: message, name, code, stack as strings
const KIND_OPAQUE = 4; // a Proxy: by reference, nothing readable (its traps are its code)

/**
 * The kind of a JS object crossing into Lua (not an Array, typed array or
 * ArrayBuffer: the addon recognises those itself).
 * @param {object} v
 * @returns {number} one of the KIND_ numbers
 */
function classify(v) {
  if (isProxy(v)) return KIND_OPAQUE; // getPrototypeOf on it would run a trap
  if (isNativeError(v)) return KIND_ERROR;
  const proto = getPrototypeOf(v);
  // Plain: the prototype is null or an Object.prototype (of any realm: Jest
  // and vm contexts have their own), i.e. a prototype whose own prototype is null.
  if (proto === null) return KIND_PLAIN;
  if (isProxy(proto)) return KIND_OBJECT;
  if (getPrototypeOf(proto) === null) return KIND_PLAIN;
  return isMap(v) ? KIND_MAP : KIND_OBJECT;
}

/**
 * An own data property of a by-reference object, else undefined (absent, an
 * accessor, or a Proxy: nothing is read from one).
 * @param {object} obj
 * @param {string|number} key
 */
function readOwn(obj, key) {
  if (isProxy(obj)) return undefined;
  const d = getOwnPropertyDescriptor(obj, key);
  return d !== undefined && hasOwn(d, 'value') ? d.value : undefined;
}

// The first data property `key` on o's prototype chain, else undefined: an
// accessor or a Proxy on the way ends the search (nothing of theirs runs).
// V8's stack getter counts as data: it is how Node 22+ gives an error's stack.
function findData(o, key) {
  while (o !== null) {
    if (isProxy(o)) return undefined;
    const d = getOwnPropertyDescriptor(o, key);
    if (d !== undefined) {
      if (hasOwn(d, 'value')) return d.value;
      const v8Stack = key === 'stack' && STACK_GETTER !== undefined && d.get === STACK_GETTER;
      return v8Stack ? apply(STACK_GETTER, o, []) : undefined;
    }
    o = getPrototypeOf(o);
  }
  return undefined;
}

// A field value as text: strings as they are, numbers, booleans and BigInts
// spelled out; anything else (an object whose toString would run) is absent.
function asText(v) {
  switch (typeof v) {
    case 'string':
      return v;
    case 'number':
    case 'boolean':
    case 'bigint':
      return StringCtor(v);
    default:
      return undefined;
  }
}

const isObject = (v) => v !== null && (typeof v === 'object' || typeof v === 'function');

/**
 * One field of a JS error value as a string, or undefined.
 * @param {*} thrown what JS threw (any value)
 * @param {'message'|'name'|'code'|'stack'} key
 */
function errorField(thrown, key) {
  if (!isObject(thrown)) return key === 'message' ? StringCtor(thrown) : undefined;
  if (typeof thrown === 'function') return undefined; // a thrown function: nothing of it
  return asText(findData(thrown, key));
}

/**
 * What tostring() of a JS error value gives: "name: message" as
 * Error.prototype.toString spells it, computed from data properties only.
 * @param {*} thrown
 * @returns {string}
 */
function errorText(thrown) {
  if (!isObject(thrown)) return StringCtor(thrown); // String(symbol) runs no code either
  if (typeof thrown === 'function') return '(error object is a JS function)';
  if (isProxy(thrown)) return '(error object is a JS Proxy)';
  const name = asText(findData(thrown, 'name'));
  const message = asText(findData(thrown, 'message'));
  if (name === undefined && message === undefined) return '(error object is a JS object)';
  const n = name === undefined ? 'Error' : name;
  const m = message === undefined ? '' : message;
  if (n === '') return m;
  if (m === '') return n;
  return `${n}: ${m}`;
}

// node-addon-api keeps a thrown primitive (a string, a number...) inside an
// object under this key (Napi::Error::ERROR_WRAP_VALUE, private there). The
// round trip of every primitive is tested (test/js/security/boundary-errors.test.js).
const WRAP_KEY = '4bda9e7e-4913-4dbc-95de-891cbf66598e-errorVal';

/**
 * What JS threw, from the value a caught Napi::Error holds: that value
 * itself, or the primitive node-addon-api wrapped. Runs no code of it (the
 * addon's own unwrapping asks a Proxy's `has` trap).
 * @param {object} held
 */
function unwrapThrown(held) {
  if (!isObject(held) || isProxy(held)) return held;
  const d = getOwnPropertyDescriptor(held, WRAP_KEY);
  return d !== undefined && hasOwn(d, 'value') ? d.value : held;
}

const WHERE_KEYS = freeze(['luaStack', 'source', 'line']);

/**
 * Tells a JS value that ended a task (a rejection the task awaited, an
 * error a JS function threw) where in Lua that was: `luaStack`, `source`,
 * `line` become its own properties, not enumerable (it is the caller's own
 * object: its JSON and its keys stay as they were). The value itself is
 * never replaced: a primitive, a Proxy (its traps are its code), an object
 * that is not extensible, and a name it already has own are left alone.
 * @param {*} thrown
 * @param {{ luaStack?: string, source?: string, line?: number }} where
 */
function addWhere(thrown, where) {
  if (!isObject(thrown) || isProxy(thrown) || !isExtensible(thrown)) return;
  for (const key of WHERE_KEYS) {
    if (where[key] === undefined || hasOwn(thrown, key)) continue;
    defineProperty(thrown, key, { value: where[key], writable: true, configurable: true, enumerable: false });
  }
}

module.exports = { RECEIVER, classify, readOwn, errorField, errorText, unwrapThrown, addWhere };
