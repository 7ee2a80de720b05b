import type { Logger } from 'pino';
import type { Principal } from '../auth/principal';

declare global {
  namespace Express {
    interface Request {
      principal: Principal;
      clientIp: string;
      requestId: string;
      log: Logger;
    }
  }
}

export {};
