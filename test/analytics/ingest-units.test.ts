import type { IncomingMessage } from 'node:http';
import { EventTime, FlagValues, MAX_AGE_MS, MAX_AHEAD_MS, inWindow, parseItem } from '../../api/features/analytics/ingest-common';
import { createCountryReader, createUserAgentParser } from '../../api/features/analytics/user-agent';

/** The pure parts of ingestion: User-Agent reading, the trusted country header, the time window, item validation. */

describe('User-Agent', () => {
  const parse = createUserAgentParser();

  it.each([
    ['Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36', { browser: 'Chrome', os: 'Windows', device: 'desktop' }],
    ['Mozilla/5.0 (X11; Linux x86_64; rv:127.0) Gecko/20100101 Firefox/127.0', { browser: 'Firefox', os: 'Linux', device: 'desktop' }],
    ['Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1', { browser: 'Mobile Safari', os: 'iOS', device: 'mobile' }],
    ['Mozilla/5.0 (iPad; CPU OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1', { browser: 'Mobile Safari', os: 'iOS', device: 'tablet' }],
    ['Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Mobile Safari/537.36', { browser: 'Chrome', os: 'Android', device: 'mobile' }],
    ['', { browser: '', os: '', device: '' }],
    ['curl/8.5.0', { browser: '', os: '', device: '' }],
  ])('%s', (userAgent, facts) => {
    expect(parse(userAgent)).toEqual(facts);
    // Remembered: the same answer again.
    expect(parse(userAgent)).toEqual(facts);
  });

  it('reads at most 512 characters of a header', () => {
    const chrome = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36';
    expect(parse(chrome + ' '.repeat(10_000) + 'Firefox/1.0')).toEqual({ browser: 'Chrome', os: 'Windows', device: 'desktop' });
  });
});

describe('country from a trusted proxy', () => {
  const request = (remoteAddress: string | undefined, headers: Record<string, string | string[]>) => ({ socket: { remoteAddress }, headers }) as unknown as IncomingMessage;

  it('reads the header only from peers inside the trusted CIDRs', () => {
    const country = createCountryReader(['10.0.0.0/8', '2400:cb00::/32'], 'CF-IPCountry');
    expect(country(request('10.1.2.3', { 'cf-ipcountry': 'de' }))).toBe('DE');
    expect(country(request('::ffff:10.1.2.3', { 'cf-ipcountry': 'FR' }))).toBe('FR');
    expect(country(request('2400:cb00:1::1', { 'cf-ipcountry': 'JP' }))).toBe('JP');
    expect(country(request('10.1.2.3', { 'cf-ipcountry': ['NL', 'BE'] }))).toBe('NL');
    // A client talking to us directly sends what it likes: not believed.
    expect(country(request('198.51.100.7', { 'cf-ipcountry': 'DE' }))).toBe('');
    expect(country(request('2001:db8::1', { 'cf-ipcountry': 'DE' }))).toBe('');
    expect(country(request(undefined, { 'cf-ipcountry': 'DE' }))).toBe('');
    // Not a country code.
    expect(country(request('10.1.2.3', { 'cf-ipcountry': 'Germany' }))).toBe('');
    expect(country(request('10.1.2.3', {}))).toBe('');
  });

  it('reads no country at all without trusted proxies, and the configured header name', () => {
    expect(createCountryReader([], 'CF-IPCountry')(request('10.1.2.3', { 'cf-ipcountry': 'DE' }))).toBe('');
    const custom = createCountryReader(['127.0.0.1/32'], 'X-Country');
    expect(custom(request('127.0.0.1', { 'x-country': 'ca', 'cf-ipcountry': 'DE' }))).toBe('CA');
  });
});

describe('the accepted time window', () => {
  const now = Date.UTC(2026, 10, 23, 12, 0, 0);

  it('accepts from 2 hours old to 60 seconds ahead, inclusive, as ISO text or epoch ms; now when absent', () => {
    expect(inWindow(undefined, now)).toBe(now);
    expect(inWindow(now - MAX_AGE_MS, now)).toBe(now - MAX_AGE_MS);
    expect(inWindow(now + MAX_AHEAD_MS, now)).toBe(now + MAX_AHEAD_MS);
    expect(inWindow(new Date(now - 1_000).toISOString(), now)).toBe(now - 1_000);
    expect(inWindow('2026-11-23T13:00:30+01:00', now)).toBe(now + 30_000);
    expect(inWindow(now - MAX_AGE_MS - 1, now)).toBe('timestamp: more than 2 hours old');
    expect(inWindow(now + MAX_AHEAD_MS + 1, now)).toBe('timestamp: more than 60 seconds in the future');
    expect(inWindow(now + 0.9, now)).toBe(now);
  });

  it('takes only ISO date-times and non-negative finite numbers', () => {
    for (const bad of ['yesterday', '2026-11-23', '', -1, Number.NaN, true, null]) expect(EventTime.safeParse(bad).success).toBe(false);
    expect(EventTime.safeParse('2026-11-23T12:00:00Z').success).toBe(true);
  });
});

describe('item validation', () => {
  it('keeps flag values as JSON text and bounds them', () => {
    expect(FlagValues.parse({ a: true, b: 'blue', c: 3, d: { x: 1 }, e: null })).toEqual({ a: 'true', b: '"blue"', c: '3', d: '{"x":1}', e: 'null' });
    expect(FlagValues.safeParse({ a: 'x'.repeat(2_000) }).success).toBe(false);
    expect(FlagValues.safeParse(Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`f${i}`, true]))).success).toBe(false);
    expect(FlagValues.safeParse({ '': true }).success).toBe(false);
  });

  it('says what is wrong with a rejected item, path first', () => {
    const result = parseItem(FlagValues, { a: 'x'.repeat(2_000) });
    expect(result).toEqual({ ok: false, message: 'a: must be a JSON value of at most 1024 characters' });
  });
});
