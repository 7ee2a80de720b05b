import type { FieldChange } from './diff';
import { JsonValue } from './value';

const KIND_LABEL: Record<FieldChange['kind'], string> = { added: 'Added', removed: 'Removed', changed: 'Changed' };
/** A sign beside the word, so the kind reads without colour (and without the word, at a glance). */
const KIND_SIGN: Record<FieldChange['kind'], string> = { added: '+', removed: '−', changed: '~' };

/**
 * A field-level diff as a table: each row names the field, says in words whether it was added,
 * removed or changed, and shows the value before and after (colour only repeats what the words say).
 */
export function DiffView({ changes, caption }: { changes: FieldChange[]; caption: string }) {
  if (!changes.length) return <p className="muted">No field changed.</p>;
  return (
    <div className="table-scroll">
      <table className="diff">
        <caption>{caption}</caption>
        <thead>
          <tr>
            <th scope="col">Field</th>
            <th scope="col">Change</th>
            <th scope="col">Before</th>
            <th scope="col">After</th>
          </tr>
        </thead>
        <tbody>
          {changes.map((change) => (
            <tr key={change.path} className={`diff-${change.kind}`}>
              <th scope="row">
                <code>{change.path}</code>
              </th>
              <td>
                <span className="diff-kind">
                  <span aria-hidden="true">{KIND_SIGN[change.kind]} </span>
                  {KIND_LABEL[change.kind]}
                </span>
              </td>
              <td className="diff-before">
                <JsonValue value={change.before} />
              </td>
              <td className="diff-after">
                <JsonValue value={change.after} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
