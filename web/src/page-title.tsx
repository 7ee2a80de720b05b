/**
 * The document title: the shell's Screen sets it from the routes table ("Flag · Flagship"); a
 * page that knows more (which flag) refines it with useTitle("new-checkout · Flag"). The refined
 * title is Screen's state, not a second write to document.title, so the order in which the page's
 * and the shell's effects run cannot let the general title win.
 */
import { createContext, useContext, useEffect } from 'react';

export const TitleContext = createContext<(title: string | undefined) => void>(() => undefined);

/** The page's own title while it is shown (undefined: the route's); the shell adds " · Flagship". */
export function useTitle(title: string | undefined): void {
  const refine = useContext(TitleContext);
  useEffect(() => {
    refine(title);
    return () => refine(undefined);
  }, [refine, title]);
}

export const documentTitle = (title: string) => `${title} · Flagship`;
