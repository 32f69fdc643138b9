import { credentialBoundElsewhere, credentialDestination, credentialsLeftBehind, sameCredentialDestination } from './credential-destination';

describe('credentialDestination', () => {
  it.each([
    ['https://api.github.com', 'https://api.github.com:443'],
    ['https://API.GitHub.com/repos/a/b?x=1#f', 'https://api.github.com:443'],
    ['https://ghe.example.com:8443/api/v3', 'https://ghe.example.com:8443'],
    ['https://ghe.example.com:443/api/v3', 'https://ghe.example.com:443'],
    ['https://ghe.example.com./api/v3', 'https://ghe.example.com:443'],
    ['http://ghe.example.com/', 'http://ghe.example.com:80'],
    ['https://[::1]:9000/x', 'https://[::1]:9000'],
    ['https://xn--bcher-kva.example/', 'https://xn--bcher-kva.example:443'],
    ['https://bücher.example/', 'https://xn--bcher-kva.example:443'],
  ])('%s is bound to %s', (url, destination) => {
    expect(credentialDestination(url)).toBe(destination);
  });

  it.each(['', 'not a url', '/relative/path', 'mailto:someone@example.com'])('%j has no destination', (url) => {
    expect(credentialDestination(url)).toBeNull();
  });
});

describe('sameCredentialDestination', () => {
  it('keeps the destination across a path, query or default-port spelling', () => {
    expect(sameCredentialDestination('https://hec.example.com/services/collector', 'https://hec.example.com:443/other?x=1')).toBe(true);
  });

  it.each([
    ['another host', 'https://evil.example.com/services/collector'],
    ['a subdomain', 'https://a.hec.example.com/services/collector'],
    ['another port', 'https://hec.example.com:8088/services/collector'],
    ['another scheme', 'http://hec.example.com/services/collector'],
    ['an unparsable URL', 'hec.example.com/services/collector'],
  ])('changes it for %s', (_what, to) => {
    expect(sameCredentialDestination('https://hec.example.com/services/collector', to)).toBe(false);
  });

  it('never matches from an unparsable URL', () => {
    expect(sameCredentialDestination('', '')).toBe(false);
  });
});

describe('credentialsLeftBehind', () => {
  const stored = { field: 'token', stored: true, supplied: false };

  it('names a stored credential the request does not give again when the destination changes', () => {
    expect(credentialsLeftBehind('https://a.example.com/api', 'https://b.example.com/api', [stored])).toEqual(['token']);
  });

  it('is empty when the URL is absent, the destination is kept, or the credential is given again or removed', () => {
    expect(credentialsLeftBehind('https://a.example.com/api', undefined, [stored])).toEqual([]);
    expect(credentialsLeftBehind('https://a.example.com/api', 'https://a.example.com/v2', [stored])).toEqual([]);
    expect(credentialsLeftBehind('https://a.example.com/api', 'https://b.example.com/api', [{ ...stored, supplied: true }])).toEqual([]);
    expect(credentialsLeftBehind('https://a.example.com/api', 'https://b.example.com/api', [{ ...stored, stored: false }])).toEqual([]);
  });

  it('names every credential left behind', () => {
    const both = [stored, { field: 'azure_client_secret', stored: true, supplied: false }];
    expect(credentialsLeftBehind('https://a.example.com/', 'https://b.example.com/', both)).toEqual(['token', 'azure_client_secret']);
  });
});

describe('credentialBoundElsewhere', () => {
  it('refuses a URL on another destination than the one the credential is bound to', () => {
    expect(credentialBoundElsewhere('https://a.example.com:443', 'https://b.example.com/x')).toBe(true);
    expect(credentialBoundElsewhere('https://a.example.com:443', 'https://a.example.com:8443/x')).toBe(true);
    expect(credentialBoundElsewhere('https://a.example.com:443', 'not a url')).toBe(true);
  });

  it('allows the bound destination, and a credential not bound yet', () => {
    expect(credentialBoundElsewhere('https://a.example.com:443', 'https://A.example.com/other?q=1')).toBe(false);
    expect(credentialBoundElsewhere(null, 'https://b.example.com/x')).toBe(false);
  });
});
