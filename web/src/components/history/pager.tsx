/** Previous/next paging of an offset-paged list, with where the reader is ("21–40 of 57"). */
export function Pager({ label, offset, limit, shown, total, onOffset }: { label: string; offset: number; limit: number; shown: number; total: number; onOffset: (offset: number) => void }) {
  if (total <= limit && offset === 0) return null;
  return (
    <div role="navigation" className="pager" aria-label={label}>
      <button type="button" disabled={offset === 0} onClick={() => onOffset(Math.max(0, offset - limit))}>
        Previous page
      </button>
      <span>
        {shown ? `${offset + 1}–${offset + shown}` : 'None'} of {total}
      </span>
      <button type="button" disabled={offset + shown >= total} onClick={() => onOffset(offset + limit)}>
        Next page
      </button>
    </div>
  );
}
