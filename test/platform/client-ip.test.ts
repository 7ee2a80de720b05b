import type { IncomingMessage } from 'node:http';
import { clientIp, ipBucket } from '../../api/http/client-ip';

const req = (remote: string, xff?: string) =>
  ({ socket: { remoteAddress: remote }, headers: xff ? { 'x-forwarded-for': xff } : {} }) as unknown as IncomingMessage;

describe('clientIp', () => {
  it('uses the socket peer without trusted proxies, whatever the header says', () => {
    expect(clientIp(req('::ffff:10.0.0.5', '1.2.3.4'), 0)).toBe('10.0.0.5');
  });
  it('takes the address one hop in front of a single trusted proxy', () => {
    expect(clientIp(req('10.0.0.1', '198.51.100.7'), 1)).toBe('198.51.100.7');
  });
  it('cannot be dodged by prepending forged entries', () => {
    expect(clientIp(req('10.0.0.1', '6.6.6.6, 198.51.100.7'), 1)).toBe('198.51.100.7');
    expect(clientIp(req('10.0.0.2', '6.6.6.6, 198.51.100.7, 10.0.0.1'), 2)).toBe('198.51.100.7');
  });
  it('falls back to the left-most address when fewer hops are present than configured', () => {
    expect(clientIp(req('10.0.0.1', '198.51.100.7'), 3)).toBe('198.51.100.7');
  });
});

describe('ipBucket', () => {
  it('keeps IPv4 addresses and takes IPv6 by /64, whatever the spelling', () => {
    expect(ipBucket('198.51.100.7')).toBe('198.51.100.7');
    expect(ipBucket('2001:db8:1:2::a')).toBe('2001:db8:1:2::/64');
    expect(ipBucket('2001:DB8:1:2:ffff:0:0:b')).toBe('2001:db8:1:2::/64');
    expect(ipBucket('2001:db8:1:3::a')).toBe('2001:db8:1:3::/64');
    expect(ipBucket('fe80::1%eth0')).toBe('fe80:0:0:0::/64');
  });
  it('answers IPv4-mapped IPv6 as the IPv4 address and leaves anything unparsable as it is', () => {
    expect(ipBucket('::ffff:10.0.0.5')).toBe('10.0.0.5');
    expect(ipBucket('unknown')).toBe('unknown');
    expect(ipBucket('not:an:address')).toBe('not:an:address');
  });
});
