import type { Environment } from '../../domain/environments';
import type { DerivedKey, EnvironmentSnapshot, SnapshotChange, SnapshotStore } from '../evaluation/snapshots';
import { toFlagdDocument } from './translate';

/**
 * Changes of flag sets, for the flagd streams (docs/local-evaluation.md#streams): the listeners
 * of a (service, environment) hear the keys that changed there, once per burst (the changes of
 * one bulk write or cohort change arrive together), and read the sync document, built once per
 * change and shared by every stream of that flag set.
 */

export type FlagSetListener = (changedKeys: readonly string[]) => void;

const SYNC_DOCUMENT: DerivedKey<string> = { description: 'flagd sync document (JSON)' };
const EMPTY_DOCUMENT = JSON.stringify(toFlagdDocument([], new Map()));

const setKey = (serviceId: string, environment: string) => `${serviceId}\u0000${environment}`;

export class FlagSetFeed {
  private readonly listeners = new Map<string, Set<FlagSetListener>>();
  private readonly pending = new Map<string, Set<string>>();
  private scheduled = false;

  constructor(private readonly snapshots: SnapshotStore) {
    snapshots.onChange((change) => this.onChange(change));
  }

  /** Hears the changes of one flag set until the returned function is called. */
  subscribe(serviceId: string, environment: Environment, listener: FlagSetListener): () => void {
    const key = setKey(serviceId, environment);
    let set = this.listeners.get(key);
    if (set === undefined) {
      set = new Set();
      this.listeners.set(key, set);
    }
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0 && this.listeners.get(key) === set) this.listeners.delete(key);
    };
  }

  /**
   * The flagd document of a flag set as JSON text: cached on the snapshot until its next change.
   * A service this replica does not know (deleted since) has no flags.
   */
  document(serviceId: string, environment: Environment): string {
    const env = this.snapshots.get(serviceId)?.environments[environment];
    return env === undefined ? EMPTY_DOCUMENT : env.derived(SYNC_DOCUMENT, buildDocument);
  }

  private onChange(change: SnapshotChange): void {
    const { serviceId, environment, flagKey } = change.event.data;
    const key = setKey(serviceId, environment);
    if (!this.listeners.has(key)) return;
    let keys = this.pending.get(key);
    if (keys === undefined) {
      keys = new Set();
      this.pending.set(key, keys);
    }
    keys.add(flagKey);
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => this.flush());
    }
  }

  private flush(): void {
    this.scheduled = false;
    const pending = [...this.pending];
    this.pending.clear();
    for (const [key, keys] of pending) {
      const changed = [...keys];
      for (const listener of this.listeners.get(key) ?? []) listener(changed);
    }
  }
}

function buildDocument(env: EnvironmentSnapshot): string {
  const flags = [...env.flags.values()].map((entry) => entry.record);
  return JSON.stringify(toFlagdDocument(flags, env.cohorts));
}
