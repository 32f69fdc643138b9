// Deterministic JSON: object keys sorted (UTF-16 code unit order, as RFC 8785), no whitespace, arrays in order,
// numbers and strings serialised exactly as JSON.stringify does. Same input value -> same bytes.
//
// Rules, applied the same way everywhere:
// - an object property whose value is `undefined` is omitted (an optional field that is not set);
// - `undefined` anywhere else (array element, top level), functions, symbols, bigints, NaN and +-Infinity,
//   Map, Set and cyclic structures throw a TypeError instead of being silently changed;
// - a value with a `toJSON` method (Date, for instance) is replaced by what that method returns;
// - a `JsonNumberLiteral` is written verbatim (for a number that must keep its decimals, such as `1.500`).

const JSON_NUMBER = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;

/** A JSON number written exactly as given, e.g. `new JsonNumberLiteral('1700000000.500')`. */
export class JsonNumberLiteral {
  readonly text: string;

  constructor(text: string) {
    if (typeof text !== 'string' || !JSON_NUMBER.test(text)) {
      throw new TypeError(`Not a JSON number: ${String(text)}`);
    }
    this.text = text;
  }

  toJSON(): number {
    return Number(this.text);
  }
}

function compareKeys(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function serialise(value: unknown, path: string, seen: Set<object>): string {
  if (value instanceof JsonNumberLiteral) {
    return value.text;
  }
  if (value !== null && typeof value === 'object' && typeof (value as { toJSON?: unknown }).toJSON === 'function') {
    return serialise((value as { toJSON: () => unknown }).toJSON(), path, seen);
  }
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'number':
      if (!Number.isFinite(value)) {
        throw new TypeError(`Canonical JSON refuses the non-finite number ${value} at ${path}`);
      }
      return JSON.stringify(value);
    case 'undefined':
      throw new TypeError(`Canonical JSON refuses undefined at ${path}`);
    case 'bigint':
    case 'function':
    case 'symbol':
      throw new TypeError(`Canonical JSON refuses a ${typeof value} at ${path}`);
    default:
      break;
  }
  if (value === null) {
    return 'null';
  }
  const object = value as object;
  if (object instanceof Map || object instanceof Set) {
    throw new TypeError(`Canonical JSON refuses a ${object.constructor.name} at ${path}`);
  }
  if (seen.has(object)) {
    throw new TypeError(`Canonical JSON refuses a cyclic structure at ${path}`);
  }
  seen.add(object);
  try {
    if (Array.isArray(object)) {
      const items: string[] = [];
      for (let i = 0; i < object.length; i += 1) {
        items.push(serialise(object[i], `${path}[${i}]`, seen));
      }
      return `[${items.join(',')}]`;
    }
    const record = object as Record<string, unknown>;
    const members: string[] = [];
    for (const key of Object.keys(record).sort(compareKeys)) {
      const member = record[key];
      if (member === undefined) {
        continue;
      }
      members.push(`${JSON.stringify(key)}:${serialise(member, `${path}.${key}`, seen)}`);
    }
    return `{${members.join(',')}}`;
  } finally {
    seen.delete(object);
  }
}

/** Deterministic JSON text of `value` (see the rules at the top of this file). */
export function canonicalJson(value: unknown): string {
  return serialise(value, '$', new Set());
}

/** Deterministic JSON of `value` as UTF-8 bytes: what is sent and signed. */
export function canonicalJsonBuffer(value: unknown): Buffer {
  return Buffer.from(canonicalJson(value), 'utf8');
}
