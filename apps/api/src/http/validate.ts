// Request validation with joi. A body, query or path that does not match its schema is 400; refusing a
// well-formed value (an unknown scope, a non-HTTPS URL...) is the service's job and answers 422.
import type { RequestHandler } from 'express';
import Joi from 'joi';
import { HttpError } from './errors';

export interface RequestSchemas {
  body?: Joi.Schema;
  query?: Joi.Schema;
  params?: Joi.Schema;
}

// joi's pattern messages quote the value; a credential field (token, api_token, authorization, a client secret) is
// checked by pattern, and a credential is never sent back, not even malformed: these name the field only.
const VALUE_FREE_MESSAGES = {
  'string.pattern.base': '{{#label}} fails to match the required pattern: {{#regex}}',
  'string.pattern.name': '{{#label}} fails to match the {{#name}} pattern',
  'string.pattern.invert.base': '{{#label}} matches the inverted pattern: {{#regex}}',
  'string.pattern.invert.name': '{{#label}} matches the inverted {{#name}} pattern',
};

const OPTIONS: Joi.ValidationOptions = { abortEarly: true, convert: true };
/** Path parameters of a route without a params schema: any names, checked for NUL characters only. */
const ANY_PARAMS = Joi.object().unknown(true);

/**
 * The schema with the value-free messages, made once per route: passed to every validate() call instead, joi
 * compiled them on each request (about 15 µs a schema, on every request of every route).
 */
const valueFree = (schema: Joi.Schema) => schema.prefs({ messages: VALUE_FREE_MESSAGES });

function check<T>(schema: Joi.Schema, value: unknown, where: string): T {
  const { value: validated, error } = schema.validate(value ?? {}, OPTIONS);
  if (error) throw new HttpError(400, `Invalid ${where}: ${error.details[0].message.replace(/"/g, "'")}.`);
  // One walk over the value for both (it runs on every request).
  const bad = pathOfString(validated, '', (s) => UNSTORABLE.test(s));
  if (bad === null) return validated as T;
  const [field, text] = [bad.path || where, bad.text];
  if (text.includes('\u0000')) throw new HttpError(400, `Invalid ${where}: '${field}' must not contain NUL characters.`);
  throw new HttpError(400, `Invalid ${where}: '${field}' must not contain a lone UTF-16 surrogate (not valid Unicode).`);
}

// What PostgreSQL text and jsonb cannot hold (a 500 there): U+0000, and a lone surrogate, which JSON may spell
// ("\ud800") but which is no Unicode character.
const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * PostgreSQL text and jsonb cannot hold U+0000 nor a lone surrogate: the path of the first string for which `bad`
 * holds, or of the object with a key for which it holds, or null.
 */
function pathOfString(value: unknown, path: string, bad: (s: string) => boolean): { path: string; text: string } | null {
  if (typeof value === 'string') return bad(value) ? { path, text: value } : null;
  if (typeof value !== 'object' || value === null) return null;
  for (const [key, item] of Object.entries(value)) {
    if (bad(key)) return { path, text: key };
    const found = pathOfString(item, path ? `${path}.${key}` : key, bad);
    if (found !== null) return found;
  }
  return null;
}

/**
 * Validates and replaces req.body / req.query / req.params with the converted values. The path parameters are
 * checked with a schema or not: an id holding NUL names nothing PostgreSQL can store (400, not 500).
 */
export function validate(schemas: RequestSchemas): RequestHandler {
  const params = valueFree(schemas.params ?? ANY_PARAMS);
  const query = schemas.query && valueFree(schemas.query);
  const body = schemas.body && valueFree(schemas.body);
  return (req, _res, next) => {
    const checkedParams = check<typeof req.params>(params, req.params, 'path parameter');
    if (schemas.params) req.params = checkedParams;
    if (query) {
      // Express 5's req.query is a getter: shadow it with the validated value.
      Object.defineProperty(req, 'query', { value: check(query, req.query, 'query'), writable: true });
    }
    if (body) {
      if (req.body === undefined && !req.is('application/json')) {
        const hasBody = Number(req.headers['content-length'] ?? 0) > 0 || req.headers['transfer-encoding'] !== undefined;
        if (hasBody) throw new HttpError(415, 'Content-Type must be application/json.');
      }
      req.body = check(body, req.body, 'body');
    }
    next();
  };
}

export const email = () => Joi.string().trim().lowercase().email({ tlds: false }).max(254);
// bcrypt ignores bytes past 72: longer passwords are refused instead of silently truncated.
export const password = () =>
  Joi.string().min(10).custom((value: string, helpers) => {
    if (Buffer.byteLength(value, 'utf8') > 72) return helpers.message({ custom: '{{#label}} must be at most 72 bytes' });
    return value;
  });
/**
 * A name people gave something: one line of printable text. It is shown in the dashboard, in mails, in CSV exports
 * and in the SIEM formats, where a line break (or an escape sequence) in it would forge a line or a field of its own.
 */
export const name = () =>
  Joi.string()
    .trim()
    .min(1)
    .max(200)
    .pattern(/^[^\p{Cc}\p{Zl}\p{Zp}]*$/u, 'one line')
    .messages({ 'string.pattern.name': '{{#label}} must be one line of text, without control characters' });

/**
 * An ISO 8601 timestamp PostgreSQL can hold. Joi's iso() also takes expanded years (`-271821-04-20`, `+275760-…`),
 * which JavaScript parses but a timestamp column refuses (a 500): years 0001 to 9999 only, else 400.
 */
export const isoTimestamp = () => Joi.date().iso().min('0001-01-01T00:00:00.000Z').max('9999-12-31T23:59:59.999Z');

export const paginationQuery = {
  limit: Joi.number().integer().min(1).max(100).default(25),
  // A cursor is a `next_cursor` this API returned: an id (`<prefix>_<26 base32 chars>`); anything else is a 400.
  cursor: Joi.string()
    .pattern(/^[a-z]+_[0-9a-hjkmnp-tv-z]{26}$/)
    .messages({ 'string.pattern.base': '"cursor" must be a next_cursor value returned by this API' }),
};
