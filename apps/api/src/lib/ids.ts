export { newId, looksLikeId, type IdPrefix } from '@svc/db';
