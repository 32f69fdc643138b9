import { resolveWebhookTarget, type Lookup } from './index';

const resolvesTo = (...addresses: string[]): Lookup => async () =>
  addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));

describe('resolveWebhookTarget', () => {
  it('returns the first resolved address when every address is public', async () => {
    const result = await resolveWebhookTarget('https://hooks.example.com/x', { lookup: resolvesTo('93.184.216.34', '2606:2800:220:1::1') });
    expect(result).toEqual({ ok: true, target: expect.objectContaining({ address: '93.184.216.34', family: 4 }) });
  });

  it('refuses a name when any of its addresses is not public (DNS rebinding across records)', async () => {
    const result = await resolveWebhookTarget('https://hooks.example.com/x', { lookup: resolvesTo('93.184.216.34', '10.0.0.7') });
    expect(result).toEqual({ ok: false, reason: 'private' });
  });

  it.each([
    ['127.0.0.1', 'loopback'],
    ['169.254.169.254', 'link_local'],
    ['::1', 'loopback'],
    ['fd00::1', 'unique_local'],
  ])('refuses a name resolving to %s', async (address) => {
    const result = await resolveWebhookTarget('https://internal.example.com/', { lookup: resolvesTo(address) });
    expect(result.ok).toBe(false);
  });

  it('refuses names that do not resolve, and never looks up http URLs', async () => {
    const failing: Lookup = async () => { throw new Error('ENOTFOUND'); };
    expect(await resolveWebhookTarget('https://nowhere.invalid/', { lookup: failing })).toEqual({ ok: false, reason: 'unresolvable' });
    const spy = jest.fn(resolvesTo('93.184.216.34'));
    expect(await resolveWebhookTarget('http://hooks.example.com/', { lookup: spy })).toEqual({ ok: false, reason: 'not_https' });
    expect(spy).not.toHaveBeenCalled();
  });

  it('lets an allow-listed name resolve to loopback (development and tests only)', async () => {
    const result = await resolveWebhookTarget('https://receiver.test:8443/', {
      allowedHosts: ['receiver.test:8443'],
      lookup: resolvesTo('127.0.0.1'),
    });
    expect(result).toEqual({ ok: true, target: expect.objectContaining({ address: '127.0.0.1' }) });
  });

  it('connects to a literal public IP without a lookup', async () => {
    const spy = jest.fn(resolvesTo('10.0.0.1'));
    const result = await resolveWebhookTarget('https://[2606:4700::1111]/hook', { lookup: spy });
    expect(result).toEqual({ ok: true, target: expect.objectContaining({ address: '2606:4700::1111', family: 6 }) });
    expect(spy).not.toHaveBeenCalled();
  });
});
