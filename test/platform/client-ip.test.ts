import type { IncomingMessage } from 'node:http';
import { clientIp } from '../../api/http/client-ip';

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
