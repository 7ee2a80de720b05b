/**
 * Who may use the release controls, ahead of the click. Only a hint: the API decides (canary
 * routes need flags:write, the project's guardrail settings settings:manage).
 */
import type { useProjectAccess } from '../settings/access';

type ProjectAccess = ReturnType<typeof useProjectAccess>;

/** Only viewers lack flags:write, so the reason names them. */
export const CANARY_REFUSED = 'Viewers cannot start, advance or abort canaries: that needs the member, admin or owner role in this project.';
export const GUARDRAIL_SETTINGS_REFUSED = 'Changing the guardrail settings needs the owner or admin role in this project.';

/** Why the signed-in user may not start or steer a canary in this project, or undefined when they may. */
export const canaryRefusal = (access: ProjectAccess) => (access.can('flags:write') ? undefined : CANARY_REFUSED);

/** Why the signed-in user may not change the project's guardrail settings, or undefined when they may. */
export const guardrailSettingsRefusal = (access: ProjectAccess) => (access.can('settings:manage') ? undefined : GUARDRAIL_SETTINGS_REFUSED);
