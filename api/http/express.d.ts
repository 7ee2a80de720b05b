import type { Logger } from 'pino';
import type { Principal } from '../auth/principal';

declare global {
  namespace Express {
    interface Request {
      principal: Principal;
      clientIp: string;
      requestId: string;
      log: Logger;
      /** Whether the raw JSON body spelled a NUL character (`\u0000`): only then is the parsed body searched for one (route.ts). */
      bodyMayHoldNul?: boolean;
    }
  }
}

export {};
