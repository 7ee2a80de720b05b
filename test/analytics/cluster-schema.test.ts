/**
 * The analytics schema's cluster form (analytics/cluster.ts, docs/clickhouse-cluster.md), checked
 * statement by statement: every schema file translates, every statement is ON CLUSTER and parses
 * as ClickHouse SQL (chDB's parser, EXPLAIN AST), tables split into replicated local halves and
 * Distributed tables, views roll up local rows into local rollups. Without a cluster the plan is
 * the schema files as written, which every other analytics test runs against chDB.
 */
import fs from 'node:fs';
import path from 'node:path';
import { query } from 'chdb';
import { openAnalytics } from '../../analytics/client';
import { ClusterSchema } from '../../analytics/cluster';
import { analyticsSchemaPlan, listSchemaFiles, migrateAnalytics } from '../../analytics/migrate';
import { projectPath } from '../../api/infra/paths';
import { workerChdbPath } from '../support/chdb-path';

const CLUSTER = 'flags_cluster';
const plan = analyticsSchemaPlan(CLUSTER);
const all = [...plan.ledger, ...plan.files.flatMap((f) => f.statements)];

/** Parses without executing: a syntax error throws. */
function parses(statement: string): void {
  query(`EXPLAIN AST ${statement}`, 'TSV');
}

describe('analytics schema in cluster mode', () => {
  it('translates every schema file, and every statement parses and runs ON CLUSTER', () => {
    expect(plan.files.map((f) => f.file)).toEqual(listSchemaFiles());
    expect(all.length).toBeGreaterThan(40);
    for (const statement of all) {
      expect(statement).toContain(` ON CLUSTER ${CLUSTER}`);
      expect(() => parses(statement)).not.toThrow();
    }
  });

  it('splits each written table into a replicated local table and a Distributed table with a deterministic sharding key', () => {
    const local = all.find((s) => s.startsWith('CREATE TABLE IF NOT EXISTS evaluation_events_local '))!;
    expect(local).toMatch(/ENGINE = ReplicatedMergeTree\('\/clickhouse\/tables\/\{shard\}\/\{database\}\/\{table\}', '\{replica\}'\)/);
    expect(local).toContain('ORDER BY (project_id, service_id, environment, flag_key, timestamp)');
    const distributed = all.find((s) => s.startsWith('CREATE TABLE IF NOT EXISTS evaluation_events '))!;
    expect(distributed).toBe(
      `CREATE TABLE IF NOT EXISTS evaluation_events ON CLUSTER ${CLUSTER} AS evaluation_events_local ENGINE = Distributed('${CLUSTER}', currentDatabase(), evaluation_events_local, cityHash64(targeting_key_hash, flag_key, timestamp))`,
    );
    // Engine arguments follow the replication path: the version column of recent_contexts.
    expect(all.find((s) => s.startsWith('CREATE TABLE IF NOT EXISTS recent_contexts_local '))).toContain(
      "ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}', seen_at)",
    );
    expect(all.find((s) => s.startsWith('CREATE TABLE IF NOT EXISTS recent_contexts '))).toMatch(/cityHash64\(service_id, environment, targeting_key\)\)$/);
    // Rollups are only written by their views: a Distributed table to read, no sharding key.
    expect(all.find((s) => s.startsWith('CREATE TABLE IF NOT EXISTS evaluation_minutes '))).toMatch(/Distributed\('flags_cluster', currentDatabase\(\), evaluation_minutes_local\)$/);
    // Every written table has a Distributed half with a key; nothing keeps the single-node setting.
    for (const table of ['outcome_events', 'sdk_telemetry', 'sdk_diagnostics', 'web_vitals', 'client_errors', 'browser_events', 'admin_events', 'schema_migrations']) {
      expect(all.find((s) => s.startsWith(`CREATE TABLE IF NOT EXISTS ${table} `))).toMatch(/, cityHash64\([a-z_, ]+\)\)$/);
    }
    expect(all.join('\n')).not.toContain('non_replicated_deduplication_window');
    expect(all.filter((s) => /ENGINE = Replicated/.test(s)).every((s) => s.includes('replicated_deduplication_window') || !/SETTINGS/.test(s))).toBe(true);
  });

  it('keeps the health probe a plain table on each node', () => {
    const probe = all.filter((s) => /\bhealth_probe\b/.test(s));
    expect(probe).toHaveLength(1);
    expect(probe[0]).toMatch(/^CREATE TABLE IF NOT EXISTS health_probe ON CLUSTER flags_cluster \([\s\S]*\) ENGINE = MergeTree\b/);
  });

  it('places materialized views on the local tables, so each shard rolls up what it stores', () => {
    const views = all.filter((s) => s.startsWith('CREATE MATERIALIZED VIEW') && !s.includes('FROM evaluation_requests'));
    expect(views.length).toBeGreaterThanOrEqual(6);
    for (const view of views) {
      expect(view).toMatch(/ TO \w+_local AS/);
      for (const source of view.matchAll(/\bFROM\s+(\w+)/g)) expect(source[1]).toMatch(/_local$/);
    }
    const evaluationRollups = views.filter((v) => v.startsWith('CREATE MATERIALIZED VIEW IF NOT EXISTS evaluation_minutes_mv'));
    // Created by 011, dropped and created again by 033 reading through a subquery.
    expect(evaluationRollups).toHaveLength(2);
    expect(evaluationRollups[1]).toContain('FROM (SELECT *, evaluations AS weight FROM evaluation_events_local)');
    expect(all).toContain(`DROP VIEW IF EXISTS evaluation_minutes_mv ON CLUSTER ${CLUSTER}`);
  });

  it('keeps a landing table on every node as it is, its view writing through the Distributed table', () => {
    const requests = all.filter((s) => /\bevaluation_requests\b/.test(s));
    expect(requests).toHaveLength(2);
    expect(requests[0]).toMatch(/^CREATE TABLE IF NOT EXISTS evaluation_requests ON CLUSTER flags_cluster \([\s\S]*results Array\(String\)\s*\) ENGINE = Null$/);
    expect(requests[1]).toMatch(/^CREATE MATERIALIZED VIEW IF NOT EXISTS evaluation_requests_mv ON CLUSTER flags_cluster TO evaluation_events AS[\s\S]*FROM evaluation_requests\s+ARRAY JOIN/);
    expect(plan.storageTable('evaluation_requests')).toBe('evaluation_requests');
  });

  it('alters columns on both halves, local first, and storage settings and TTLs on the local half only', () => {
    const addRule = all.filter((s) => s.includes('ADD COLUMN IF NOT EXISTS rule_id'));
    expect(addRule.map((s) => s.split(' ')[2])).toEqual(['evaluation_events_local', 'evaluation_events']);
    const setting = all.filter((s) => s.includes('MODIFY SETTING'));
    expect(setting.length).toBeGreaterThan(0);
    for (const s of setting) expect(s).toMatch(/^ALTER TABLE \w+_local ON CLUSTER flags_cluster MODIFY SETTING replicated_deduplication_window = 1000$/);
    expect(plan.storageTable('evaluation_minutes')).toBe('evaluation_minutes_local');
    expect(plan.storageTable('health_probe')).toBe('health_probe');
    expect(plan.onCluster).toBe(` ON CLUSTER ${CLUSTER}`);
  });

  it('refuses a statement it has no cluster form for, and a cluster name that is not an identifier', () => {
    const schema = new ClusterSchema(CLUSTER);
    expect(() => schema.translate('INSERT INTO evaluation_events VALUES (1)')).toThrow(/No cluster form/);
    expect(() => schema.translate('CREATE TABLE IF NOT EXISTS t (a String) ENGINE = Log')).toThrow(/No cluster form/);
    expect(() => new ClusterSchema('c; DROP TABLE x')).toThrow(/plain identifier/);
    expect(schema.createDatabase('flags')).toBe(`CREATE DATABASE IF NOT EXISTS flags ON CLUSTER ${CLUSTER}`);
  });

  it('leaves the single-node schema exactly as the files say without a cluster', () => {
    const single = analyticsSchemaPlan(undefined);
    const statements = single.files.flatMap((f) => f.statements);
    expect(statements.some((s) => s.includes('ON CLUSTER'))).toBe(false);
    const text = fs.readFileSync(path.join(projectPath('analytics', 'schema'), '010_evaluation_events.sql'), 'utf8');
    expect(text).toContain(single.files.find((f) => f.file === '010_evaluation_events.sql')!.statements[0]!.split('\n')[0]);
    expect(single.storageTable('evaluation_events')).toBe('evaluation_events');
    expect(single.onCluster).toBe('');
  });
});

describe('cluster mode over a database migrated on one node', () => {
  it('refuses before running any statement, naming the way out', async () => {
    const database = `cluster_guard_${process.pid}`;
    const analytics = await openAnalytics({ database, chdbPath: workerChdbPath() });
    try {
      await migrateAnalytics(analytics);
      await expect(migrateAnalytics({ ...analytics, cluster: CLUSTER })).rejects.toThrow(
        /holds a single-node schema \(schema_migrations is ReplacingMergeTree\).*new CLICKHOUSE_DATABASE/,
      );
      const rs = await analytics.client.query({ query: "SELECT count() AS n FROM system.tables WHERE database = currentDatabase() AND name LIKE '%\\_local'", format: 'JSONEachRow' });
      expect(Number(((await rs.json()) as { n: string }[])[0]!.n)).toBe(0);
    } finally {
      await analytics.client.command({ query: `DROP DATABASE IF EXISTS ${database}` });
      await analytics.close();
    }
  }, 60_000);
});
