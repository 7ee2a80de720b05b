/**
 * The Helm chart (deploy/helm/flagship, docs/kubernetes.md): `helm lint --strict`, and the
 * rendered manifests validated against the Kubernetes API's schemas (kubernetes-validate bundles
 * them: no cluster, no network), then read back to check what the chart promises: a Deployment per
 * role with its probes on the management listener, non-root and read-only, autoscaling and
 * disruption budgets, a Service per listener, the migration hook, and no backend of its own.
 * scripts/test-infra.sh provisions helm (built from its module at a pinned version) and
 * kubernetes-validate, and exports their paths.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { parseAllDocuments } from 'yaml';
import { projectPath } from '../../api/infra/paths';

const run = promisify(execFile);
const CHART = projectPath('deploy', 'helm', 'flagship');
const EXAMPLE_VALUES = path.join(CHART, 'ci', 'example-values.yaml');
const KUBERNETES_VERSION = '1.31.0';

function tool(variable: 'HELM_PATH' | 'KUBERNETES_VALIDATE_PATH'): string {
  const found = process.env[variable];
  if (!found) throw new Error(`${variable} is not set: run the suite through scripts/test.sh, or eval "$(bash scripts/test-infra.sh env)"`);
  return found;
}

type Manifest = { kind: string; metadata: { name: string; annotations?: Record<string, string> }; spec: any; data?: Record<string, string>; stringData?: Record<string, string> };

async function render(...args: string[]): Promise<{ text: string; manifests: Manifest[] }> {
  const { stdout } = await run(tool('HELM_PATH'), ['template', 'rel', CHART, '--kube-version', KUBERNETES_VERSION, ...args], { maxBuffer: 16 << 20 });
  const manifests = parseAllDocuments(stdout)
    .map((doc) => doc.toJS() as Manifest | null)
    .filter((m): m is Manifest => Boolean(m));
  return { text: stdout, manifests };
}

const named = (manifests: Manifest[], kind: string, name: string) => {
  const found = manifests.find((m) => m.kind === kind && m.metadata.name === name);
  if (!found) throw new Error(`no ${kind} ${name} in ${manifests.map((m) => `${m.kind}/${m.metadata.name}`).join(', ')}`);
  return found;
};

describe('the Helm chart', () => {
  it('passes helm lint --strict', async () => {
    const { stdout } = await run(tool('HELM_PATH'), ['lint', '--strict', CHART, '-f', EXAMPLE_VALUES, '--kube-version', KUBERNETES_VERSION]);
    expect(stdout).toContain('0 chart(s) failed');
  }, 60_000);

  it('renders manifests the Kubernetes API schemas accept, strictly (no unknown field)', async () => {
    const { text } = await render('-f', EXAMPLE_VALUES);
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'flagship-chart-')), 'rendered.yaml');
    fs.writeFileSync(file, text);
    // Exits non-zero naming the resource and field on any error.
    await run(tool('KUBERNETES_VALIDATE_PATH'), ['--strict', '--quiet', '-k', KUBERNETES_VERSION, file]);
    fs.writeFileSync(file, text.replace('revisionHistoryLimit: 5', 'revisionHistoryLimit: 5\n  replicaz: 2'));
    await expect(run(tool('KUBERNETES_VALIDATE_PATH'), ['--strict', '--quiet', '-k', KUBERNETES_VERSION, file])).rejects.toMatchObject({
      stdout: expect.stringContaining("'replicaz' was unexpected"),
    });
  }, 60_000);

  it('runs one Deployment per role, probed on the management listener, non-root with a read-only root filesystem', async () => {
    const { manifests } = await render('-f', EXAMPLE_VALUES);
    for (const role of ['control', 'data', 'ingest', 'worker']) {
      const deployment = named(manifests, 'Deployment', `rel-flagship-${role}`);
      const pod = deployment.spec.template.spec;
      const [container] = pod.containers;
      expect(container.env).toContainEqual({ name: 'ROLES', value: role });
      expect(container.ports).toContainEqual({ name: 'management', containerPort: 3003, protocol: 'TCP' });
      expect(container.startupProbe.httpGet).toEqual({ path: '/livez', port: 'management' });
      expect(container.livenessProbe.httpGet).toEqual({ path: '/livez', port: 'management' });
      expect(container.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'management' });
      expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 1000 });
      expect(container.securityContext).toMatchObject({ readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } });
      // The only writable path is an emptyDir at /tmp, where DATA_DIR points.
      expect(container.volumeMounts).toEqual([{ name: 'tmp', mountPath: '/tmp' }]);
      expect(pod.volumes[0]).toMatchObject({ name: 'tmp', emptyDir: {} });
      expect(container.envFrom).toEqual([{ configMapRef: { name: 'rel-flagship-env' } }, { secretRef: { name: 'rel-flagship-backends' } }]);
      expect(container.resources.requests.cpu).toBeTruthy();
      expect(deployment.spec.template.metadata.annotations['checksum/secret']).toMatch(/^[0-9a-f]{64}$/);
      named(manifests, 'PodDisruptionBudget', `rel-flagship-${role}`);
    }
    expect(named(manifests, 'ConfigMap', 'rel-flagship-env').data).toMatchObject({ NODE_ENV: 'production', HOST: '0.0.0.0', MANAGEMENT_PORT: '3003', DATA_DIR: '/tmp/flags-data' });
    // The data plane scales on CPU, so its Deployment leaves the replica count to the autoscaler.
    const hpa = named(manifests, 'HorizontalPodAutoscaler', 'rel-flagship-data');
    expect(hpa.spec.metrics).toEqual([{ type: 'Resource', resource: { name: 'cpu', target: { type: 'Utilization', averageUtilization: 65 } } }]);
    expect(named(manifests, 'Deployment', 'rel-flagship-data').spec.replicas).toBeUndefined();
    expect(named(manifests, 'Deployment', 'rel-flagship-control').spec.replicas).toBe(2);
  }, 60_000);

  it('has a Service per listener, the flagd ports as HTTP/2, and a headless one for the management ports', async () => {
    const { manifests } = await render('-f', EXAMPLE_VALUES);
    const data = named(manifests, 'Service', 'rel-flagship-data');
    expect(data.spec.ports).toEqual([
      expect.objectContaining({ name: 'http', port: 3001 }),
      expect.objectContaining({ name: 'flagd', port: 8013, appProtocol: 'kubernetes.io/h2c' }),
      expect.objectContaining({ name: 'flagd-sync', port: 8015, appProtocol: 'kubernetes.io/h2c' }),
    ]);
    expect(named(manifests, 'Service', 'rel-flagship-control').spec.ports).toEqual([expect.objectContaining({ port: 3000, targetPort: 'http' })]);
    expect(named(manifests, 'Service', 'rel-flagship-ingest').spec.ports).toEqual([expect.objectContaining({ port: 3002, targetPort: 'http' })]);
    const management = named(manifests, 'Service', 'rel-flagship-management');
    expect(management.spec.clusterIP).toBe('None');
    expect(management.spec.selector).not.toHaveProperty('app.kubernetes.io/component');
    const ingress = named(manifests, 'Ingress', 'rel-flagship');
    expect(ingress.spec.rules.map((r: { host: string }) => r.host)).toEqual(['flags.example.com', 'sdk.flags.example.com', 'ingest.flags.example.com']);
  }, 60_000);

  it('migrates in a pre-install and pre-upgrade hook that reads hook copies of the configuration', async () => {
    const { manifests } = await render('-f', EXAMPLE_VALUES);
    const job = named(manifests, 'Job', 'rel-flagship-migrate');
    expect(job.metadata.annotations).toMatchObject({ 'helm.sh/hook': 'pre-install,pre-upgrade', 'helm.sh/hook-weight': '0' });
    expect(job.spec.template.spec.containers[0].command).toEqual(['node', 'dist/scripts/migrate.js']);
    expect(job.spec.template.spec.containers[0].envFrom).toEqual([{ configMapRef: { name: 'rel-flagship-migration-env' } }, { secretRef: { name: 'rel-flagship-migration' } }]);
    for (const [kind, name] of [['ConfigMap', 'rel-flagship-migration-env'], ['Secret', 'rel-flagship-migration']]) {
      // Created before the Job (a lower weight): the release's own ConfigMap and Secret come after the hooks.
      expect(named(manifests, kind!, name!).metadata.annotations).toMatchObject({ 'helm.sh/hook': 'pre-install,pre-upgrade', 'helm.sh/hook-weight': '-5' });
    }
    expect(named(manifests, 'Secret', 'rel-flagship-migration').stringData).toEqual(named(manifests, 'Secret', 'rel-flagship-backends').stringData);
  }, 60_000);

  it('runs no backend of its own and refuses to render without them', async () => {
    const { manifests } = await render('-f', EXAMPLE_VALUES);
    expect(manifests.filter((m) => m.kind === 'StatefulSet' || m.kind === 'PersistentVolumeClaim')).toEqual([]);
    const images = manifests.flatMap((m) => (m.spec?.template?.spec?.containers ?? []).map((c: { image: string }) => c.image));
    expect(new Set(images)).toEqual(new Set(['ghcr.io/flagship/flagship:0.1.0']));
    await expect(render()).rejects.toMatchObject({ stderr: expect.stringContaining('backends.databaseUrl is required') });
    await expect(render('-f', EXAMPLE_VALUES, '--set', 'backends.temporalAddress=')).rejects.toMatchObject({ stderr: expect.stringContaining('backends.temporalAddress is required') });
  }, 60_000);

  it("uses the user's Secret when named, creating none", async () => {
    const { manifests } = await render('--set', 'backends.existingSecret=flags-backends', '--set', 'backends.temporalAddress=temporal:7233');
    expect(manifests.filter((m) => m.kind === 'Secret')).toEqual([]);
    expect(named(manifests, 'Deployment', 'rel-flagship-worker').spec.template.spec.containers[0].envFrom[1]).toEqual({ secretRef: { name: 'flags-backends' } });
    expect(named(manifests, 'Job', 'rel-flagship-migrate').spec.template.spec.containers[0].envFrom[1]).toEqual({ secretRef: { name: 'flags-backends' } });
  }, 60_000);

  it('turns each part off and on from values: flagd ports, autoscaling, cluster mode, a read replica', async () => {
    const { manifests } = await render(
      '-f',
      EXAMPLE_VALUES,
      ...['--set', 'flagd.enabled=false', '--set', 'roles.data.autoscaling.enabled=false', '--set', 'backends.clickhouseCluster=analytics'],
      ...['--set', 'backends.databaseReadUrl=postgres://replica:5432/flags'],
    );
    expect(named(manifests, 'Secret', 'rel-flagship-backends').stringData).toMatchObject({ DATABASE_READ_URL: 'postgres://replica:5432/flags' });
    expect(named(manifests, 'Secret', 'rel-flagship-migration').stringData).toHaveProperty('DATABASE_READ_URL');
    expect(named(manifests, 'Service', 'rel-flagship-data').spec.ports.map((p: { name: string }) => p.name)).toEqual(['http']);
    expect(manifests.filter((m) => m.kind === 'HorizontalPodAutoscaler')).toEqual([]);
    expect(named(manifests, 'Deployment', 'rel-flagship-data').spec.replicas).toBe(2);
    expect(named(manifests, 'ConfigMap', 'rel-flagship-env').data).toMatchObject({ FLAGD_ENABLED: 'false', CLICKHOUSE_CLUSTER: 'analytics' });
  }, 60_000);
});
