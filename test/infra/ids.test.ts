import { boundedMemo, sha256Hex } from '../../api/infra/ids';

describe('boundedMemo', () => {
  it('computes each input once while it is remembered, and forgets everything when full', () => {
    const calls: string[] = [];
    const memo = boundedMemo((s) => {
      calls.push(s);
      return s.toUpperCase();
    }, 2);
    expect([memo('a'), memo('a'), memo('b'), memo('a')]).toEqual(['A', 'A', 'B', 'A']);
    expect(calls).toEqual(['a', 'b']);
    memo('c'); // full: forgets a and b
    memo('a');
    expect(calls).toEqual(['a', 'b', 'c', 'a']);
  });

  it('gives what the function gives (SHA-256 hex here)', () => {
    expect(boundedMemo(sha256Hex, 10)('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });
});
