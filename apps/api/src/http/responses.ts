// Building blocks of documented response shapes (see RouteSpec.response).
import Joi from 'joi';

export const timestamp = () => Joi.string().isoDate();
export const nullableTimestamp = () => Joi.string().isoDate().allow(null);
export const nullableString = () => Joi.string().allow(null);
export const id = (prefix: string) => Joi.string().pattern(new RegExp(`^${prefix}_[0-9a-z]{26}$`), `${prefix} id`);
export const nullableId = (prefix: string) => id(prefix).allow(null);

/** `{ data: [item...], next_cursor }` */
export const page = (item: Joi.Schema) =>
  Joi.object({ data: Joi.array().items(item), next_cursor: Joi.string().allow(null) });

/** `{ data: [item...] }` for short, unpaginated lists. */
export const list = (item: Joi.Schema) => Joi.object({ data: Joi.array().items(item) });
