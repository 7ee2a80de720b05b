import fs from 'node:fs';
import type { Server } from 'node:http';
import type { WorkflowClientInterceptor } from '@temporalio/client';
import type { SpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { Resource } from '@opentelemetry/resources';
import type { Config } from '../config';
import type { Logger } from './logger';
import { projectPath } from './paths';

/**
 * Tracing as the rest of the process sees it (docs/operations.md#tracing). Only types are
 * imported here: the OpenTelemetry SDK itself (tracing-sdk.ts) is loaded by startTracing, and
 * only when an OTLP endpoint is configured, so a process without one pays nothing.
 */
export interface Tracing {
  /** Carry the caller's trace into the workflows this process starts, signals or updates. */
  temporalClientInterceptors: WorkflowClientInterceptor[];
  /** Where the worker hands the spans workflows make inside their sandbox. */
  workflowSpanProcessor: SpanProcessor;
  resource: Resource;
  /**
   * Requests the sampler will not trace reach this server's listener without passing through the
   * http instrumentation, which would otherwise enter a context and bind the request's and the
   * response's events for each of them (docs/operations.md#cost).
   */
  skipUntracedRequests(server: Server): void;
  /** Exports what is buffered, then stops. */
  shutdown(): Promise<void>;
}

/**
 * Starts the SDK and registers its instrumentations. Must run before the instrumented modules
 * (http, express, ioredis, undici, postgres) are loaded: api/main.ts calls it first and loads the
 * server afterwards.
 */
export async function startTracing(config: Config, logger: Logger): Promise<Tracing | undefined> {
  if (!config.tracesUrl) return undefined;
  const { startTracingSdk } = await import('./tracing-sdk.js');
  const tracing = startTracingSdk(config);
  logger.info({ traces: config.tracesUrl, sampler: config.OTEL_TRACES_SAMPLER, ratio: config.OTEL_TRACES_SAMPLER_ARG }, 'tracing on');
  return tracing;
}

/** Temporal's OpenTelemetry workflow interceptors, compiled into the workflow sandbox when tracing is on. */
export const WORKFLOW_TRACING_MODULE = require.resolve('@temporalio/interceptors-opentelemetry/lib/workflow-interceptors');

/** Where `npm run build` writes the worker's workflow bundle: the traced one carries WORKFLOW_TRACING_MODULE. */
export function workflowBundlePath(traced: boolean): string {
  return projectPath('dist', traced ? 'workflow-bundle-traced.js' : 'workflow-bundle.js');
}

/**
 * The built bundle when there is one: the worker loads it instead of bundling at start, which
 * takes seconds and leaves webpack's modules on the heap.
 */
export function builtWorkflowBundle(traced: boolean): string | undefined {
  const bundle = workflowBundlePath(traced);
  return fs.existsSync(bundle) ? bundle : undefined;
}
