import Joi from 'joi';
import { loginResponse } from '../auth/auth.schemas';

// Where to send the browser after a successful sign-in: a path on this site only (no scheme, no host, no `//`
// or backslash that a browser could read as another host), so the callback cannot become an open redirect.
const relativePath = () =>
  Joi.string()
    .max(2000)
    .custom((value: string, helpers) => {
      const base = new URL('https://service.invalid');
      let resolved: URL | undefined;
      try {
        resolved = new URL(value, base);
      } catch {
        resolved = undefined;
      }
      const plain = value.startsWith('/') && !value.startsWith('//') && !/[\\\u0000-\u001f\u007f]/.test(value);
      if (!plain || !resolved || resolved.origin !== base.origin) {
        return helpers.message({ custom: '{{#label}} must be a relative path that starts with a single /' });
      }
      return value;
    });

export const startQuery = Joi.object({
  redirect_after: relativePath(),
});

// Providers add parameters of their own to the redirect (Google: scope, authuser, prompt, hd): allowed, ignored.
export const callbackQuery = Joi.object({
  code: Joi.string().max(2048),
  state: Joi.string().max(512),
  error: Joi.string().max(200),
  error_description: Joi.string().max(2000).allow(''),
  error_uri: Joi.string().max(2000),
  iss: Joi.string().max(2048),
}).unknown(true);

// The callback answers like password login: a session, or a partial token when the user has TOTP on. With a
// redirect_after from the start step, the session instead comes as cookies on a 302 to that path (no body).
export const callbackResponse = loginResponse;
