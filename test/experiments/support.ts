import { randomBytes } from 'node:crypto';
import { ExperimentRecordSchema } from '../../api/features/experiments/schema';
import type { TestApp, TestUser } from '../support/harness';
import { expectStatus, qs, type Project } from '../webhooks/support';

/** Shared by the bandit experiment tests: a flag with variants, experiments, rewards. */

export const newKey = (label: string) => `${label}-${randomBytes(3).toString('hex')}`;

export const VARIANTS = [
  { name: 'control', value: 'blue', weight: 70 },
  { name: 'treatment', value: 'green', weight: 30 },
];

export async function createVariantFlag(user: TestUser, serviceId: string, key: string, variants: { name: string; value: unknown; weight: number }[] = VARIANTS) {
  const res = await user.request('POST', '/api/flags', { key, name: key, type: 'string', serviceId, environment: 'production', defaultValue: 'blue', enabled: true, variants });
  expectStatus(res, 201, 'create flag');
  return res.body as { id: string; version: number; variants: { name: string; value: unknown; weight: number }[] };
}

export const getFlag = async (p: Project, key: string) =>
  (await p.owner.request('GET', `/api/flags/${key}${qs({ serviceId: p.serviceId, environment: 'production' })}`)).body as {
    version: number;
    variants: { name: string; value: unknown; weight: number }[];
  };

export const weightsOf = (flag: { variants: { name: string; weight: number }[] }) => Object.fromEntries(flag.variants.map((v) => [v.name, v.weight]));

export function experimentBody(p: Project, flagKey: string, extra: Record<string, unknown> = {}) {
  return {
    name: `exp ${flagKey}`,
    projectId: p.projectId,
    serviceId: p.serviceId,
    flagKey,
    algorithm: 'thompson_sampling',
    minExplorationFloor: 0.1,
    minSampleSizePerVariant: 50,
    confidenceThreshold: 0.95,
    autoRolloutWinner: false,
    seed: 42,
    ...extra,
  };
}

export function expectRecord(body: unknown) {
  const parsed = ExperimentRecordSchema.strict().safeParse(body);
  if (!parsed.success) throw new Error(`not an experiment record: ${JSON.stringify(parsed.error.issues.slice(0, 5))}`);
}

export async function createExperiment(user: TestUser, body: Record<string, unknown>) {
  const res = await user.request('POST', '/api/experiments/bandit', body);
  expectStatus(res, 201, 'create experiment');
  expectRecord(res.body);
  return res.body;
}

/** Posts `trials` rewards for the arm, the first `successes` of them converted, a few at a time. */
export async function reward(user: TestUser, id: string, variantName: string, trials: number, successes: number) {
  const outcomes = Array.from({ length: trials }, (_, i) => i < successes);
  for (let i = 0; i < outcomes.length; i += 10) {
    const batch = outcomes.slice(i, i + 10);
    const answers = await Promise.all(batch.map((converted) => user.request('POST', `/api/experiments/${id}/reward`, { variantName, converted })));
    for (const res of answers) expectStatus(res, 200, 'reward');
  }
}

export const variantOf = (record: { variants: { name: string }[] }, name: string) => record.variants.find((v) => v.name === name) as Record<string, any>;

/** Audit entries of a flag and of its experiments (which name the flag in their metadata), oldest first. */
export const auditOf = (app: TestApp, flagKey: string) =>
  app.platform.db.sql<{ actor: string; action: string; metadata: any }[]>`
    SELECT actor, action, metadata FROM audit_logs
    WHERE (resource_type = 'flag' AND resource_name = ${flagKey}) OR (resource_type = 'experiment' AND metadata->>'flagKey' = ${flagKey})
    ORDER BY timestamp, id`;
