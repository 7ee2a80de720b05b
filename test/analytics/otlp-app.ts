import { SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { OTLPTraceExporter as OtlpHttpJsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as OtlpProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { CompressionAlgorithm } from '@opentelemetry/otlp-exporter-base';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace-base';
import { BatchSpanProcessor, NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { SpanEventHook } from '@openfeature/open-telemetry-hooks';
import { InMemoryProvider, OpenFeature } from '@openfeature/server-sdk';

/**
 * An application instrumented as teams do (test/analytics/ingest-otlp.test.ts runs it in its own
 * process): the OpenTelemetry Node SDK, an OTLP exporter (OTLP_PROTOCOL json with gzip, or proto),
 * and OpenFeature's span event hook. Each user is one server request that evaluates FLAG_KEY; the
 * requests of FAILING users end in error. Prints the exporter's result codes as JSON.
 */
async function main() {
  const env = process.env;
  const users = (env.USERS ?? '').split(',').filter(Boolean);
  const failing = new Set((env.FAILING ?? '').split(',').filter(Boolean));
  const headers = { authorization: `Bearer ${env.OTLP_TOKEN}`, 'x-service-id': env.SERVICE_ID ?? '', 'x-environment': env.ENVIRONMENT ?? '' };
  const url = `${env.OTLP_URL}/v1/traces`;
  const exporter: SpanExporter =
    env.OTLP_PROTOCOL === 'json' ? new OtlpHttpJsonExporter({ url, headers, compression: CompressionAlgorithm.GZIP }) : new OtlpProtoExporter({ url, headers });
  const results: number[] = [];
  const recording: SpanExporter = {
    export: (spans: ReadableSpan[], done) =>
      exporter.export(spans, (result) => {
        results.push(result.code);
        if (result.error) console.error(result.error);
        done(result);
      }),
    shutdown: () => exporter.shutdown(),
  };
  const provider = new NodeTracerProvider({ spanProcessors: [new BatchSpanProcessor(recording)] });
  provider.register();
  const flagKey = env.FLAG_KEY ?? '';
  await OpenFeature.setProviderAndWait(new InMemoryProvider({ [flagKey]: { variants: { on: true, off: false }, defaultVariant: 'on', disabled: false } }));
  const client = OpenFeature.getClient();
  client.addHooks(new SpanEventHook());
  const tracer = trace.getTracer('checkout-app');
  for (const user of users) {
    await tracer.startActiveSpan('POST /checkout', { kind: SpanKind.SERVER }, async (span) => {
      await client.getBooleanValue(flagKey, false, { targetingKey: user });
      if (failing.has(user)) span.setStatus({ code: SpanStatusCode.ERROR, message: 'checkout failed' });
      span.end();
    });
  }
  await provider.forceFlush();
  await provider.shutdown();
  process.stdout.write(JSON.stringify({ results }));
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
