import { classifyIpAddress, isAllowListed, validateWebhookUrl, type IpRejectionReason } from './url-safety';

const PUBLIC: string[] = [
  '8.8.8.8',
  '1.1.1.1',
  '9.9.9.9',
  '93.184.216.34',
  '100.63.255.255', // just below CGNAT
  '100.128.0.0', // just above CGNAT
  '172.15.255.255', // just below 172.16/12
  '172.32.0.0', // just above 172.16/12
  '169.253.255.255',
  '192.0.1.255',
  '192.0.3.0',
  '192.167.255.255',
  '192.169.0.0',
  '198.17.255.255',
  '198.20.0.0',
  '198.51.99.255',
  '203.0.112.255',
  '223.255.255.255',
  '11.0.0.1',
  '126.255.255.255',
  '128.0.0.1',
  '2606:4700::1111',
  '2606:4700:4700::1001',
  '2001:4860:4860::8888',
  '2a00:1450:4001:82b::200e',
  '[2606:4700::1111]',
  '::ffff:8.8.8.8',
  '::ffff:808:808',
  '64:ff9b::8.8.8.8',
  '64:ff9b::101:101',
  '2002:0808:0808::1', // 6to4 of 8.8.8.8
  '2001:0:0808:0808::f7f7:f7f7', // Teredo: server 8.8.8.8, client 8.8.8.8
  '2001:4::1', // AS112-v6, in 2001::/23 but globally reachable
  '3000::1',
  '3fff:f000::1', // just after 3fff::/20
];

const NON_PUBLIC: Array<[string, IpRejectionReason]> = [
  // IPv4
  ['0.0.0.0', 'unspecified'],
  ['0.1.2.3', 'unspecified'],
  ['10.0.0.1', 'private'],
  ['10.255.255.255', 'private'],
  ['100.64.0.1', 'cgnat'],
  ['100.127.255.255', 'cgnat'],
  ['100.100.100.200', 'cgnat'],
  ['127.0.0.1', 'loopback'],
  ['127.255.255.254', 'loopback'],
  ['169.254.0.1', 'link_local'],
  ['169.254.169.254', 'cloud_metadata'],
  ['168.63.129.16', 'cloud_metadata'], // Azure WireServer / platform address
  ['169.254.170.2', 'link_local'],
  ['172.16.0.1', 'private'],
  ['172.31.255.255', 'private'],
  ['192.0.0.8', 'protocol_assignment'],
  ['192.0.2.1', 'documentation'],
  ['192.88.99.1', 'reserved'],
  ['192.168.0.1', 'private'],
  ['192.168.255.255', 'private'],
  ['198.18.0.1', 'benchmarking'],
  ['198.19.255.255', 'benchmarking'],
  ['198.51.100.7', 'documentation'],
  ['203.0.113.9', 'documentation'],
  ['224.0.0.1', 'multicast'],
  ['239.255.255.250', 'multicast'],
  ['240.0.0.1', 'reserved'],
  ['254.255.255.255', 'reserved'],
  ['255.255.255.255', 'broadcast'],
  // IPv6
  ['::', 'unspecified'],
  ['::1', 'loopback'],
  ['0:0:0:0:0:0:0:1', 'loopback'],
  ['[::1]', 'loopback'],
  ['fe80::1', 'link_local'],
  ['febf:ffff::1', 'link_local'],
  ['fec0::1', 'site_local'],
  ['fc00::1', 'unique_local'],
  ['fd12:3456:789a::1', 'unique_local'],
  ['fd00:ec2::254', 'unique_local'],
  ['ff02::1', 'multicast'],
  ['ff05::1:3', 'multicast'],
  ['2001:db8::1', 'documentation'],
  ['2001:db8:ffff::1', 'documentation'],
  ['3fff::1', 'documentation'],
  ['2001:2::1', 'benchmarking'],
  ['2001:10::1', 'reserved'],
  ['2001:20::1', 'reserved'],
  ['100::1', 'reserved'],
  ['5f00::1', 'reserved'],
  ['4000::1', 'reserved'],
  ['::2', 'unspecified'], // IPv4-compatible form of 0.0.0.2
  ['64:ff9b:1::1', 'private'],
  // IPv4 embedded in IPv6
  ['::ffff:127.0.0.1', 'loopback'],
  ['::ffff:7f00:1', 'loopback'],
  ['::FFFF:7F00:0001', 'loopback'],
  ['0:0:0:0:0:ffff:7f00:1', 'loopback'],
  ['::ffff:10.0.0.1', 'private'],
  ['::ffff:a00:1', 'private'],
  ['::ffff:169.254.169.254', 'cloud_metadata'],
  ['::ffff:a9fe:a9fe', 'cloud_metadata'],
  ['::ffff:0.0.0.0', 'unspecified'],
  ['::ffff:192.168.1.1', 'private'],
  ['::ffff:100.64.0.1', 'cgnat'],
  ['::ffff:0:127.0.0.1', 'loopback'],
  ['::127.0.0.1', 'loopback'],
  ['::7f00:1', 'loopback'],
  ['::10.1.2.3', 'private'],
  ['::8.8.8.8', 'reserved'],
  ['64:ff9b::127.0.0.1', 'loopback'],
  ['64:ff9b::7f00:1', 'loopback'],
  ['64:ff9b::a9fe:a9fe', 'cloud_metadata'],
  ['64:ff9b::192.168.0.1', 'private'],
  ['2002:7f00:0001::1', 'loopback'],
  ['2002:c0a8:0101::1', 'private'],
  ['2002:a9fe:a9fe::', 'cloud_metadata'],
  ['2001:0:7f00:1::1', 'loopback'], // Teredo server 127.0.0.1
  ['2001:0:0808:0808::f5ff:fffe', 'private'], // Teredo client ~0a00:0001 = 10.0.0.1
  // Not addresses
  ['', 'unparsable'],
  ['localhost', 'unparsable'],
  ['example.com', 'unparsable'],
  ['256.1.1.1', 'unparsable'],
  ['1.2.3', 'unparsable'],
  ['1.2.3.4.5', 'unparsable'],
  ['01.2.3.4', 'unparsable'],
  ['0x7f.0.0.1', 'unparsable'],
  ['2130706433', 'unparsable'],
  ['1.2.3.4\n5', 'unparsable'],
  [':::1', 'unparsable'],
  ['1::2::3', 'unparsable'],
  ['12345::1', 'unparsable'],
  ['1:2:3:4:5:6:7:8:9', 'unparsable'],
  ['gggg::1', 'unparsable'],
  ['fe80::1%eth0', 'scoped_address'],
  ['::ffff:1.2.3.256', 'unparsable'],
];

describe('classifyIpAddress', () => {
  it.each(PUBLIC)('%s is public', (ip) => {
    expect(classifyIpAddress(ip)).toEqual({ public: true });
  });

  it.each(NON_PUBLIC)('%s is not public (%s)', (ip, reason) => {
    const result = classifyIpAddress(ip);
    expect(result.public).toBe(false);
    expect(result).toMatchObject({ public: false, reason });
  });

  it('says how a non-public IPv4 address was embedded', () => {
    expect(classifyIpAddress('::ffff:127.0.0.1')).toEqual({ public: false, reason: 'loopback', embeddedIn: 'ipv4_mapped' });
    expect(classifyIpAddress('::127.0.0.1')).toEqual({ public: false, reason: 'loopback', embeddedIn: 'ipv4_compatible' });
    expect(classifyIpAddress('64:ff9b::7f00:1')).toEqual({ public: false, reason: 'loopback', embeddedIn: 'nat64' });
    expect(classifyIpAddress('2002:7f00:1::1')).toEqual({ public: false, reason: 'loopback', embeddedIn: '6to4' });
    expect(classifyIpAddress('2001:0:7f00:1::1')).toEqual({ public: false, reason: 'loopback', embeddedIn: 'teredo' });
    expect(classifyIpAddress('::ffff:0:7f00:1')).toEqual({ public: false, reason: 'loopback', embeddedIn: 'ipv4_translated' });
  });

  it('refuses non-strings', () => {
    expect(classifyIpAddress(undefined as unknown as string)).toEqual({ public: false, reason: 'unparsable' });
  });
});

describe('validateWebhookUrl', () => {
  it.each([
    'https://hooks.example.com/webhook',
    'https://hooks.example.com:8443/path?x=1#frag',
    'https://8.8.8.8/hook',
    'https://[2606:4700::1111]/hook',
    'https://xn--bcher-kva.example/hook',
    'HTTPS://Hooks.Example.COM/hook',
  ])('accepts %s', (url) => {
    const result = validateWebhookUrl(url);
    expect(result.ok).toBe(true);
    if (result.ok) {
      expect(result.url).toBeInstanceOf(URL);
      expect(result.allowListed).toBe(false);
    }
  });

  it('reports the literal IP, or null for a name the caller must resolve', () => {
    expect(validateWebhookUrl('https://8.8.8.8/')).toMatchObject({ ok: true, literalIp: '8.8.8.8' });
    expect(validateWebhookUrl('https://[2606:4700::1111]/')).toMatchObject({ ok: true, literalIp: '2606:4700::1111' });
    expect(validateWebhookUrl('https://example.com/')).toMatchObject({ ok: true, literalIp: null });
  });

  it.each([
    ['http://hooks.example.com/webhook', 'not_https'],
    ['ftp://hooks.example.com/', 'not_https'],
    ['javascript:alert(1)', 'not_https'],
    ['file:///etc/passwd', 'not_https'],
    ['not a url', 'unparsable'],
    ['', 'unparsable'],
    ['https://', 'unparsable'],
    ['https://user:pass@hooks.example.com/', 'credentials_in_url'],
    ['https://user@hooks.example.com/', 'credentials_in_url'],
    ['https://:pass@hooks.example.com/', 'credentials_in_url'],
    ['https://localhost/hook', 'localhost'],
    ['https://LOCALHOST./hook', 'localhost'],
    ['https://api.localhost/hook', 'localhost'],
    ['https://127.0.0.1/hook', 'loopback'],
    ['https://127.1/hook', 'loopback'],
    ['https://2130706433/hook', 'loopback'],
    ['https://0x7f000001/hook', 'loopback'],
    ['https://0177.0.0.1/hook', 'loopback'],
    ['https://127.0.0.1./hook', 'loopback'],
    ['https://0.0.0.0/hook', 'unspecified'],
    ['https://10.1.2.3/hook', 'private'],
    ['https://169.254.169.254/latest/meta-data/', 'cloud_metadata'],
    ['https://[::1]/hook', 'loopback'],
    ['https://[::ffff:127.0.0.1]/hook', 'loopback'],
    ['https://[::ffff:7f00:1]:8443/hook', 'loopback'],
    ['https://[fe80::1]/hook', 'link_local'],
    ['https://[fd00::1]/hook', 'unique_local'],
    ['https://[64:ff9b::a9fe:a9fe]/', 'cloud_metadata'],
    ['https://100.64.1.1/', 'cgnat'],
    ['https://[2001:db8::1]/', 'documentation'],
    [`https://example.com/${'a'.repeat(3000)}`, 'too_long'],
  ])('refuses %s (%s)', (url, reason) => {
    expect(validateWebhookUrl(url)).toEqual({ ok: false, reason });
  });

  it('lets the operator allow-list permit a loopback test receiver, https still required', () => {
    const allowedHosts = ['127.0.0.1:8443', '[::1]', 'localhost:3000'];
    expect(validateWebhookUrl('https://127.0.0.1:8443/hook', { allowedHosts })).toMatchObject({ ok: true, literalIp: '127.0.0.1', allowListed: true });
    expect(validateWebhookUrl('https://127.0.0.1:9443/hook', { allowedHosts })).toEqual({ ok: false, reason: 'loopback' });
    expect(validateWebhookUrl('https://127.0.0.1/hook', { allowedHosts })).toEqual({ ok: false, reason: 'loopback' });
    expect(validateWebhookUrl('https://[::1]:1234/hook', { allowedHosts })).toMatchObject({ ok: true, allowListed: true });
    expect(validateWebhookUrl('https://localhost:3000/', { allowedHosts })).toMatchObject({ ok: true, literalIp: null, allowListed: true });
    expect(validateWebhookUrl('https://localhost:3001/', { allowedHosts })).toEqual({ ok: false, reason: 'localhost' });
    expect(validateWebhookUrl('http://127.0.0.1:8443/hook', { allowedHosts })).toEqual({ ok: false, reason: 'not_https' });
    expect(validateWebhookUrl('https://u:p@127.0.0.1:8443/hook', { allowedHosts })).toEqual({ ok: false, reason: 'credentials_in_url' });
    expect(validateWebhookUrl('https://127.0.0.1:8443/hook', { allowedHosts: [] })).toEqual({ ok: false, reason: 'loopback' });
  });
});

describe('isAllowListed', () => {
  it.each([
    ['127.0.0.1', '8443', ['127.0.0.1:8443'], true],
    ['127.0.0.1', 8443, ['127.0.0.1:8443'], true],
    ['127.0.0.1', '8444', ['127.0.0.1:8443'], false],
    ['127.0.0.1', '', ['127.0.0.1:443'], true],
    ['127.0.0.1', null, ['127.0.0.1:443'], true],
    ['127.0.0.1', '', ['127.0.0.1:8443'], false],
    ['127.0.0.1', '9999', ['127.0.0.1'], true],
    ['127.0.0.2', '9999', ['127.0.0.1'], false],
    ['[::1]', '8443', ['[::1]:8443'], true],
    ['::1', '8443', ['[::1]:8443'], true],
    ['[::1]', '8443', ['::1'], true],
    ['[::1]', '8443', ['0:0:0:0:0:0:0:1'], true],
    ['[::1]', '8443', ['[::1]:9000'], false],
    ['Hooks.Example.com', '', ['hooks.example.com'], true],
    ['hooks.example.com.', '', ['hooks.example.com'], true],
    ['evil-hooks.example.com', '', ['hooks.example.com'], false],
    ['hooks.example.com', '', ['*.example.com'], false],
    ['127.0.0.1', '', [], false],
    ['127.0.0.1', '', undefined, false],
    ['127.0.0.1', '', ['', '  '], false],
  ] as Array<[string, string | number | null, string[] | undefined, boolean]>)('%s port %p in %p -> %p', (host, port, list, expected) => {
    expect(isAllowListed(host, port, list)).toBe(expected);
  });
});
