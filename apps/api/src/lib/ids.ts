export { newId, type IdPrefix } from '@svc/db';
