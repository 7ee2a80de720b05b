/** Where sign-in (or a signed-in visit to a signed-out page) goes: `next` when it is a console path. */
export function nextTarget(search: string): string {
  const next = new URLSearchParams(search).get('next');
  // Only paths of this origin: `//evil.example` and absolute URLs would leave the console.
  return next && next.startsWith('/') && !next.startsWith('//') && !next.startsWith('/\\') ? next : '/projects';
}
