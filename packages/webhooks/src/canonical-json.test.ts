import { canonicalJson, canonicalJsonBuffer, JsonNumberLiteral } from './canonical-json';

describe('canonicalJson', () => {
  it('sorts keys recursively and writes no whitespace', () => {
    expect(canonicalJson({ b: 1, a: { d: [3, { z: 1, y: 2 }], c: 'x' } })).toBe('{"a":{"c":"x","d":[3,{"y":2,"z":1}]},"b":1}');
  });

  it('gives identical bytes for different key insertion orders', () => {
    const one = { id: 'whdel_1', type: 't', data: { kind: 't', severity: 'high', nested: { b: [1, 2], a: null } } };
    const two = { data: { nested: { a: null, b: [1, 2] }, severity: 'high', kind: 't' }, type: 't', id: 'whdel_1' };
    const three: Record<string, unknown> = {};
    for (const key of ['type', 'data', 'id']) three[key] = (one as Record<string, unknown>)[key];
    expect(canonicalJsonBuffer(one).equals(canonicalJsonBuffer(two))).toBe(true);
    expect(canonicalJsonBuffer(one).equals(canonicalJsonBuffer(three))).toBe(true);
    expect(canonicalJson(one)).toBe(canonicalJson(JSON.parse(JSON.stringify(two))));
  });

  it('keeps array order', () => {
    expect(canonicalJson([3, 1, 2])).toBe('[3,1,2]');
    expect(canonicalJson(['b', 'a'])).not.toBe(canonicalJson(['a', 'b']));
  });

  it('sorts keys by UTF-16 code units (uppercase before lowercase, digits first)', () => {
    expect(canonicalJson({ b: 1, B: 2, a: 3, '1': 4, _: 5, é: 6 })).toBe('{"1":4,"B":2,"_":5,"a":3,"b":1,"é":6}');
  });

  it('serialises scalars like JSON.stringify', () => {
    expect(canonicalJson('a"b\\c\n\u0001')).toBe(JSON.stringify('a"b\\c\n\u0001'));
    expect(canonicalJson('😀 日本')).toBe('"😀 日本"');
    expect(canonicalJson(1.5)).toBe('1.5');
    expect(canonicalJson(-0)).toBe('0');
    expect(canonicalJson(1e21)).toBe('1e+21');
    expect(canonicalJson(true)).toBe('true');
    expect(canonicalJson(null)).toBe('null');
    expect(canonicalJson({})).toBe('{}');
    expect(canonicalJson([])).toBe('[]');
  });

  it('round-trips through JSON.parse', () => {
    const value = { z: [1, 'two', { three: 3 }], a: { b: { c: null } }, s: 'x\u2028y' };
    expect(JSON.parse(canonicalJson(value))).toEqual(value);
  });

  it('omits object properties whose value is undefined', () => {
    expect(canonicalJson({ a: undefined, b: 1 })).toBe('{"b":1}');
  });

  it.each([
    ['undefined at top level', undefined],
    ['undefined in an array', [1, undefined]],
    ['NaN', { a: Number.NaN }],
    ['Infinity', [Infinity]],
    ['-Infinity', -Infinity],
    ['a bigint', { a: BigInt(1) }],
    ['a function', { a: () => 1 }],
    ['a symbol', { a: Symbol('x') }],
    ['a Map', { a: new Map() }],
    ['a Set', new Set([1])],
  ])('refuses %s', (_name, value) => {
    expect(() => canonicalJson(value)).toThrow(TypeError);
  });

  it('refuses cycles but accepts shared references', () => {
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = cyclic;
    expect(() => canonicalJson(cyclic)).toThrow(/cyclic/);
    const shared = { x: 1 };
    expect(canonicalJson({ a: shared, b: [shared] })).toBe('{"a":{"x":1},"b":[{"x":1}]}');
  });

  it('uses toJSON (Date) like JSON.stringify', () => {
    expect(canonicalJson({ at: new Date(0) })).toBe('{"at":"1970-01-01T00:00:00.000Z"}');
  });

  it('writes a JsonNumberLiteral verbatim', () => {
    expect(canonicalJson({ time: new JsonNumberLiteral('1700000000.500') })).toBe('{"time":1700000000.500}');
    expect(JSON.parse(canonicalJson({ t: new JsonNumberLiteral('1.000') })).t).toBe(1);
    expect(() => new JsonNumberLiteral('1.')).toThrow(TypeError);
    expect(() => new JsonNumberLiteral('NaN')).toThrow(TypeError);
    expect(() => new JsonNumberLiteral('01')).toThrow(TypeError);
  });

  it('encodes the buffer as UTF-8', () => {
    expect(canonicalJsonBuffer({ s: 'é' }).toString('hex')).toBe(Buffer.from('{"s":"é"}', 'utf8').toString('hex'));
  });
});
