import type { Response } from 'express';
import Joi from 'joi';
import type { AppDeps } from '../../app-deps';
import type { RouteSpec } from '../../http/route';
import { sessionResponse, setPartialTokenCookie, setSessionCookies } from '../auth/sessions';
import { requestMeta } from '../audit/audit.context';
import { callbackQuery, callbackResponse, startQuery } from './oauth.schemas';
import {
  createProviders,
  finishSignIn,
  flowCookieName,
  flowCookiePath,
  providerOrThrow,
  startPersonalConnection,
  startSignIn,
  type CallbackQuery,
} from './oauth.service';
import type { ProviderName } from './provider';
import { principalOf } from '../../auth/principal';

export function oauthRoutes(deps: AppDeps): RouteSpec[] {
  const providers = createProviders(deps);
  const secure = deps.config.cookieSecure;
  // SameSite=Lax, not Strict: the cookie must come along on the top-level redirect back from the provider.
  const flowCookie = (provider: ProviderName) => ({
    httpOnly: true,
    secure,
    sameSite: 'lax' as const,
    path: flowCookiePath(deps.config.publicBaseUrl, provider),
  });
  const noStore = (res: Response) => res.set({ 'Cache-Control': 'no-store', Pragma: 'no-cache' });

  return [
    {
      method: 'get',
      path: '/auth/providers',
      scope: 'public',
      summary: 'The sign-in methods this deployment offers: password, and each OAuth provider that is configured',
      response: Joi.object({
        password: Joi.boolean().valid(true).required(),
        oauth: Joi.array().items(Joi.string().valid('github', 'google')).required(),
      }),
      handler: () => ({ password: true, oauth: (['github', 'google'] as const).filter((name) => deps.config.oauth[name]) }),
    },
    {
      method: 'get',
      path: '/auth/oauth/:provider/start',
      scope: 'public',
      summary: "Start sign-in with GitHub or Google: redirects to the provider's authorization page (state, PKCE, nonce)",
      schemas: { query: startQuery },
      handler: async (req, res) => {
        const provider = providerOrThrow(providers, req.params.provider as string);
        const query = req.query as { redirect_after?: string };
        const { location, flowId } = await startSignIn(deps, provider, query.redirect_after);
        noStore(res);
        res.cookie(flowCookieName(provider.name), flowId, {
          ...flowCookie(provider.name),
          maxAge: deps.config.oauth.stateTtlSeconds * 1000,
        });
        res.redirect(302, location);
        return undefined;
      },
    },
    {
      method: 'get',
      path: '/profile/source-connections/:provider/connect',
      scope: 'source:connect_personal',
      summary:
        'Connect your personal GitHub account (a browser link): redirects to GitHub asking for `repo read:user`; the callback ' +
        '(the sign-in callback) stores the sealed token and returns to /profile',
      handler: async (req, res) => {
        const provider = providerOrThrow(providers, req.params.provider as string);
        const { location, flowId } = await startPersonalConnection(deps, provider, principalOf(req).userId);
        noStore(res);
        res.cookie(flowCookieName(provider.name), flowId, { ...flowCookie(provider.name), maxAge: deps.config.oauth.stateTtlSeconds * 1000 });
        res.redirect(302, location);
        return undefined;
      },
    },
    {
      method: 'get',
      path: '/auth/oauth/:provider/callback',
      scope: 'public',
      summary:
        'Finish sign-in with a provider: a session (token and cookies, or a redirect to redirect_after), or a partial token when 2FA is on ' +
        "(with redirect_after: a redirect to the dashboard's /login/2fa page, the partial token in an httpOnly cookie for POST /auth/login/2fa only)",
      schemas: { query: callbackQuery },
      response: callbackResponse,
      handler: async (req, res) => {
        const provider = providerOrThrow(providers, req.params.provider as string);
        noStore(res);
        const cookieName = flowCookieName(provider.name);
        const flowId: unknown = req.cookies?.[cookieName];
        // The flow is single use whatever the outcome: the browser forgets it too.
        if (flowId !== undefined) res.clearCookie(cookieName, flowCookie(provider.name));
        const { outcome, redirectAfter } = await finishSignIn(
          deps,
          provider,
          typeof flowId === 'string' ? flowId : undefined,
          req.query as CallbackQuery,
          requestMeta(req),
        );
        if (outcome.kind === 'connected') {
          res.redirect(302, redirectAfter ?? '/profile');
          return undefined;
        }
        if (outcome.kind === 'two_factor') {
          if (!redirectAfter) return { requires_2fa: true, partial_token: outcome.partialToken };
          // A browser sign-in: on to the dashboard's TOTP step, the token out of reach of script, URL and history.
          setPartialTokenCookie(res, outcome.partialToken, {
            publicBaseUrl: deps.config.publicBaseUrl,
            secure,
            ttlSeconds: deps.config.partialTokenTtlSeconds,
          });
          res.redirect(302, `/login/2fa?next=${encodeURIComponent(redirectAfter)}`);
          return undefined;
        }
        setSessionCookies(res, outcome.session, secure);
        if (redirectAfter) {
          res.redirect(302, redirectAfter);
          return undefined;
        }
        return sessionResponse(outcome.session);
      },
    },
  ];
}
