import fs from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Http2ServerRequest } from 'node:http2';
import { Code, ConnectError, createConnectRouter, type ConnectRouter } from '@connectrpc/connect';
import { compressionBrotli, compressionGzip, universalRequestFromNodeRequest, universalResponseToNodeResponse } from '@connectrpc/connect-node';
import type { Authenticator } from '../../auth/authenticator';
import type { Config } from '../../config';
import { clientIp } from '../../http/client-ip';
import { BODY_LIMITS } from '../../http/route';
import type { Logger } from '../../infra/logger';
import type { Check } from '../../lib/health/routes';
import { Service as EvaluationV1 } from '../../gen/flagd/evaluation/v1/evaluation_pb';
import { Service as EvaluationV2 } from '../../gen/flagd/evaluation/v2/evaluation_pb';
import { FlagSyncService } from '../../gen/flagd/sync/v1/sync_pb';
import { hideInternalErrors } from '../evaluation/connect-routes';
import type { EvaluationFeature } from '../evaluation/wiring';
import { FlagdCredentials } from './credentials';
import { FlagSetFeed } from './feed';
import { startFlagdListener, type FlagdHandler, type FlagdListener } from './listener';
import { connectionValues, flagdRpc } from './rpc';
import { FlagdStreams } from './streams';
import { unaryGrpc } from './unary';

/** Requests are a flag key and a context: the evaluation body limit (docs/limits.md), on connect-node and the lean gRPC path alike. */
const READ_MAX_BYTES = BODY_LIMITS.evaluation;

export interface FlagdListeners {
  /** FLAGD_PORT: flagd.evaluation v1 and v2. */
  evaluationUrl: string;
  /** FLAGD_SYNC_PORT: flagd.sync.v1. */
  syncUrl: string;
  close(graceMs: number): Promise<void>;
}

export interface FlagdFeature {
  streams: FlagdStreams;
  /** /api/health/evaluation's `flagdStreams`: open SyncFlags and EventStream streams. */
  check(): Check;
  /** Opens FLAGD_PORT and FLAGD_SYNC_PORT. */
  listen(): Promise<FlagdListeners>;
  /** Ends every open flagd stream (UNAVAILABLE): run before the listeners close. */
  drain(): Promise<void>;
}

/**
 * flagd's own protocols on the data plane (docs/local-evaluation.md), so the published
 * OpenFeature flagd providers evaluate our flags in RPC mode (FLAGD_PORT) and in-process
 * (FLAGD_SYNC_PORT), with a bound project API token as the selector.
 */
export function createFlagdFeature(deps: { config: Config; logger: Logger; authenticator: Authenticator; evaluation: EvaluationFeature }): FlagdFeature {
  const { config, logger } = deps;
  const credentials = new FlagdCredentials({ authenticator: deps.authenticator, evaluation: deps.evaluation.evaluation });
  const streams = new FlagdStreams({ credentials, recheckMs: config.FLAGD_CREDENTIAL_RECHECK_MS, logger });
  const rpc = flagdRpc({
    credentials,
    evaluation: deps.evaluation.evaluation,
    feed: new FlagSetFeed(deps.evaluation.snapshots),
    streams,
    limiter: deps.evaluation.limiter,
    streamLimits: deps.evaluation.streamLimits,
    limits: { perIp: config.RATE_LIMIT_PER_IP, perToken: config.RATE_LIMIT_PER_TOKEN },
    keepAliveMs: config.STREAM_HEARTBEAT_MS,
    logger,
  });
  const tls = config.FLAGD_TLS_CERT && config.FLAGD_TLS_KEY ? { cert: fs.readFileSync(config.FLAGD_TLS_CERT, 'utf8'), key: fs.readFileSync(config.FLAGD_TLS_KEY, 'utf8') } : undefined;

  const adapter = (routes: (router: ConnectRouter) => void) => nodeHandler(routes, config.TRUST_PROXY, logger);

  const listenerOptions = { host: config.HOST, tls, maxConnections: config.HTTP_MAX_CONNECTIONS, headersTimeoutMs: config.HTTP_HEADERS_TIMEOUT_MS, logger };
  return {
    streams,
    check: () => ({ working: !streams.isClosed, testTime: 0, open: streams.size }) as Check,
    async listen() {
      streams.start();
      const opened: FlagdListener[] = [];
      try {
        opened.push(
          await startFlagdListener(
            adapter((router) => {
              router.service(EvaluationV1, rpc.evaluation);
              router.service(EvaluationV2, rpc.evaluation);
            }),
            {
              ...listenerOptions,
              name: 'flagd',
              port: config.FLAGD_PORT,
              streams: unaryGrpc([EvaluationV1, EvaluationV2], { resolve: rpc.resolve, readMaxBytes: READ_MAX_BYTES, trustProxy: config.TRUST_PROXY, logger }),
            },
          ),
        );
        opened.push(await startFlagdListener(adapter((router) => router.service(FlagSyncService, rpc.sync)), { ...listenerOptions, name: 'flagd-sync', port: config.FLAGD_SYNC_PORT }));
      } catch (error) {
        await Promise.all(opened.map((l) => l.close(0)));
        throw error;
      }
      const [evaluation, sync] = opened;
      return {
        evaluationUrl: evaluation.url,
        syncUrl: sync.url,
        close: async (graceMs) => {
          await Promise.all(opened.map((l) => l.close(graceMs)));
        },
      };
    },
    async drain() {
      streams.drain();
    },
  };
}

/**
 * A node handler for the services `routes` registers (what connectNodeAdapter does), with the
 * caller's connection in each call's context and failures reported through our logger; a
 * client that went away mid-stream is not a failure.
 */
function nodeHandler(routes: (router: ConnectRouter) => void, trustProxy: number, logger: Logger): FlagdHandler {
  const router = createConnectRouter({
    readMaxBytes: READ_MAX_BYTES,
    acceptCompression: [compressionGzip, compressionBrotli],
    interceptors: [hideInternalErrors(logger)],
  });
  routes(router);
  const handlers = new Map(router.handlers.map((h) => [h.requestPath, h]));
  return (req, res) => {
    const handler = handlers.get(req.url?.split('?', 1)[0] ?? '');
    if (handler === undefined) {
      res.writeHead(404);
      res.end();
      return;
    }
    const http2 = 'stream' in req ? (req as Http2ServerRequest) : undefined;
    const values = connectionValues({ ip: clientIp(req as IncomingMessage, trustProxy), session: http2?.stream.session });
    const gone = () => (http2 ? http2.stream.destroyed : (res as ServerResponse).destroyed);
    handler(universalRequestFromNodeRequest(req, res, undefined, values))
      .then((response) => universalResponseToNodeResponse(response, res))
      .catch((reason) => {
        if (gone() || ConnectError.from(reason).code === Code.Aborted) return;
        logger.error({ err: reason, rpc: handler.method.name }, 'flagd rpc failed');
      });
  };
}
