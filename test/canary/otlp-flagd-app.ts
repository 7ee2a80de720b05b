import { SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { BatchSpanProcessor, NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { FlagdProvider } from '@openfeature/flagd-provider';
import { SpanEventHook } from '@openfeature/open-telemetry-hooks';
import { OpenFeature } from '@openfeature/server-sdk';

/**
 * An application that evaluates in-process and reports only through OpenTelemetry, as teams run
 * one (test/canary/otlp-e2e.test.ts runs it in its own process): the flagd provider in in-process
 * mode on our sync listener with a bound token as selector (docs/local-evaluation.md), OpenFeature's
 * span event hook, and the Node SDK exporting OTLP with a bound token (docs/opentelemetry.md):
 * protobuf, or JSON with OTLP_EXPORTER=http. Each user is one server request that evaluates FLAG_KEY; with
 * FAIL_EVERY=n every n-th user served `true` ends in error. Runs until SIGTERM, then flushes and
 * prints what it did as JSON.
 */
async function main() {
  const env = process.env;
  const flagKey = env.FLAG_KEY ?? '';
  const failEvery = Number(env.FAIL_EVERY ?? 0);
  let stopping = false;
  process.on('SIGTERM', () => (stopping = true));

  const Exporter = env.OTLP_EXPORTER === 'http' ? JsonExporter : ProtobufExporter;
  const exporter = new Exporter({ url: `${env.OTLP_URL}/v1/traces`, headers: { authorization: `Bearer ${env.TOKEN}` } });
  const exports = { ok: 0, failed: 0 };
  const provider = new NodeTracerProvider({
    spanProcessors: [
      new BatchSpanProcessor(
        {
          export: (spans, done) =>
            exporter.export(spans, (result) => {
              if (result.error) console.error(result.error);
              exports[result.code === 0 ? 'ok' : 'failed']++;
              done(result);
            }),
          shutdown: () => exporter.shutdown(),
        },
        // Gates read the warehouse every second of a short soak: export often.
        { scheduledDelayMillis: 200 },
      ),
    ],
  });
  provider.register();

  const flagd = new FlagdProvider({ resolverType: 'in-process', host: '127.0.0.1', port: Number(env.SYNC_PORT), selector: env.TOKEN, deadlineMs: 10_000 });
  await OpenFeature.setProviderAndWait(flagd);
  const client = OpenFeature.getClient();
  client.addHooks(new SpanEventHook());
  const tracer = trace.getTracer('checkout-app');

  const counts = { users: 0, treated: 0, failed: 0 };
  while (!stopping) {
    // A batch of requests, then a pause: a steady stream, not a flood.
    for (let i = 0; i < 20; i++) {
      const user = `${env.USER_PREFIX}-${counts.users++}`;
      await tracer.startActiveSpan('POST /checkout', { kind: SpanKind.SERVER }, async (span) => {
        if (await client.getBooleanValue(flagKey, false, { targetingKey: user })) {
          counts.treated++;
          if (failEvery > 0 && counts.treated % failEvery === 0) {
            counts.failed++;
            span.setStatus({ code: SpanStatusCode.ERROR, message: 'checkout failed' });
          }
        }
        span.end();
      });
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  await provider.forceFlush();
  await provider.shutdown();
  await OpenFeature.close();
  process.stdout.write(JSON.stringify({ ...counts, exports }));
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
