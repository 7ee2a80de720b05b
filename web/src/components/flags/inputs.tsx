/** The flag-value input typed by the flag's type (a true/false choice, a number, text, or JSON). */
import type { FlagType } from './model';

interface ValueInputProps {
  type: FlagType;
  value: string;
  onChange: (text: string) => void;
  id?: string;
  name?: string;
  'aria-invalid'?: true;
  'aria-describedby'?: string;
  'aria-label'?: string;
}

/** A flag value typed by the flag's type; the text is read with parseValue. */
export function ValueInput({ type, value, onChange, ...rest }: ValueInputProps) {
  switch (type) {
    case 'boolean':
      return (
        <select value={value} onChange={(e) => onChange(e.target.value)} {...rest}>
          <option value="true">true</option>
          <option value="false">false</option>
        </select>
      );
    case 'number':
      return <input type="number" step="any" inputMode="decimal" value={value} onChange={(e) => onChange(e.target.value)} {...rest} />;
    case 'string':
      return <input value={value} onChange={(e) => onChange(e.target.value)} {...rest} />;
    case 'object':
      return <textarea rows={4} spellCheck={false} className="fl-mono" value={value} onChange={(e) => onChange(e.target.value)} {...rest} />;
  }
}
