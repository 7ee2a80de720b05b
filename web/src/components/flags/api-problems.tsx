import type { ApiError } from '../../api/client';

/** `body.candidateFlag.targeting.0.conditions.1` -> "Rule 1, condition 2". */
export function describePath(path: string): string {
  const parts = path.replace(/^body\./, '').replace(/^candidateFlag\./, '').split('.');
  const words: string[] = [];
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i];
    const index = Number(parts[i + 1]);
    const numbered = (noun: string) => {
      if (Number.isInteger(index)) {
        words.push(`${noun} ${index + 1}`);
        i++;
      } else words.push(noun);
    };
    if (part === 'targeting') numbered('Rule');
    else if (part === 'conditions') numbered('condition');
    else if (part === 'variants') numbered('Variant');
    else words.push(part === 'defaultValue' ? 'Default value' : part);
  }
  return words.join(', ');
}

/** An API error with every field problem it lists, each named the way the editor names it. */
export function ApiProblems({ error }: { error?: ApiError }) {
  return (
    <div role="alert" className={error ? 'form-error' : undefined}>
      {error && (
        <>
          <p>{error.message}</p>
          {error.details.length > 0 && (
            <ul>
              {error.details.map((d, i) => (
                <li key={i}>
                  {describePath(d.path)}: {d.message}
                </li>
              ))}
            </ul>
          )}
        </>
      )}
    </div>
  );
}
