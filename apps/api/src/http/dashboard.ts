// Serves the dashboard (apps/web's build) from the API process: same origin, so the session cookie and the CSRF
// token work unchanged. Static files under their own paths; any other GET that asks for HTML (a browser opening a
// client-side route such as /verify-email?token=...) gets index.html. /api/* is never touched here, and a request
// that does not accept HTML falls through to the JSON 404.
import { existsSync } from 'node:fs';
import path from 'node:path';
import express, { type RequestHandler, type Router } from 'express';
import type { Logger } from 'winston';

/** apps/web/dist, seen from apps/api/{src,dist}/http. */
export const DEFAULT_WEB_DIST_DIR = path.resolve(__dirname, '../../../web/dist');

function isApiPath(requestPath: string): boolean {
  return requestPath === '/api' || requestPath.startsWith('/api/');
}

function wantsHtml(req: express.Request): boolean {
  return (req.method === 'GET' || req.method === 'HEAD') && req.accepts(['json', 'html']) === 'html';
}

function indexFallback(indexFile: string): RequestHandler {
  return (req, res, next) => {
    if (isApiPath(req.path) || !wantsHtml(req)) return next();
    // A page with stricter caching rules of its own (a shared report: no-store) keeps them.
    if (!res.get('Cache-Control')) res.set('Cache-Control', 'no-cache');
    res.sendFile(indexFile);
  };
}

/** The dashboard's router, or undefined (logged) when its build is missing. */
export function dashboardRouter(distDir: string | undefined, logger: Logger): Router | undefined {
  const root = path.resolve(distDir ?? DEFAULT_WEB_DIST_DIR);
  const indexFile = path.join(root, 'index.html');
  if (!existsSync(indexFile)) {
    logger.warn('dashboard build not found: the dashboard is not served', { webDistDir: root });
    return undefined;
  }
  const router = express.Router();
  const statics = express.static(root, { index: false, fallthrough: true, maxAge: '1h' });
  router.use((req, res, next) => (isApiPath(req.path) ? next() : statics(req, res, next)));
  router.use(indexFallback(indexFile));
  return router;
}
