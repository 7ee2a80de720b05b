import { BanditReallocator } from '../../api/features/experiments/reallocation';
import { BanditStore } from '../../api/features/experiments/store';
import { BanditWarehouse } from '../../api/features/experiments/warehouse';
import type { FlagService } from '../../api/features/flags/service';
import { startTestApp, type TestApp } from '../support/harness';
import { createProject, expectStatus, opaqueToken, personalToken, qs, type Project } from '../webhooks/support';
import { auditOf, createExperiment, createVariantFlag, experimentBody, expectRecord, getFlag, newKey, reward, variantOf, weightsOf } from './support';

/**
 * The bandit experiment endpoints over HTTP against the real app (Postgres, the workflow on the
 * app's Temporal, chDB): the lifecycle, rewards through the reward API moving the allocation and
 * the flag's weights, winner promotion, and who may call what.
 */

let app: TestApp;
let p: Project;
let other: Project;

beforeAll(async () => {
  app = await startTestApp();
  p = await createProject(app);
  other = await createProject(app);
}, 60_000);
afterAll(async () => {
  await app?.stop();
});

describe('bandit experiment lifecycle', () => {
  it('starts with equal allocations written to the flag, lists and answers it, refuses a second, and stops', async () => {
    const key = newKey('life');
    const flag = await createVariantFlag(p.owner, p.serviceId, key);
    const created = await createExperiment(p.member, experimentBody(p, key, { seed: undefined }));
    expect(created).toMatchObject({
      flagKey: key,
      projectId: p.projectId,
      serviceId: p.serviceId,
      environment: 'production',
      algorithm: 'thompson_sampling',
      status: 'running',
      winner: null,
      reallocationIntervalMinutes: 15,
      conversionEvent: null,
      rounds: 0,
    });
    expect(created.variants.map((v: any) => [v.name, v.allocation, v.trials, v.successes])).toEqual([
      ['control', 0.5, 0, 0],
      ['treatment', 0.5, 0, 0],
    ]);
    expect(Number.isInteger(created.seed)).toBe(true);

    const after = await getFlag(p, key);
    expect(weightsOf(after)).toEqual({ control: 50, treatment: 50 });
    expect(after.version).toBe(flag.version + 1);
    const audit = await auditOf(app, key);
    const start = audit.find((a) => a.action === 'flag.update');
    expect(start?.actor).toBe(`bandit:${created.id}`);
    expect(start?.metadata.bandit).toMatchObject({ experimentId: created.id, trigger: 'start' });
    expect(audit.find((a) => a.action === 'experiment.create')?.actor).toBe(p.member.email);

    // The experiment's workflow runs on the app's Temporal with the deterministic id.
    const handle = app.platform.temporal.client.workflow.getHandle(`bandit:${created.id}`);
    expect((await handle.describe()).status.name).toBe('RUNNING');

    const again = await p.admin.request('POST', '/api/experiments/bandit', experimentBody(p, key));
    expect(again.status).toBe(409);

    const status = await p.viewer.request('GET', `/api/experiments/${created.id}/bandit-status`);
    expectStatus(status, 200, 'status');
    expectRecord(status.body);
    expect(status.body.id).toBe(created.id);

    const list = await p.viewer.request('GET', `/api/experiments/bandit${qs({ projectId: p.projectId, serviceId: p.serviceId })}`);
    expectStatus(list, 200, 'list');
    expect(list.body.experiments.map((e: any) => e.id)).toContain(created.id);
    list.body.experiments.forEach(expectRecord);
    const otherList = await other.owner.request('GET', `/api/experiments/bandit${qs({ projectId: other.projectId })}`);
    expect(otherList.body.experiments).toEqual([]);
    const mine = await p.viewer.request('GET', '/api/experiments/bandit');
    expect(mine.body.experiments.map((e: any) => e.id)).toContain(created.id);

    const stopped = await p.member.request('POST', `/api/experiments/${created.id}/stop`, { reason: 'enough' });
    expectStatus(stopped, 200, 'stop');
    expect(stopped.body).toMatchObject({ status: 'stopped', statusReason: 'enough' });
    expect(stopped.body.endedAt).not.toBeNull();
    // The workflow ends on the stop signal; the flag keeps its weights.
    expect(await handle.result()).toBe('stopped');
    expect(weightsOf(await getFlag(p, key))).toEqual({ control: 50, treatment: 50 });

    expect((await p.member.request('POST', `/api/experiments/${created.id}/reward`, { variantName: 'control', converted: true })).status).toBe(409);
    expect((await p.member.request('POST', `/api/experiments/${created.id}/reallocate`)).status).toBe(409);
    expect((await p.member.request('POST', `/api/experiments/${created.id}/stop`, {})).status).toBe(409);
    // Another may start once the last one ended.
    const next = await createExperiment(p.member, experimentBody(p, key));
    expectStatus(await p.member.request('POST', `/api/experiments/${next.id}/stop`), 200, 'stop without a body');
  });

  it('moves allocation to the better arm from rewards (5% vs 25%), writing a flag version with the evidence', async () => {
    const key = newKey('rewards');
    await createVariantFlag(p.owner, p.serviceId, key);
    const exp = await createExperiment(p.member, experimentBody(p, key));
    const startVersion = (await getFlag(p, key)).version;

    // Too few samples (under minSampleSizePerVariant = 50): nothing moves, no flag version.
    await reward(p.member, exp.id, 'control', 20, 1);
    await reward(p.member, exp.id, 'treatment', 20, 5);
    const early = await p.member.request('POST', `/api/experiments/${exp.id}/reallocate`);
    expectStatus(early, 200, 'reallocate early');
    expectRecord(early.body);
    expect(early.body.rounds).toBe(1);
    expect(variantOf(early.body, 'control')).toMatchObject({ allocation: 0.5, trials: 20, successes: 1, conversionRate: 0.05 });
    expect(variantOf(early.body, 'treatment')).toMatchObject({ allocation: 0.5, trials: 20, successes: 5, conversionRate: 0.25 });
    expect((await getFlag(p, key)).version).toBe(startVersion);

    await reward(p.member, exp.id, 'control', 80, 4);
    await reward(p.member, exp.id, 'treatment', 80, 20);
    const moved = await p.member.request('POST', `/api/experiments/${exp.id}/reallocate`);
    expectStatus(moved, 200, 'reallocate');
    const control = variantOf(moved.body, 'control');
    const treatment = variantOf(moved.body, 'treatment');
    expect([control.trials, control.successes, treatment.trials, treatment.successes]).toEqual([100, 5, 100, 25]);
    expect(treatment.allocation).toBeGreaterThan(0.5);
    expect(treatment.probabilityBest).toBeGreaterThan(0.99);
    // P(best) passed the threshold, but without autoRolloutWinner the leader is only reported.
    expect(moved.body).toMatchObject({ status: 'running', winner: 'treatment', rounds: 2 });
    // The floor holds for the worse arm.
    expect(control.allocation).toBeCloseTo(0.1, 6);

    const flag = await getFlag(p, key);
    expect(flag.version).toBe(startVersion + 1);
    expect(weightsOf(flag)).toEqual({ control: control.allocation * 100, treatment: treatment.allocation * 100 });
    const audit = await auditOf(app, key);
    const round = audit.filter((a) => a.action === 'flag.update').pop()!;
    expect(round.actor).toBe(`bandit:${exp.id}`);
    expect(round.metadata.version).toBe(flag.version);
    expect(round.metadata.bandit).toMatchObject({ experimentId: exp.id, round: 2, trigger: 'manual', requestedBy: p.member.email, outcome: 'reallocated' });
    expect(round.metadata.bandit.arms).toEqual([
      { name: 'control', trials: 100, successes: 5 },
      { name: 'treatment', trials: 100, successes: 25 },
    ]);
    expect(audit.filter((a) => a.action === 'experiment.reallocate')).toHaveLength(2);

    // The same counts decide about the same again (the next round draws from seed + round).
    const again = await p.member.request('POST', `/api/experiments/${exp.id}/reallocate`);
    expect(variantOf(again.body, 'treatment').allocation).toBeCloseTo(treatment.allocation, 2);
    expectStatus(await p.member.request('POST', `/api/experiments/${exp.id}/stop`), 200, 'stop');
  });

  it('promotes the winner to 100% with autoRolloutWinner: the experiment completes and evaluation serves it to everyone', async () => {
    const key = newKey('winner');
    await createVariantFlag(p.owner, p.serviceId, key);
    const exp = await createExperiment(p.member, experimentBody(p, key, { autoRolloutWinner: true, algorithm: 'epsilon_greedy' }));
    await reward(p.member, exp.id, 'control', 100, 5);
    await reward(p.member, exp.id, 'treatment', 100, 25);
    const done = await p.member.request('POST', `/api/experiments/${exp.id}/reallocate`);
    expectStatus(done, 200, 'reallocate');
    expect(done.body).toMatchObject({ status: 'completed', winner: 'treatment', statusReason: 'winner treatment promoted to 100%' });
    expect(variantOf(done.body, 'treatment').allocation).toBe(1);
    expect(variantOf(done.body, 'control').allocation).toBe(0);
    expect(weightsOf(await getFlag(p, key))).toEqual({ control: 0, treatment: 100 });
    const [last] = (await auditOf(app, key)).filter((a) => a.action === 'flag.update').slice(-1);
    expect(last.metadata.bandit).toMatchObject({ outcome: 'winner_promoted' });
    // The workflow ended with it (signalled), and rewards are no longer counted.
    expect(await app.platform.temporal.client.workflow.getHandle(`bandit:${exp.id}`).result()).toBe('completed');
    expect((await p.member.request('POST', `/api/experiments/${exp.id}/reward`, { variantName: 'control', converted: false })).status).toBe(409);

    const token = await opaqueToken(p.owner, p.projectId, { read: true });
    for (const targetingKey of ['u-1', 'u-2', 'u-3', 'u-4', 'u-5', 'u-6', 'u-7', 'u-8']) {
      const evaluated = await app.request('POST', '/api/flags/evaluate', { token, body: { flagKey: key, serviceId: p.serviceId, environment: 'production', context: { targetingKey } } });
      expectStatus(evaluated, 200, 'evaluate');
      expect(evaluated.body).toMatchObject({ value: 'green', variant: 'treatment' });
    }
  });

  it('stops the experiment when someone changes the flag\u2019s variants under it, keeping their edit', async () => {
    const key = newKey('edited');
    await createVariantFlag(p.owner, p.serviceId, key);
    const exp = await createExperiment(p.member, experimentBody(p, key));
    const flag = await getFlag(p, key);
    const edited = await p.owner.request('PATCH', `/api/flags/${key}${qs({ serviceId: p.serviceId, environment: 'production' })}`, {
      variants: [...flag.variants, { name: 'third', value: 'red', weight: 0 }],
      version: flag.version,
    });
    expectStatus(edited, 200, 'edit');
    const res = await p.member.request('POST', `/api/experiments/${exp.id}/reallocate`);
    expectStatus(res, 200, 'reallocate');
    expect(res.body).toMatchObject({ status: 'stopped', statusReason: "the flag's variants no longer match the experiment's arms" });
    expect((await getFlag(p, key)).variants.map((v) => v.name)).toEqual(['control', 'treatment', 'third']);
  });
  it('runs concurrent rounds of one experiment one at a time: the others answer 409, none hangs (more requests than pooled connections)', async () => {
    const key = newKey('rounds');
    await createVariantFlag(p.owner, p.serviceId, key);
    const exp = await createExperiment(p.member, experimentBody(p, key, { minSampleSizePerVariant: 10 }));
    await reward(p.member, exp.id, 'control', 10, 1);
    await reward(p.member, exp.id, 'treatment', 10, 6);
    const answers = await Promise.all(Array.from({ length: 15 }, () => p.member.request('POST', `/api/experiments/${exp.id}/reallocate`)));
    const statuses = answers.map((r) => r.status);
    expect(statuses.every((s) => s === 200 || s === 409)).toBe(true);
    const ran = statuses.filter((s) => s === 200).length;
    expect(ran).toBeGreaterThanOrEqual(1);
    const status = await p.viewer.request('GET', `/api/experiments/${exp.id}/bandit-status`);
    expect(status.body.rounds).toBe(ran);
    // A round that crashed holding the lease does not block the experiment past the lease.
    await app.platform.db.sql`UPDATE bandit_experiments SET round_lease_until = now() + interval '1 minute' WHERE id = ${exp.id}`;
    expect((await p.member.request('POST', `/api/experiments/${exp.id}/reallocate`)).status).toBe(409);
    await app.platform.db.sql`UPDATE bandit_experiments SET round_lease_until = now() - interval '1 second' WHERE id = ${exp.id}`;
    expectStatus(await p.member.request('POST', `/api/experiments/${exp.id}/reallocate`), 200, 'after the lease lapsed');
    expectStatus(await p.member.request('POST', `/api/experiments/${exp.id}/stop`), 200, 'stop');
  });

  it('keeps a concurrent edit of the flag: the round retries on the version conflict with the fresh flag', async () => {
    const key = newKey('concurrent');
    await createVariantFlag(p.owner, p.serviceId, key);
    const exp = await createExperiment(p.member, experimentBody(p, key, { minSampleSizePerVariant: 10 }));
    await reward(p.member, exp.id, 'control', 10, 1);
    await reward(p.member, exp.id, 'treatment', 10, 6);
    const before = await getFlag(p, key);
    // The real flag service, with a person's edit landing between the round's read and its write.
    const real = app.platform.flagService;
    let edits = 0;
    const flags = Object.create(real) as FlagService;
    flags.update = async (...args: Parameters<FlagService['update']>) => {
      if (edits++ === 0) await real.update({ name: p.owner.email, userId: p.owner.id }, args[1], { description: 'edited meanwhile' });
      return real.update(...args);
    };
    const sql = app.platform.db.sql;
    const reallocator = new BanditReallocator({ sql, store: new BanditStore(), flags, warehouse: new BanditWarehouse(app.platform.analytics) });
    const after = await reallocator.run(exp.id, 'manual', 'test');
    expect(edits).toBe(2);
    expect(after?.rounds).toBe(1);
    const flag = (await getFlag(p, key)) as Awaited<ReturnType<typeof getFlag>> & { description: string };
    expect(flag.description).toBe('edited meanwhile');
    expect(flag.version).toBe(before.version + 2);
    expect(weightsOf(flag).treatment).toBeGreaterThan(50);
    expect(weightsOf(flag).treatment).toBe(after!.arms.find((a) => a.name === 'treatment')!.allocation * 100);
    expectStatus(await p.member.request('POST', `/api/experiments/${exp.id}/stop`), 200, 'stop');
  });
});

describe('bandit experiment refusals', () => {
  it('refuses callers without access', async () => {
    const key = newKey('refuse');
    await createVariantFlag(p.owner, p.serviceId, key);
    const body = experimentBody(p, key);
    const exp = await createExperiment(p.member, body);
    const paths = {
      status: `/api/experiments/${exp.id}/bandit-status`,
      reward: `/api/experiments/${exp.id}/reward`,
      reallocate: `/api/experiments/${exp.id}/reallocate`,
      stop: `/api/experiments/${exp.id}/stop`,
    };
    const rewardBody = { variantName: 'control', converted: true };

    // No credential: 401 everywhere.
    expect((await app.request('GET', `/api/experiments/bandit${qs({ projectId: p.projectId })}`)).status).toBe(401);
    expect((await app.request('POST', '/api/experiments/bandit', { body })).status).toBe(401);
    expect((await app.request('GET', paths.status)).status).toBe(401);
    expect((await app.request('POST', paths.reward, { body: rewardBody })).status).toBe(401);
    expect((await app.request('POST', paths.reallocate)).status).toBe(401);
    expect((await app.request('POST', paths.stop)).status).toBe(401);

    // Another project's owner: 404 like a missing experiment (or project, or service).
    expect((await other.owner.request('GET', `/api/experiments/bandit${qs({ projectId: p.projectId })}`)).status).toBe(404);
    expect((await other.owner.request('POST', '/api/experiments/bandit', body)).status).toBe(404);
    expect((await other.owner.request('GET', paths.status)).status).toBe(404);
    expect((await other.owner.request('POST', paths.reward, rewardBody)).status).toBe(404);
    expect((await other.owner.request('POST', paths.reallocate)).status).toBe(404);
    expect((await other.owner.request('POST', paths.stop)).status).toBe(404);
    expect((await p.viewer.request('GET', '/api/experiments/exp_missing/bandit-status')).status).toBe(404);
    // A service of another project under this projectId.
    expect((await other.owner.request('POST', '/api/experiments/bandit', { ...body, projectId: other.projectId })).status).toBe(404);
    expect((await p.owner.request('POST', '/api/experiments/bandit', { ...body, serviceId: other.serviceId })).status).toBe(404);

    // Viewers, read-tier personal tokens and read-only project tokens may read but not write.
    expect((await p.viewer.request('POST', '/api/experiments/bandit', body)).status).toBe(403);
    expect((await p.viewer.request('POST', paths.reward, rewardBody)).status).toBe(403);
    expect((await p.viewer.request('POST', paths.reallocate)).status).toBe(403);
    expect((await p.viewer.request('POST', paths.stop)).status).toBe(403);
    const readPat = await personalToken(p.member, 'read');
    expect((await app.request('GET', paths.status, { token: readPat })).status).toBe(200);
    expect((await app.request('GET', `/api/experiments/bandit${qs({ projectId: p.projectId })}`, { token: readPat })).status).toBe(200);
    for (const [path, b] of [
      ['/api/experiments/bandit', body],
      [paths.reward, rewardBody],
      [paths.reallocate, undefined],
      [paths.stop, undefined],
    ] as const) {
      const res = await app.request('POST', path, { token: readPat, body: b });
      expect(res.status).toBe(403);
      expect(res.body.message).toContain('read-only');
    }
    const readToken = await opaqueToken(p.owner, p.projectId, { read: true });
    expect((await app.request('GET', paths.status, { token: readToken })).status).toBe(200);
    expect((await app.request('POST', paths.reward, { token: readToken, body: rewardBody })).status).toBe(403);
    // A write-tier personal token and a write project token may.
    expect((await app.request('POST', paths.reward, { token: await personalToken(p.member, 'write'), body: rewardBody })).status).toBe(200);
    const writeToken = await opaqueToken(p.owner, p.projectId, { read: true, write: true });
    const counted = await app.request('POST', paths.reward, { token: writeToken, body: rewardBody });
    expectStatus(counted, 200, 'reward with a write token');
    expect(variantOf(counted.body, 'control')).toMatchObject({ trials: 2, successes: 2 });
    expectStatus(await p.member.request('POST', paths.stop), 200, 'stop');
  });

  it('refuses malformed, invalid and oversized input', async () => {
    const key = newKey('invalid');
    await createVariantFlag(p.owner, p.serviceId, key);
    const single = newKey('single');
    await createVariantFlag(p.owner, p.serviceId, single, [{ name: 'only', value: 'blue', weight: 100 }]);
    const bad = async (extra: Record<string, unknown>, flagKey = key) => (await p.member.request('POST', '/api/experiments/bandit', experimentBody(p, flagKey, extra))).status;
    expect(await bad({ minExplorationFloor: 1.5 })).toBe(400);
    expect(await bad({ minExplorationFloor: 0.6 })).toBe(400); // 0.6 * 2 arms > 1
    expect(await bad({ confidenceThreshold: 1.01 })).toBe(400);
    expect(await bad({ confidenceThreshold: -0.1 })).toBe(400);
    expect(await bad({ minSampleSizePerVariant: 2.5 })).toBe(400);
    expect(await bad({ algorithm: 'ucb1' })).toBe(400);
    expect(await bad({ autoRolloutWinner: 'yes' })).toBe(400);
    expect(await bad({ conversionEvent: 'error' })).toBe(400);
    expect(await bad({ conversionEvent: 'has space' })).toBe(400);
    expect(await bad({ reallocationIntervalMinutes: 0.5 })).toBe(400);
    expect(await bad({ reallocationIntervalMinutes: 20_000 })).toBe(400);
    expect(await bad({ environment: 'qa' })).toBe(400);
    expect(await bad({ surprise: true })).toBe(400);
    expect(await bad({ name: '' })).toBe(400);
    expect(await bad({}, single)).toBe(400); // fewer than 2 variants
    expect(await bad({}, 'no-such-flag')).toBe(404);
    expect(await bad({ environment: 'staging' })).toBe(404); // the flag exists only in production
    expect((await p.member.request('POST', '/api/experiments/bandit', undefined, { rawBody: '{"name":', headers: { 'content-type': 'application/json' } })).status).toBe(400);
    const huge = JSON.stringify(experimentBody(p, key, { name: 'x'.repeat(64 * 1024) }));
    expect((await p.member.request('POST', '/api/experiments/bandit', undefined, { rawBody: huge, headers: { 'content-type': 'application/json' } })).status).toBe(413);
    expect((await p.viewer.request('GET', `/api/experiments/bandit${qs({ projectId: p.projectId, limit: 500 })}`)).status).toBe(400);

    // Nothing was created by any of them.
    const list = await p.viewer.request('GET', `/api/experiments/bandit${qs({ projectId: p.projectId })}`);
    expect(list.body.experiments.filter((e: any) => e.flagKey === key || e.flagKey === single)).toEqual([]);

    const exp = await createExperiment(p.member, experimentBody(p, key));
    const rewardPath = `/api/experiments/${exp.id}/reward`;
    const unknown = await p.member.request('POST', rewardPath, { variantName: 'nope', converted: true });
    expect(unknown.status).toBe(400);
    expect(unknown.body.details[0].path).toBe('body.variantName');
    expect((await p.member.request('POST', rewardPath, { variantName: 'control', converted: 'yes' })).status).toBe(400);
    expect((await p.member.request('POST', rewardPath, { variantName: 'control' })).status).toBe(400);
    expect((await p.member.request('POST', rewardPath, { variantName: 'control', converted: true, extra: 1 })).status).toBe(400);
    expect((await p.member.request('POST', rewardPath, undefined, { rawBody: '{', headers: { 'content-type': 'application/json' } })).status).toBe(400);
    const bigReward = JSON.stringify({ variantName: 'control', converted: true, pad: 'x'.repeat(64 * 1024) });
    expect((await p.member.request('POST', rewardPath, undefined, { rawBody: bigReward, headers: { 'content-type': 'application/json' } })).status).toBe(413);
    expect((await p.member.request('POST', `/api/experiments/${exp.id}/stop`, { reason: 'x'.repeat(2_000) })).status).toBe(400);
    // Postgres refuses NUL characters in text: a 400, not a 500.
    expect((await p.member.request('POST', rewardPath, { variantName: 'contr\u0000ol', converted: true })).status).toBe(400);
    expect((await p.member.request('POST', `/api/experiments/${exp.id}/stop`, { reason: 'a\u0000b' })).status).toBe(400);
    const status = await p.viewer.request('GET', `/api/experiments/${exp.id}/bandit-status`);
    expect(variantOf(status.body, 'control').trials).toBe(0);
    expectStatus(await p.member.request('POST', `/api/experiments/${exp.id}/stop`), 200, 'stop');
  });

  it('gives one experiment and one 409 for two concurrent creates', async () => {
    const key = newKey('race');
    await createVariantFlag(p.owner, p.serviceId, key);
    const [a, b] = await Promise.all([
      p.member.request('POST', '/api/experiments/bandit', experimentBody(p, key)),
      p.admin.request('POST', '/api/experiments/bandit', experimentBody(p, key)),
    ]);
    expect([a.status, b.status].sort()).toEqual([201, 409]);
    const winner = a.status === 201 ? a : b;
    expectStatus(await p.member.request('POST', `/api/experiments/${winner.body.id}/stop`), 200, 'stop');
  });

  it('documents the routes in the OpenAPI document', async () => {
    const doc = (await app.request('GET', '/api/openapi.json')).body;
    expect(Object.keys(doc.paths['/api/experiments/bandit']).sort()).toEqual(['get', 'post']);
    for (const path of ['/api/experiments/{id}/reallocate', '/api/experiments/{id}/reward', '/api/experiments/{id}/stop']) expect(Object.keys(doc.paths[path])).toEqual(['post']);
    expect(Object.keys(doc.paths['/api/experiments/{id}/bandit-status'])).toEqual(['get']);
    const create = doc.paths['/api/experiments/bandit'].post.requestBody.content['application/json'].schema;
    expect(create.additionalProperties).toBe(false);
    expect(create.properties.reallocationIntervalMinutes.minimum).toBe(1);
  });
});
