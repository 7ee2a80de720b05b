/**
 * The state of the demo grid's 4,096 cells, outside React: each cell subscribes to its own index,
 * so a change to one pixel re-renders one button, not the grid (useSyncExternalStore per cell).
 * A cell's snapshot is a small number of bit flags, so React compares it by value.
 */
export const GRID_SIDE = 64;
export const GRID_CELLS = GRID_SIDE * GRID_SIDE;

export const CELL_ON = 1;
/** The cell's toggle was sent and the server has not answered yet (drawn differently). */
export const CELL_PENDING = 2;
/** The grid's one tab stop (roving tabindex). */
export const CELL_ACTIVE = 4;

type Listener = () => void;

export class GridStore {
  /** What the cell shows (the server's state, or the visitor's toggle while it is on its way). */
  private readonly on = new Uint8Array(GRID_CELLS);
  /** The server's last known state of the cell: what a refused toggle goes back to. */
  private readonly server = new Uint8Array(GRID_CELLS);
  private readonly pending = new Uint8Array(GRID_CELLS);
  /** The flag version each cell's state came from: an older answer (a list read before a stream message) never overwrites a newer one. */
  private readonly versions = new Float64Array(GRID_CELLS);
  private readonly listeners: (Set<Listener> | undefined)[] = new Array(GRID_CELLS);
  private active = 0;
  private loaded = false;
  private readonly loadedListeners = new Set<Listener>();

  snapshot(index: number): number {
    return (this.on[index] ? CELL_ON : 0) | (this.pending[index] ? CELL_PENDING : 0) | (index === this.active ? CELL_ACTIVE : 0);
  }

  isOn(index: number): boolean {
    return this.on[index] === 1;
  }

  get activeIndex(): number {
    return this.active;
  }

  get isLoaded(): boolean {
    return this.loaded;
  }

  subscribe(index: number, listener: Listener): () => void {
    const set = (this.listeners[index] ??= new Set());
    set.add(listener);
    return () => set.delete(listener);
  }

  subscribeLoaded(listener: Listener): () => void {
    this.loadedListeners.add(listener);
    return () => this.loadedListeners.delete(listener);
  }

  /**
   * The server's state of a cell (a list row or a stream message). Without a version (a flag
   * deleted) it always applies; with one, only when it is not older than what the cell shows.
   */
  applyServer(index: number, enabled: boolean, version?: number): void {
    if (version !== undefined) {
      if (version < this.versions[index]) return;
      this.versions[index] = version;
    }
    this.server[index] = enabled ? 1 : 0;
    this.set(index, enabled);
  }

  /** The whole grid from a list answer; only cells whose state changes are told. */
  applyList(rows: readonly { index: number; enabled: boolean; version?: number }[]): void {
    for (const row of rows) this.applyServer(row.index, row.enabled, row.version);
    if (!this.loaded) {
      this.loaded = true;
      for (const listener of this.loadedListeners) listener();
    }
  }

  /** The visitor's own toggle, shown at once; `settle` ends the pending state. */
  setOptimistic(index: number, enabled: boolean): void {
    this.pending[index] = 1;
    this.on[index] = enabled ? 1 : 0;
    this.notify(index);
  }

  /** The write was answered; a refused one shows the server's state again. */
  settle(index: number, accepted: boolean): void {
    this.pending[index] = 0;
    if (!accepted) this.on[index] = this.server[index];
    this.notify(index);
  }

  setActive(index: number): void {
    if (index === this.active) return;
    const previous = this.active;
    this.active = index;
    this.notify(previous);
    this.notify(index);
  }

  private set(index: number, enabled: boolean): void {
    const value = enabled ? 1 : 0;
    if (this.on[index] === value) return;
    this.on[index] = value;
    this.notify(index);
  }

  private notify(index: number): void {
    const set = this.listeners[index];
    if (set) for (const listener of set) listener();
  }
}

/** `px-12` -> 12; anything else (not a grid cell) -> undefined. */
export function cellIndexOf(key: string | undefined): number | undefined {
  const match = key ? /^px-(\d{1,4})$/.exec(key) : null;
  if (!match) return undefined;
  const index = Number(match[1]);
  return index < GRID_CELLS ? index : undefined;
}
