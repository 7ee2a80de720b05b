/**
 * OpenFeature set-up code for one service: the OFREP providers (remote evaluation on the data plane)
 * and the flagd providers (in-process from the sync port, or RPC), configured as
 * docs/local-evaluation.md describes. A bound token names the service and environment, so the
 * snippets pass nothing else.
 */

export type Language = 'node' | 'python' | 'go' | 'java' | 'browser';

export const LANGUAGES: { id: Language; label: string }[] = [
  { id: 'node', label: 'Node' },
  { id: 'python', label: 'Python' },
  { id: 'go', label: 'Go' },
  { id: 'java', label: 'Java' },
  { id: 'browser', label: 'Browser' },
];

export type FlagType = 'boolean' | 'string' | 'number' | 'object';

export interface SnippetValues {
  ofrepBaseUrl: string;
  flagd: { host: string; evaluationPort: number; syncPort: number; tls: boolean } | null;
  /** The bound token, or a placeholder until one is created on the page. */
  token: string;
  flagKey: string;
  flagType: FlagType;
}

export interface Snippet {
  /** The package(s) to install, as the language's package manager names them. */
  install: string;
  code: string;
}

/** A string literal: double-quoted (Python, Go, Java), single-quoted in JavaScript, as its style guides write them. */
const q = JSON.stringify;
const js = (value: string) => `'${value.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;

/** The typed getter and a default of the flag's type, per language. */
function evaluation(language: Language, { flagKey, flagType }: SnippetValues): string {
  const key = q(flagKey);
  const [jsGetter, jsFallback] = { boolean: ['getBooleanValue', 'false'], string: ['getStringValue', "''"], number: ['getNumberValue', '0'], object: ['getObjectValue', '{}'] }[flagType];
  switch (language) {
    case 'node':
      return `const value = await OpenFeature.getClient().${jsGetter}(${js(flagKey)}, ${jsFallback}, { targetingKey: 'user-123' });`;
    case 'browser':
      return `await OpenFeature.setContext({ targetingKey: 'user-123' });\nconst value = OpenFeature.getClient().${jsGetter}(${js(flagKey)}, ${jsFallback});`;
    case 'python': {
      const [getter, fallback] = { boolean: ['get_boolean_value', 'False'], string: ['get_string_value', '""'], number: ['get_float_value', '0.0'], object: ['get_object_value', '{}'] }[flagType];
      return `value = api.get_client().${getter}(${key}, ${fallback}, EvaluationContext(targeting_key="user-123"))`;
    }
    case 'go': {
      const [getter, fallback] = { boolean: ['BooleanValue', 'false'], string: ['StringValue', '""'], number: ['FloatValue', '0'], object: ['ObjectValue', 'map[string]any{}'] }[flagType];
      return `value, err := openfeature.NewClient("my-app").${getter}(context.Background(), ${key}, ${fallback}, openfeature.NewEvaluationContext("user-123", nil))`;
    }
    case 'java': {
      const [getter, fallback] = { boolean: ['getBooleanValue', 'false'], string: ['getStringValue', '""'], number: ['getDoubleValue', '0.0'], object: ['getObjectValue', 'new Value()'] }[flagType];
      return `var value = OpenFeatureAPI.getInstance().getClient().${getter}(${key}, ${fallback}, new MutableContext("user-123"));`;
    }
  }
}

export function ofrepSnippet(language: Language, values: SnippetValues): Snippet {
  const base = q(values.ofrepBaseUrl);
  const bearer = q(`Bearer ${values.token}`);
  const evaluate = evaluation(language, values);
  switch (language) {
    case 'node':
      return {
        install: 'npm install @openfeature/server-sdk @openfeature/ofrep-provider',
        code: `import { OpenFeature } from '@openfeature/server-sdk';
import { OFREPProvider } from '@openfeature/ofrep-provider';

await OpenFeature.setProviderAndWait(
  new OFREPProvider({
    baseUrl: ${js(values.ofrepBaseUrl)},
    headers: [['Authorization', ${js(`Bearer ${values.token}`)}]],
  }),
);
${evaluate}`,
      };
    case 'browser':
      return {
        install: 'npm install @openfeature/web-sdk @openfeature/ofrep-web-provider',
        code: `import { OpenFeature } from '@openfeature/web-sdk';
import { OFREPWebProvider } from '@openfeature/ofrep-web-provider';

// A browser token is public: give it read only (this page's tokens are).
await OpenFeature.setProviderAndWait(
  new OFREPWebProvider({
    baseUrl: ${js(values.ofrepBaseUrl)},
    headers: [['Authorization', ${js(`Bearer ${values.token}`)}]],
    pollInterval: 30000,
  }),
);
${evaluate}`,
      };
    case 'python':
      return {
        install: 'pip install openfeature-sdk openfeature-provider-ofrep',
        code: `from openfeature import api
from openfeature.evaluation_context import EvaluationContext
from openfeature.contrib.provider.ofrep import OFREPProvider

api.set_provider(OFREPProvider(
    base_url=${base},
    headers_factory=lambda: {"Authorization": ${bearer}},
))
${evaluate}`,
      };
    case 'go':
      return {
        install: 'go get github.com/open-feature/go-sdk github.com/open-feature/go-sdk-contrib/providers/ofrep',
        code: `import (
	"context"

	"github.com/open-feature/go-sdk-contrib/providers/ofrep"
	"github.com/open-feature/go-sdk/openfeature"
)

provider := ofrep.NewProvider(${base}, ofrep.WithBearerToken(${q(values.token)}))
openfeature.SetProviderAndWait(provider)
${evaluate}`,
      };
    case 'java':
      return {
        install: 'dev.openfeature:sdk, dev.openfeature.contrib.providers:ofrep',
        code: `import com.google.common.collect.ImmutableList;
import com.google.common.collect.ImmutableMap;
import dev.openfeature.contrib.providers.ofrep.OfrepProvider;
import dev.openfeature.contrib.providers.ofrep.OfrepProviderOptions;
import dev.openfeature.sdk.*;

OfrepProviderOptions options = OfrepProviderOptions.builder()
    .baseUrl(${base})
    .headers(ImmutableMap.of("Authorization", ImmutableList.of(${bearer})))
    .build();
OpenFeatureAPI.getInstance().setProviderAndWait(OfrepProvider.constructProvider(options));
${evaluate}`,
      };
  }
}

/** null for the browser: the flagd providers are server-side (gRPC). */
export function flagdSnippet(language: Language, values: SnippetValues): Snippet | null {
  const flagd = values.flagd;
  if (!flagd || language === 'browser') return null;
  const host = q(flagd.host);
  const token = q(values.token);
  const evaluate = evaluation(language, values);
  switch (language) {
    case 'node':
      return {
        install: 'npm install @openfeature/server-sdk @openfeature/flagd-provider',
        code: `import { OpenFeature } from '@openfeature/server-sdk';
import { FlagdProvider } from '@openfeature/flagd-provider';

// In-process: evaluates locally from the streamed flag set. RPC: resolverType: 'rpc', port: ${flagd.evaluationPort}.
await OpenFeature.setProviderAndWait(
  new FlagdProvider({
    resolverType: 'in-process',
    host: ${js(flagd.host)},
    port: ${flagd.syncPort},
    tls: ${flagd.tls},
    selector: ${js(values.token)},
  }),
);
${evaluate}`,
      };
    case 'python':
      return {
        install: 'pip install openfeature-sdk "openfeature-provider-flagd<0.6"',
        code: `from openfeature import api
from openfeature.evaluation_context import EvaluationContext
from openfeature.contrib.provider.flagd import FlagdProvider
from openfeature.contrib.provider.flagd.config import ResolverType

# In-process; for RPC: resolver_type=ResolverType.RPC, port=${flagd.evaluationPort}.
api.set_provider(FlagdProvider(
    resolver_type=ResolverType.IN_PROCESS,
    host=${host},
    port=${flagd.syncPort},
    tls=${flagd.tls ? 'True' : 'False'},
    selector=${token},
))
${evaluate}`,
      };
    case 'go':
      return {
        install: 'go get github.com/open-feature/go-sdk github.com/open-feature/go-sdk-contrib/providers/flagd',
        code: `import (
	"context"

	flagd "github.com/open-feature/go-sdk-contrib/providers/flagd/pkg"
	"github.com/open-feature/go-sdk/openfeature"
)

// In-process; for RPC: flagd.WithRPCResolver() and flagd.WithPort(${flagd.evaluationPort}).
provider, err := flagd.NewProvider(
	flagd.WithInProcessResolver(),
	flagd.WithHost(${host}),
	flagd.WithPort(${flagd.syncPort}),
	flagd.WithSelector(${token}),${flagd.tls ? '\n\tflagd.WithTLS(""),' : ''}
)
openfeature.SetProviderAndWait(provider)
${evaluate}`,
      };
    case 'java':
      return {
        install: 'dev.openfeature:sdk, dev.openfeature.contrib.providers:flagd',
        code: `import dev.openfeature.contrib.providers.flagd.Config;
import dev.openfeature.contrib.providers.flagd.FlagdOptions;
import dev.openfeature.contrib.providers.flagd.FlagdProvider;
import dev.openfeature.sdk.*;

// In-process; for RPC: Config.Resolver.RPC and .port(${flagd.evaluationPort}).
FlagdProvider provider = new FlagdProvider(FlagdOptions.builder()
    .resolverType(Config.Resolver.IN_PROCESS)
    .host(${host}).port(${flagd.syncPort}).tls(${flagd.tls})
    .selector(${token})
    .build());
OpenFeatureAPI.getInstance().setProviderAndWait(provider);
${evaluate}`,
      };
  }
}
