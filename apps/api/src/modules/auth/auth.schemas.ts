import Joi from 'joi';
import { email, name, password } from '../../http/validate';

/** Signup, and the CLI's create-owner (same rules: same schema). */
export const signupBody = Joi.object({
  email: email().required(),
  password: password().required(),
  name: name().required(),
  organization_name: name().required(),
});

export const verifyEmailBody = Joi.object({
  token: Joi.string().max(200).required(),
});

// At login the password only has to be present (older accounts may predate the length rule), but it is still
// refused past 72 bytes rather than letting bcrypt silently compare a truncated value.
export const loginBody = Joi.object({
  email: email().required(),
  password: password().min(1).required(),
  organization_id: Joi.string().max(100),
});

const totpCode = () => Joi.string().trim().pattern(/^\d{6}$/).messages({ 'string.pattern.base': '{{#label}} must be 6 digits' });

export const login2faBody = Joi.object({
  partial_token: Joi.string().max(4096).required(),
  code: totpCode().required(),
});

export const totpCodeBody = Joi.object({
  code: totpCode().required(),
});
