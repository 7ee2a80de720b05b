import { hash, randomBytes } from 'node:crypto';

/** Prefixed, time-ordered ids (`usr_…`): sortable for cursors and recognisable in logs. */
export function newId(prefix: string): string {
  return `${prefix}_${Date.now().toString(36).padStart(9, '0')}${randomBytes(8).toString('hex')}`;
}

export function randomSecret(bytes = 32): string {
  return randomBytes(bytes).toString('base64url');
}

/** One-shot hashing (Node >= 20.12): about 2.5x cheaper than createHash on the bearer hot path. */
export function sha256Hex(value: string): string {
  return hash('sha256', value, 'hex');
}

/**
 * `fn` remembered for up to `max` distinct inputs (forgotten all at once when full): for hashes
 * the hot paths compute again and again for the same few strings (bearer secrets, targeting keys,
 * User-Agent headers).
 */
export function boundedMemo<T>(fn: (input: string) => T, max: number): (input: string) => T {
  const memo = new Map<string, T>();
  return (input) => {
    let output = memo.get(input);
    if (output === undefined) {
      output = fn(input);
      if (memo.size >= max) memo.clear();
      memo.set(input, output);
    }
    return output;
  };
}
