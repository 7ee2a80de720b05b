import { randomBytes } from 'node:crypto';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import fs from 'node:fs';
import { temporal } from '@temporalio/proto';
import { bundleWorkflowCode, DefaultLogger, Runtime, Worker, type WorkflowBundleOption } from '@temporalio/worker';
import { canaryActivities } from '../../activities/canary';
import type { OrgAlert } from '../../api/features/alert-channels/types';
import { ChangeGate } from '../../api/features/change-requests/gate';
import { CanaryService, type CanaryStartInput } from '../../api/features/canary/service';
import { CanaryStore } from '../../api/features/canary/store';
import { CanaryWarehouse } from '../../api/features/canary/warehouse';
import { HttpError } from '../../api/http/errors';
import { projectPath } from '../../api/infra/paths';
import type { Temporal } from '../../api/infra/temporal';
import type { canaryPipeline } from '../../workflows/canary';
import type { CanaryState, CanaryStatus } from '../../api/domain/canary';
import { CANARY_REFUSED, canaryAdvanceUpdate, canaryWorkflowId, type CanaryGateRequest, type CanaryRolloutStep } from '../../workflows/messages';
import { eventually, startTestApp, type TestApp } from '../support/harness';
import { createFlag, createProject, type Project } from '../webhooks/support';

/**
 * The canaryPipeline workflow on the time-skipping test server, with its real activities: flag
 * changes through FlagService on real Postgres, gates read from real chDB. Traffic is synthetic:
 * before each gate check the test inserts the evaluations (and error events) a service would have
 * sent since the previous check, with timestamps inside the window the workflow asks about, so
 * the real warehouse reader and the real gate decide.
 */

let app: TestApp;
let env: TestWorkflowEnvironment;
let worker: Worker;
let running: Promise<void>;
let workflowBundle: WorkflowBundleOption;
let canaries: CanaryService;
let p: Project;
const taskQueue = `canary-${randomBytes(4).toString('hex')}`;
const notified: { orgId: string; alert: OrgAlert }[] = [];

/** Traffic per gate check for one stage: exposures, and the error share of each side. */
interface Traffic {
  exposures: number;
  treatmentErrorRate: number;
  controlErrorRate: number;
}
const scenarios = new Map<string, (stageIndex: number, rolloutPercent: number) => Traffic>();
/** Per flag: the end of the window the last check saw (rows already inserted up to it). */
const insertedUntil = new Map<string, number>();
const checks = new Map<string, CanaryGateRequest[]>();

/** An activity call the test may hold: a stage's rollout, or a state write. */
type HeldCall = { kind: 'rollout'; step: CanaryRolloutStep } | { kind: 'save'; pipelineId: string; state: CanaryState };
/** Calls that wait, once reached, until the test releases them (each holds one call). */
const holds = new Set<{ when: (call: HeldCall) => boolean; reach: () => void; released: Promise<void> }>();

function holdCall(when: (call: HeldCall) => boolean): { reached: Promise<void>; release: () => void } {
  let reach!: () => void;
  let release!: () => void;
  const reached = new Promise<void>((resolve) => (reach = resolve));
  holds.add({ when, reach, released: new Promise<void>((resolve) => (release = resolve)) });
  return { reached, release };
}

async function passHold(call: HeldCall): Promise<void> {
  const held = [...holds].find((h) => h.when(call));
  if (!held) return;
  holds.delete(held);
  held.reach();
  await held.released;
}

const rolloutOf = (pipelineId: string, stageIndex: number) => (call: HeldCall) => call.kind === 'rollout' && call.step.pipelineId === pipelineId && call.step.stageIndex === stageIndex;

const ts = (ms: number) => new Date(ms).toISOString().replace('T', ' ').slice(0, 23);

async function insertTraffic(request: CanaryGateRequest) {
  const { target } = request;
  const scenario = scenarios.get(target.flagKey);
  if (!scenario) return;
  const fromMs = Math.max(request.fromMs, insertedUntil.get(target.flagKey) ?? 0);
  insertedUntil.set(target.flagKey, request.toMs);
  const traffic = scenario(stageOf(request), request.rolloutPercent);
  const treatment = Math.round((traffic.exposures * request.rolloutPercent) / 100);
  const evaluations = [];
  const outcomes = [];
  for (let i = 0; i < traffic.exposures; i++) {
    const inside = i < treatment;
    const at = fromMs + ((request.toMs - fromMs) * (i + 0.5)) / traffic.exposures;
    const key = `k-${randomBytes(6).toString('hex')}`;
    evaluations.push({
      timestamp: ts(at),
      project_id: target.projectId,
      service_id: target.serviceId,
      environment: target.environment,
      flag_key: target.flagKey,
      reason: inside ? 'TARGETING_MATCH' : 'DEFAULT',
      variant: '',
      value: inside ? 'true' : 'false',
      latency_ms: 1,
      error_code: '',
      rule_id: request.ruleId,
      rollout_side: inside ? 'in' : 'out',
      targeting_key_hash: key,
      source: 'rest',
    });
    const index = inside ? i : i - treatment;
    const sideSize = inside ? treatment : traffic.exposures - treatment;
    const rate = inside ? traffic.treatmentErrorRate : traffic.controlErrorRate;
    if (index < Math.round(sideSize * rate)) {
      outcomes.push({
        timestamp: ts(at),
        project_id: target.projectId,
        service_id: target.serviceId,
        environment: target.environment,
        event: 'error',
        targeting_key_hash: key,
        value: null,
        flags: {},
        origin: 'track',
        event_id: `e-${key}`,
      });
    }
  }
  const client = app.platform.analytics.client;
  await client.insert({ table: 'evaluation_events', values: evaluations, format: 'JSONEachRow' });
  if (outcomes.length) await client.insert({ table: 'outcome_events', values: outcomes, format: 'JSONEachRow' });
}

/** Stages are told apart by their rollout: each stage has its own. */
const stageOf = (request: CanaryGateRequest) => {
  const { initialRolloutPercent, rampStepPercent } = request.config;
  return Math.round((request.rolloutPercent - initialRolloutPercent) / rampStepPercent);
};

beforeAll(async () => {
  app = await startTestApp();
  p = await createProject(app);
  try {
    Runtime.install({ logger: new DefaultLogger('WARN') });
  } catch {
    // Installed already in this process.
  }
  const path = process.env.TEMPORAL_TEST_SERVER_PATH;
  env = await TestWorkflowEnvironment.createTimeSkipping(path ? { server: { executable: { type: 'existing-path', path } } } : undefined);
  const bundlePath = process.env.WORKFLOW_BUNDLE_PATH;
  workflowBundle = bundlePath ? { codePath: bundlePath } : { code: (await bundleWorkflowCode({ workflowsPath: projectPath('workflows', 'index.ts'), logger: new DefaultLogger('WARN') })).code };
  worker = await startWorker(taskQueue);
  running = worker.run();
  canaries = serviceOn(taskQueue);
}, 120_000);

/** A worker with the real canary activities, traffic inserted before each gate check, and notifications recorded. */
function startWorker(queue: string, options: { maxCachedWorkflows?: number } = {}): Promise<Worker> {
  const real = canaryActivities({
    ...app.platform.canary,
    notifyOrgAlertChannels: async (orgId, alert) => {
      notified.push({ orgId, alert });
      return app.platform.canary.notifyOrgAlertChannels(orgId, alert);
    },
  });
  return Worker.create({
    connection: env.nativeConnection,
    taskQueue: queue,
    workflowBundle,
    ...options,
    activities: {
      ...real,
      async applyCanaryRollout(step: CanaryRolloutStep) {
        await passHold({ kind: 'rollout', step });
        return real.applyCanaryRollout(step);
      },
      async saveCanaryState(pipelineId: string, state: CanaryState) {
        await passHold({ kind: 'save', pipelineId, state });
        return real.saveCanaryState(pipelineId, state);
      },
      async evaluateCanaryGate(request: CanaryGateRequest) {
        checks.set(request.target.flagKey, [...(checks.get(request.target.flagKey) ?? []), request]);
        await insertTraffic(request);
        return real.evaluateCanaryGate(request);
      },
    },
  });
}

/** The API's service, starting its workflows on the time-skipping server's `queue`. */
function serviceOn(queue: string, answerWaitMs?: number): CanaryService {
  const temporal: Temporal = { client: env.client, address: '', namespace: 'default', taskQueue: queue, devServer: false, connected: true, bounded: (call) => call(), close: async () => undefined };
  return new CanaryService({
    sql: app.platform.db.sql,
    store: new CanaryStore(),
    flags: app.platform.flagService,
    gate: new ChangeGate({ sql: app.platform.db.sql, logger: app.platform.logger }),
    warehouse: new CanaryWarehouse(app.platform.analytics),
    guards: app.platform.canary.guards,
    temporal,
    logger: app.platform.logger,
    answerWaitMs,
  });
}

afterAll(async () => {
  worker?.shutdown();
  await running;
  await env?.teardown();
  await app?.stop();
});

const actor = { name: 'release@example.com', userId: null };
const CONFIG: CanaryStartInput = {
  initialRolloutPercent: 20,
  targetRolloutPercent: 60,
  rampStepPercent: 20,
  soakPeriodMinutes: 0.05,
  errorRateGateDelta: 0.01,
  latencyGateDeltaMs: 100,
  autoRollbackOnBreach: true,
  minSamplesPerCohort: 100,
  alpha: 0.05,
};

async function newFlag(label: string) {
  const key = `${label}-${randomBytes(3).toString('hex')}`;
  const flag = await createFlag(p.owner, p.serviceId, key);
  return { key, ref: { key, serviceId: p.serviceId, environment: 'production' as const }, version: flag.version as number };
}

/** Every pipeline the tests ran to its end: their histories are replayed at the end. */
const finished: string[] = [];

async function start(label: string, traffic: ((stage: number) => Traffic) | null, config: Partial<CanaryStartInput> = {}, service = canaries) {
  const flag = await newFlag(label);
  if (traffic) scenarios.set(flag.key, traffic);
  finished.push(canaryWorkflowId(p.serviceId, 'production', flag.key));
  const record = await service.start(actor, { projectId: p.projectId, orgId: p.orgId }, flag.ref, { ...CONFIG, ...config });
  const handle = env.client.workflow.getHandle(canaryWorkflowId(p.serviceId, 'production', flag.key));
  return { ...flag, record, handle };
}

const flagNow = (ref: { key: string; serviceId: string; environment: 'production' }) => app.platform.flagService.get(ref);

async function auditOf(flagKey: string) {
  return app.platform.db.sql<{ actor: string; action: string; metadata: any }[]>`
    SELECT actor, action, metadata FROM audit_logs WHERE resource_type = 'flag' AND resource_name = ${flagKey} ORDER BY timestamp, id`;
}

const healthy = () => ({ exposures: 300, treatmentErrorRate: 0, controlErrorRate: 0 });

describe('canaryPipeline on the time-skipping server', () => {
  it('completes every stage of a healthy canary, each a versioned change with the gate that let it through', async () => {
    const run = await start('healthy', healthy);
    expect(run.record.status).toBe('running');
    await expect(run.handle.result()).resolves.toBe<CanaryStatus>('completed');

    const record = await canaries.get(run.ref);
    expect(record.status).toBe('completed');
    expect(record.completedStages.map((s) => s.rolloutPercent)).toEqual([20, 40, 60]);
    for (const stage of record.completedStages) {
      expect(stage.gate?.decision).toBe('pass');
      expect(stage.gate!.treatment.exposures).toBeGreaterThanOrEqual(100);
      expect(stage.gate!.control.exposures).toBeGreaterThanOrEqual(100);
      expect(stage.endedAt).toBeDefined();
    }
    const flag = await flagNow(run.ref);
    expect(flag!.targeting).toEqual([{ id: 'canary', conditions: [], value: true, rolloutPercentage: 60 }]);
    expect(flag!.version).toBe(run.version + 3);

    const trail = await auditOf(run.key);
    expect(trail.filter((a) => a.action === 'canary.start').map((a) => [a.actor, a.metadata.canary.pipelineId])).toEqual([[actor.name, run.record.id]]);
    const audit = trail.filter((a) => a.action === 'flag.update' && a.metadata.canary);
    expect(audit.map((a) => [a.actor, a.metadata.canary.rolloutPercent])).toEqual([
      [`canary:${run.record.id}`, 20],
      [`canary:${run.record.id}`, 40],
      [`canary:${run.record.id}`, 60],
    ]);
    // Each ramp step carries the passing gate of the stage before it.
    expect(audit[0].metadata.canary.gate).toBeUndefined();
    expect(audit[1].metadata.canary.gate.decision).toBe('pass');
    expect(audit[2].metadata.canary.gate.decision).toBe('pass');
  }, 120_000);

  it('rolls back on a breach at stage 2, restores the pre-canary content and notifies the org', async () => {
    const run = await start('breach', (stage) => (stage === 1 ? { exposures: 300, treatmentErrorRate: 0.5, controlErrorRate: 0 } : healthy()));
    await expect(run.handle.result()).resolves.toBe<CanaryStatus>('rolled_back');

    const record = await canaries.get(run.ref);
    expect(record.status).toBe('rolled_back');
    expect(record.completedStages.map((s) => s.rolloutPercent)).toEqual([20]);
    expect(record.currentStage?.rolloutPercent).toBe(40);
    expect(record.currentStage?.gate?.decision).toBe('fail');
    expect(record.health.status).toBe('breach');
    expect(record.statusReason).toMatch(/gate failed at 40%/);

    const flag = await flagNow(run.ref);
    expect(flag!.targeting).toEqual([]);
    const restore = (await auditOf(run.key)).at(-1)!;
    expect(restore.metadata.canary).toMatchObject({ pipelineId: run.record.id, action: 'rolled_back' });
    expect(restore.metadata.canary.gate.decision).toBe('fail');
    expect(restore.metadata.rollbackTo).toBe(run.version);

    const alert = notified.find((n) => n.alert.id === `canary:${run.record.id}:rolled_back`);
    expect(alert?.orgId).toBe(p.orgId);
    expect(alert?.alert).toMatchObject({ kind: 'canary.rollback', flagKey: run.key, environment: 'production' });

    // Counted on the worker process's management listener (docs/operations.md#metrics).
    const metrics = await (await fetch(`${app.running.urls.management}/metrics`)).text();
    const value = (series: string) => Number(metrics.split('\n').find((line) => line.startsWith(`${series} `))?.split(' ')[1]);
    expect(value('flagship_canary_rollbacks_total{reason="gate_failed"}')).toBeGreaterThanOrEqual(1);
    expect(value('flagship_canary_gate_decisions_total{result="fail"}')).toBeGreaterThanOrEqual(1);
    expect(value('flagship_canary_stage_transitions_total')).toBeGreaterThanOrEqual(2);
  }, 120_000);

  it('waits while there is too little data, then pauses; abort then restores', async () => {
    const run = await start('sparse', () => ({ exposures: 5, treatmentErrorRate: 0, controlErrorRate: 0 }), { maxWaitMinutes: 0.1 });
    // The paused workflow waits for a signal: skip time until the record says paused.
    await eventually(async () => {
      await env.sleep(1_000);
      return (await canaries.get(run.ref)).status === 'paused';
    }, 60_000);
    const record = await canaries.get(run.ref);
    expect(record.statusReason).toMatch(/too little data/);
    expect(record.health.status).toBe('insufficient_data');
    expect(record.currentStage?.gate?.decision).toBe('wait');
    // Past the soak (3 s) the stage kept checking for its 6 s of waiting before it paused.
    const stageChecks = checks.get(run.key)!;
    expect(stageChecks.filter((c) => c.final).length).toBeGreaterThanOrEqual(3);

    const aborted = await canaries.abort(actor, run.ref, 'not enough traffic');
    expect(aborted.status).toBe('aborted');
    await expect(run.handle.result()).resolves.toBe('aborted');
    expect((await flagNow(run.ref))!.targeting).toEqual([]);
  }, 120_000);

  it('aborts mid-soak: the pre-canary content comes back as a new version, audited with the reason', async () => {
    const run = await start('abort', healthy, { soakPeriodMinutes: 30 });
    // The start answers once the first stage is in the flag.
    expect(run.record.currentStage).toMatchObject({ index: 0, rolloutPercent: 20 });
    expect(run.record.remainingSoakSeconds).toBeGreaterThan(29 * 60);
    expect((await flagNow(run.ref))!.targeting[0].rolloutPercentage).toBe(20);

    const aborted = await canaries.abort(actor, run.ref, 'checkout errors in another region');
    expect(aborted.status).toBe('aborted');
    expect(aborted.statusReason).toBe('checkout errors in another region');
    await expect(run.handle.result()).resolves.toBe('aborted');
    const flag = await flagNow(run.ref);
    expect(flag!.targeting).toEqual([]);
    expect(flag!.version).toBe(run.version + 2);
    const restore = (await auditOf(run.key)).at(-1)!;
    expect(restore.metadata.canary).toMatchObject({ action: 'aborted', reason: 'checkout errors in another region', requestedBy: actor.name });
    const request = (await auditOf(run.key)).find((a) => a.action === 'canary.abort')!;
    expect(request).toMatchObject({ actor: actor.name, metadata: { canary: { pipelineId: run.record.id, reason: 'checkout errors in another region' } } });
  }, 120_000);

  it('force advances past the soak and gate, and the next step is audited as forced', async () => {
    const run = await start('force', healthy, { soakPeriodMinutes: 30 });
    await eventually(async () => (await canaries.get(run.ref)).currentStage?.rolloutPercent === 20, 30_000);
    const advanced = await canaries.advance(actor, { orgId: p.orgId }, run.ref, true);
    expect(advanced.currentStage?.rolloutPercent).toBe(40);
    expect(advanced.completedStages).toHaveLength(1);
    expect(advanced.completedStages[0].forcedBy).toBe(actor.name);
    expect((await flagNow(run.ref))!.targeting[0].rolloutPercentage).toBe(40);
    const step = (await auditOf(run.key)).at(-1)!;
    expect(step.metadata.canary).toMatchObject({ rolloutPercent: 40, forced: true, forcedBy: actor.name });
    const request = (await auditOf(run.key)).find((a) => a.action === 'canary.advance')!;
    expect(request).toMatchObject({ actor: actor.name, metadata: { canary: { force: true, stage: 0, rolloutPercent: 20 } } });

    // Without force the gate runs now; a stage 0 s old has too little data: 409 with the gate.
    const refused = await canaries.advance(actor, { orgId: p.orgId }, run.ref, false).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(HttpError);
    expect((refused as HttpError).status).toBe(409);

    await canaries.abort(actor, run.ref, 'done testing');
    await expect(run.handle.result()).resolves.toBe('aborted');
  }, 120_000);

  it('refuses, in the workflow, an advance between stages and an abort of an ended pipeline: 409 with the reasons the record gives', async () => {
    const run = await start('refused', healthy, { soakPeriodMinutes: 30 });
    const betweenStages = 'The pipeline is between stages; try again in a moment';
    // Stage 1's rollout waits: meanwhile the pipeline is between stages.
    const stage1 = holdCall(rolloutOf(run.record.id, 1));
    const forced = canaries.advance(actor, { orgId: p.orgId }, run.ref, true);
    await stage1.reached;
    await expect(run.handle.executeUpdate(canaryAdvanceUpdate, { args: [{ force: true, requestedBy: actor.name }] })).rejects.toMatchObject({
      cause: { type: CANARY_REFUSED, message: betweenStages },
    });
    expect(await canaries.advance(actor, { orgId: p.orgId }, run.ref, true).catch((e: unknown) => e)).toMatchObject({ status: 409, message: betweenStages });
    stage1.release();
    expect((await forced).currentStage).toMatchObject({ index: 1, rolloutPercent: 40 });
    // Only a passing gate ends a stage without force.
    await expect(run.handle.executeUpdate(canaryAdvanceUpdate, { args: [{ force: false, requestedBy: actor.name }] })).rejects.toMatchObject({
      cause: { type: CANARY_REFUSED, message: 'An advance without force needs a passing gate' },
    });

    // The record still says running while the aborted state's write waits: the workflow refuses a second abort itself.
    const ended = `The canary pipeline of flag "${run.key}" has ended (aborted)`;
    const write = holdCall((call) => call.kind === 'save' && call.pipelineId === run.record.id && call.state.status === 'aborted');
    expect(await canaries.abort(actor, run.ref, 'first')).toMatchObject({ status: 'aborted', statusReason: 'first' });
    await write.reached;
    expect(await canaries.abort(actor, run.ref, 'second').catch((e: unknown) => e)).toMatchObject({ status: 409, message: ended });
    write.release();
    await expect(run.handle.result()).resolves.toBe('aborted');
    expect(await canaries.abort(actor, run.ref, 'third').catch((e: unknown) => e)).toMatchObject({ status: 409, message: ended });
  }, 120_000);

  it('answers the state as it is when the workflow takes longer than the answer wait, and the start still takes effect', async () => {
    const impatient = serviceOn(taskQueue, 300);
    const flag = await newFlag('slow');
    finished.push(canaryWorkflowId(p.serviceId, 'production', flag.key));
    const firstRollout = holdCall((call) => call.kind === 'rollout' && call.step.target.flagKey === flag.key);
    const record = await impatient.start(actor, { projectId: p.projectId, orgId: p.orgId }, flag.ref, { ...CONFIG, soakPeriodMinutes: 30 });
    expect(record).toMatchObject({ status: 'running', currentStage: null, completedStages: [] });
    await firstRollout.reached;
    firstRollout.release();
    await eventually(async () => (await impatient.get(flag.ref)).currentStage?.index === 0, 30_000);
    expect((await flagNow(flag.ref))!.targeting[0].rolloutPercentage).toBe(20);
    expect(await impatient.abort(actor, flag.ref, 'done testing')).toMatchObject({ status: 'aborted' });
  }, 120_000);

  it('stops without touching the flag again when someone removed the canaried rule', async () => {
    const run = await start('removed', healthy, { soakPeriodMinutes: 30 });
    await eventually(async () => (await canaries.get(run.ref)).currentStage?.rolloutPercent === 20, 30_000);
    const edited = await app.platform.flagService.update({ name: 'someone@example.com', userId: null }, run.ref, { targeting: [] });
    const stopped = await canaries.advance(actor, { orgId: p.orgId }, run.ref, true);
    expect(stopped.status).toBe('aborted');
    expect(stopped.statusReason).toBe('stopped before 40%: the rule canary was removed from the flag');
    await expect(run.handle.result()).resolves.toBe('aborted');
    expect((await flagNow(run.ref))!.version).toBe(edited.version);
  }, 120_000);

  it('two concurrent starts on one flag give one pipeline and one 409', async () => {
    const flag = await newFlag('twice');
    const results = await Promise.allSettled([
      canaries.start(actor, { projectId: p.projectId, orgId: p.orgId }, flag.ref, { ...CONFIG, soakPeriodMinutes: 30 }),
      canaries.start(actor, { projectId: p.projectId, orgId: p.orgId }, flag.ref, { ...CONFIG, soakPeriodMinutes: 30 }),
    ]);
    const started = results.filter((r) => r.status === 'fulfilled');
    const refused = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    expect(started).toHaveLength(1);
    expect(refused).toHaveLength(1);
    expect((refused[0].reason as HttpError).status).toBe(409);
    const [{ n }] = await app.platform.db.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM canary_pipelines WHERE flag_key = ${flag.key}`;
    expect(n).toBe(1);
    await canaries.abort(actor, flag.ref, 'done testing');
  }, 120_000);

  it('resumes after a worker restart mid-soak at the same stage, with the soak measured from the stage start', async () => {
    const queue = `${taskQueue}-restart`;
    const service = serviceOn(queue);
    // No sticky cache: the test server would hand the next workflow task to the stopped worker's sticky queue.
    const first = await startWorker(queue, { maxCachedWorkflows: 0 });
    const firstRun = first.run();
    const run = await start('restart', healthy, { soakPeriodMinutes: 1 }, service);
    await eventually(async () => (await service.get(run.ref)).currentStage?.index === 0, 30_000);
    await service.advance(actor, { orgId: p.orgId }, run.ref, true);
    const before = await service.get(run.ref);
    expect(before.currentStage).toMatchObject({ index: 1, rolloutPercent: 40 });
    const stageStart = Date.parse(before.currentStage!.startedAt);

    // The worker goes away mid-soak (the test server skips time only while no workflow task is
    // waiting, so the gap stays under the 6 s between checks); a new worker takes the workflow over.
    first.shutdown();
    await firstRun;
    await env.sleep(3_000);
    const second = await startWorker(queue, { maxCachedWorkflows: 0 });
    const secondRun = second.run();
    try {
      await expect(run.handle.result()).resolves.toBe('completed');
    } finally {
      second.shutdown();
      await secondRun;
    }
    const record = await service.get(run.ref);
    expect(record.completedStages.map((s) => [s.index, s.rolloutPercent])).toEqual([
      [0, 20],
      [1, 40],
      [2, 60],
    ]);
    const resumed = record.completedStages[1];
    // Same stage, same start: the soak was not restarted by the new worker, and it ran its full minute.
    expect(Date.parse(resumed.startedAt)).toBe(stageStart);
    const soaked = Date.parse(resumed.endedAt!) - stageStart;
    expect(soaked).toBeGreaterThanOrEqual(60_000);
    expect(soaked).toBeLessThan(2 * 60_000);
    expect(resumed.gate?.decision).toBe('pass');
    // One version per stage: nothing was applied twice.
    expect((await flagNow(run.ref))!.version).toBe(run.version + 3);
  }, 120_000);

  it('continues as new at a stage boundary when the history grows long, and carries its state over', async () => {
    const flag = await newFlag('long');
    scenarios.set(flag.key, healthy);
    const [row] = await app.platform.db.sql<{ id: string }[]>`SELECT id FROM flags WHERE service_id = ${p.serviceId} AND environment = 'production' AND key = ${flag.key}`;
    const workflowId = canaryWorkflowId(p.serviceId, 'production', flag.key);
    const config = { ...CONFIG, maxWaitMinutes: 1 };
    const record = await new CanaryStore().insert(app.platform.db.sql, {
      id: `cnr_long_${randomBytes(3).toString('hex')}`,
      projectId: p.projectId,
      flagId: row.id,
      flagKey: flag.key,
      serviceId: p.serviceId,
      environment: 'production',
      ruleId: 'canary',
      config,
      preCanaryVersion: flag.version,
      workflowId,
      createdByActor: actor.name,
    });
    const first = await env.client.workflow.start<typeof canaryPipeline>('canaryPipeline', {
      workflowId,
      taskQueue,
      args: [{ pipelineId: record.id, target: { projectId: p.projectId, orgId: p.orgId, serviceId: p.serviceId, environment: 'production', flagKey: flag.key }, ruleId: 'canary', insertRuleValue: 'true', config, preCanaryVersion: flag.version, historyLimit: 20 }],
    });
    // Time moves a second at a time rather than under result(): left to skip freely, the test
    // server can jump a run that has just continued as new straight to its run timeout. And only
    // while no activity runs: a gate's query slowed by a loaded machine must not outlast its
    // timeout in skipped time.
    await eventually(async () => {
      const { status, raw } = await env.client.workflow.getHandle(workflowId).describe();
      if (status.name === 'COMPLETED') return true;
      if (status.name !== 'RUNNING' && status.name !== 'CONTINUED_AS_NEW') throw new Error(`the pipeline ended ${status.name}`);
      const running = (raw.pendingActivities ?? []).some((a) => a.state === temporal.api.enums.v1.PendingActivityState.PENDING_ACTIVITY_STATE_STARTED);
      if (!running) await env.sleep(1_000);
      return false;
    }, 150_000);
    await expect(env.client.workflow.getHandle(workflowId).result()).resolves.toBe('completed');
    // Every stage boundary past 20 events started a new run: the first run did not finish the pipeline itself.
    expect((await env.client.workflow.getHandle(workflowId, first.firstExecutionRunId).describe()).status.name).toBe('CONTINUED_AS_NEW');
    const done = await canaries.get(flag.ref);
    expect(done.completedStages.map((s) => [s.index, s.rolloutPercent, s.gate?.decision])).toEqual([
      [0, 20, 'pass'],
      [1, 40, 'pass'],
      [2, 60, 'pass'],
    ]);
    expect((await flagNow(flag.ref))!.version).toBe(flag.version + 3);
  }, 180_000);

  it('replays the recorded histories (the checked-in one and this run\'s) without nondeterminism', async () => {
    const fixture = `${__dirname}/fixtures/canary-breach-history.json`;
    const replays = [];
    for (const workflowId of finished) {
      const handle = env.client.workflow.getHandle(workflowId);
      const { status } = await handle.describe();
      if (status.name === 'RUNNING') continue;
      replays.push({ workflowId, history: await handle.fetchHistory() });
    }
    expect(replays.length).toBeGreaterThanOrEqual(5);
    // RECORD_CANARY_HISTORY=1 writes the breach run's history as the fixture later code must replay.
    if (process.env.RECORD_CANARY_HISTORY) {
      const breach = replays.find((r) => r.workflowId.includes(':breach-'))!;
      fs.mkdirSync(`${__dirname}/fixtures`, { recursive: true });
      fs.writeFileSync(fixture, JSON.stringify({ workflowId: breach.workflowId, history: breach.history }));
    }
    const recorded = JSON.parse(fs.readFileSync(fixture, 'utf8'));
    const checkedIn = { workflowId: recorded.workflowId as string, history: temporal.api.history.v1.History.fromObject(recorded.history) };
    for (const { workflowId, history } of [checkedIn, ...replays]) {
      await Worker.runReplayHistory({ workflowBundle }, history, workflowId);
    }
  }, 120_000);
});
