import type { paths } from '../../api/client';

export type ActorDisplay = paths['/api/audit']['get']['responses'][200]['content']['application/json']['logs'][number]['actorDisplay'];

/**
 * Who made a change, by name (the API's actorDisplay, docs/api-reference.md#audit-log); the
 * recorded actor and ids stay available in the tooltip.
 */
export function ActorName({ display, recorded }: { display: ActorDisplay; recorded: string }) {
  const details = [...new Set([display.email, display.id, recorded].filter(Boolean))].join(' · ');
  return (
    <span className="actor" title={details}>
      {display.name}
      {display.kind === 'user' && display.email && <span className="muted actor-email"> {display.email}</span>}
    </span>
  );
}

/** An entry's stated reason (metadata.reason, e.g. given with a toggle), when there is one. */
export function reasonOf(metadata: Record<string, unknown> | undefined): string | undefined {
  const reason = metadata?.reason;
  return typeof reason === 'string' && reason.trim() ? reason : undefined;
}
