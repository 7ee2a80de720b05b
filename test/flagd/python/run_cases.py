"""Evaluates cases with the published Python flagd provider in in-process mode.

    python run_cases.py --host 127.0.0.1 --port 8015 [--timeout-ms 15000] < cases.json

Standard input: a JSON array of cases, each {"selector", "flagKey", "type" (boolean, string,
number or object), "defaultValue", "context"}. One provider is connected per distinct selector
(its flag set streamed over flagd.sync.v1, evaluated locally), and each case is evaluated by
the provider of its selector. Standard output: a JSON array, one result per case in order:
{"value", "variant", "reason", "errorCode"}. Exits 2 when a provider is not ready in time.
"""

import argparse
import json
import sys
import time

from openfeature import api
from openfeature.contrib.provider.flagd import FlagdProvider
from openfeature.contrib.provider.flagd.config import ResolverType
from openfeature.evaluation_context import EvaluationContext
from openfeature.provider import ProviderStatus


def connect(host, port, selector, timeout_ms):
    provider = FlagdProvider(
        resolver_type=ResolverType.IN_PROCESS,
        host=host,
        port=port,
        selector=selector or None,
        tls=False,
        deadline_ms=timeout_ms,
        # A refused attempt is retried after this long, not the default 5 s.
        retry_backoff_max_ms=500,
    )
    api.set_provider_and_wait(provider, domain=selector or None)
    client = api.get_client(domain=selector or None)
    deadline = time.monotonic() + timeout_ms / 1000
    while client.get_provider_status() != ProviderStatus.READY:
        if time.monotonic() > deadline:
            sys.stderr.write(f"provider for selector {selector[:12]}... not ready: {client.get_provider_status()}\n")
            sys.exit(2)
        time.sleep(0.05)
    return client


def evaluate(client, case):
    raw = case.get("context") or {}
    attributes = {k: v for k, v in raw.items() if k != "targetingKey"}
    context = EvaluationContext(targeting_key=raw.get("targetingKey"), attributes=attributes)
    key, default, kind = case["flagKey"], case["defaultValue"], case["type"]
    if kind == "boolean":
        details = client.get_boolean_details(key, default, context)
    elif kind == "string":
        details = client.get_string_details(key, default, context)
    elif kind == "number":
        details = client.get_float_details(key, float(default), context)
    else:
        details = client.get_object_details(key, default, context)
    return {
        "value": details.value,
        "variant": details.variant,
        "reason": str(details.reason.value if hasattr(details.reason, "value") else details.reason),
        "errorCode": details.error_code.value if details.error_code else None,
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--timeout-ms", type=int, default=15000)
    args = parser.parse_args()
    cases = json.load(sys.stdin)
    clients = {}
    for case in cases:
        selector = case.get("selector", "")
        if selector not in clients:
            clients[selector] = connect(args.host, args.port, selector, args.timeout_ms)
    results = [evaluate(clients[case.get("selector", "")], case) for case in cases]
    json.dump(results, sys.stdout)
    api.shutdown()


if __name__ == "__main__":
    main()
