/**
 * The 64x64 grid of the public demo: an ARIA grid whose cells are real buttons ("Pixel 12, on"),
 * one tab stop (roving tabindex: the active cell has tabIndex 0, arrows move it). Rows and cells
 * are memoized and each cell reads only its own state from the GridStore, so an update re-renders
 * one button; clicks and keys are handled once, on the grid. Cell sizes come from the grid's
 * width alone, never from the data: live updates move nothing.
 */
import { memo, useCallback, useRef, useSyncExternalStore, type KeyboardEvent, type MouseEvent } from 'react';
import { CELL_ACTIVE, CELL_ON, CELL_PENDING, GRID_CELLS, GRID_SIDE, type GridStore } from './grid-store';

const ROWS = Array.from({ length: GRID_SIDE }, (_, row) => row);
const COLUMNS = Array.from({ length: GRID_SIDE }, (_, column) => column);

export interface PixelGridProps {
  store: GridStore;
  label: string;
  onToggle(index: number): void;
}

export function PixelGrid({ store, label, onToggle }: PixelGridProps) {
  const gridRef = useRef<HTMLDivElement>(null);

  const indexOf = (target: EventTarget): number | undefined => {
    const button = (target as HTMLElement).closest<HTMLElement>('button[data-index]');
    return button ? Number(button.dataset.index) : undefined;
  };

  const moveTo = (index: number) => {
    store.setActive(index);
    gridRef.current?.querySelector<HTMLButtonElement>(`button[data-index="${index}"]`)?.focus();
  };

  function onKeyDown(event: KeyboardEvent<HTMLDivElement>) {
    const index = indexOf(event.target);
    if (index === undefined) return;
    const next = keyTarget(event, index);
    if (next === undefined) return;
    event.preventDefault();
    if (next !== index) moveTo(next);
  }

  function onClick(event: MouseEvent<HTMLDivElement>) {
    const index = indexOf(event.target);
    if (index !== undefined) onToggle(index);
  }

  return (
    <div
      ref={gridRef}
      role="grid"
      aria-label={label}
      aria-rowcount={GRID_SIDE}
      aria-colcount={GRID_SIDE}
      className="demo-grid"
      onKeyDown={onKeyDown}
      onClick={onClick}
      // A click or a tab into the grid makes that cell the tab stop.
      onFocus={(event) => {
        const index = indexOf(event.target);
        if (index !== undefined) store.setActive(index);
      }}
    >
      {ROWS.map((row) => (
        <GridRow key={row} row={row} store={store} />
      ))}
    </div>
  );
}

/** Where an arrow, Home/End (row), Ctrl+Home/End (grid) or PageUp/PageDown (8 rows) moves the focus; undefined for other keys. */
function keyTarget(event: KeyboardEvent, index: number): number | undefined {
  const row = Math.floor(index / GRID_SIDE);
  const column = index % GRID_SIDE;
  switch (event.key) {
    case 'ArrowRight':
      return column < GRID_SIDE - 1 ? index + 1 : index;
    case 'ArrowLeft':
      return column > 0 ? index - 1 : index;
    case 'ArrowDown':
      return row < GRID_SIDE - 1 ? index + GRID_SIDE : index;
    case 'ArrowUp':
      return row > 0 ? index - GRID_SIDE : index;
    case 'PageDown':
      return Math.min(row + 8, GRID_SIDE - 1) * GRID_SIDE + column;
    case 'PageUp':
      return Math.max(row - 8, 0) * GRID_SIDE + column;
    case 'Home':
      return event.ctrlKey ? 0 : row * GRID_SIDE;
    case 'End':
      return event.ctrlKey ? GRID_CELLS - 1 : row * GRID_SIDE + GRID_SIDE - 1;
    default:
      return undefined;
  }
}

const GridRow = memo(function GridRow({ row, store }: { row: number; store: GridStore }) {
  return (
    <div role="row" aria-rowindex={row + 1} className="demo-row">
      {COLUMNS.map((column) => (
        <Cell key={column} index={row * GRID_SIDE + column} store={store} />
      ))}
    </div>
  );
});

const Cell = memo(function Cell({ index, store }: { index: number; store: GridStore }) {
  const subscribe = useCallback((listener: () => void) => store.subscribe(index, listener), [store, index]);
  const state = useSyncExternalStore(subscribe, () => store.snapshot(index));
  const on = (state & CELL_ON) !== 0;
  return (
    <div role="gridcell" className="demo-cell">
      <button
        type="button"
        data-index={index}
        tabIndex={state & CELL_ACTIVE ? 0 : -1}
        aria-label={`Pixel ${index}, ${on ? 'on' : 'off'}`}
        aria-busy={state & CELL_PENDING ? true : undefined}
        className={on ? 'on' : undefined}
      />
    </div>
  );
});
