// The rate-limit key of a client address (clientAddressKey): an IPv6 client counts by its /64 whatever the spelling,
// an IPv4-mapped address as its IPv4 address, and different /64s stay apart.
import { clientAddressKey } from '../src/http/rate-limit';

describe('clientAddressKey', () => {
  it('keys an IPv4 address as itself, and an unknown address apart', () => {
    expect(clientAddressKey('203.0.113.5')).toBe('ip:203.0.113.5');
    expect(clientAddressKey(undefined)).toBe('ip:unknown');
    expect(clientAddressKey('')).toBe('ip:unknown');
  });

  it.each(['::ffff:203.0.113.5', '::FFFF:203.0.113.5', '::ffff:cb00:7105', '0:0:0:0:0:ffff:203.0.113.5', '64:ff9b::203.0.113.5', '64:ff9b::cb00:7105'])(
    'keys %s (an IPv4 client seen through IPv6: mapped or NAT64-translated) as its IPv4 address',
    (ip) => {
      expect(clientAddressKey(ip)).toBe('ip:203.0.113.5');
    },
  );

  it.each([['203.0.113.5:40000', 'ip:203.0.113.5'], ['[2001:db8:1:2::1]:443', 'ip6:2001:db8:1:2::/64'], ['[::ffff:203.0.113.5]:1', 'ip:203.0.113.5']])(
    'keys %s, written by a proxy with its port, by the address alone',
    (ip, key) => {
      expect(clientAddressKey(ip)).toBe(key);
    },
  );

  it('keys every address of one /64 alike, however it is written', () => {
    const key = clientAddressKey('2001:db8:1:2::1');
    for (const ip of ['2001:db8:1:2:ffff:ffff:ffff:ffff', '2001:0db8:0001:0002::', '2001:DB8:1:2:0:0:0:9', '2001:db8:1:2::c000:201', '2001:db8:1:2::192.0.2.1']) {
      expect(clientAddressKey(ip)).toBe(key);
    }
    expect(key).toBe('ip6:2001:db8:1:2::/64');
  });

  it('keeps other /64s apart, including neighbours and short forms', () => {
    const keys = ['2001:db8:1:2::1', '2001:db8:1:3::1', '2001:db8:1::1', '2001:db8::1', '::1', 'fe80::1%eth0', '64:ff9b::192.0.2.1', '64:ff9b::192.0.2.2'].map(clientAddressKey);
    expect(new Set(keys).size).toBe(keys.length);
    expect(clientAddressKey('fe80::1%eth0')).toBe('ip6:fe80:0:0:0::/64');
    expect(clientAddressKey('::1')).toBe('ip6:0:0:0:0::/64');
  });
});
