import { cacheLifetimeMs, describeTokenAnswer, tokenEndpoint } from '../src/http/entra-token';

const CREDENTIALS = { tenant_id: 't', client_id: 'c', client_secret: 's3cr3t-value' };

describe('Entra ID token rules', () => {
  it('keeps a token until shortly before it expires: a fifth of its life, at most five minutes', () => {
    expect(cacheLifetimeMs(3599)).toBe(3599_000 - 300_000);
    expect(cacheLifetimeMs(5)).toBe(4000);
    expect(cacheLifetimeMs(0)).toBe(0);
  });

  it('builds the v2.0 token endpoint of a tenant', () => {
    expect(tokenEndpoint('https://login.microsoftonline.us', 'contoso.onmicrosoft.com')).toBe(
      'https://login.microsoftonline.us/contoso.onmicrosoft.com/oauth2/v2.0/token',
    );
  });

  it('says what the endpoint answered, without the client secret', () => {
    const body = JSON.stringify({ error: 'invalid_client', error_description: 'AADSTS7000215: Invalid client secret s3cr3t-value provided.\nTrace ID: x' });
    const text = describeTokenAnswer(401, body, CREDENTIALS);
    expect(text).toBe('token endpoint answered HTTP 401: invalid_client: AADSTS7000215: Invalid client secret [redacted] provided.');
    expect(describeTokenAnswer(502, '<html>bad gateway</html>', CREDENTIALS)).toBe('token endpoint answered HTTP 502: <html>bad gateway</html>');
  });
});
