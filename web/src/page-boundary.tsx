/**
 * Pages load on demand (web/README.md), so a page can fail to arrive: its hashed file is gone
 * after an upgrade, or the connection dropped. PageBoundary keeps that failure (or a page that
 * throws while rendering) inside the page's area: the header and navigation stay usable, and the
 * page says so with a Retry that loads it again and a reload of the whole console as the fallback.
 */
import { Component, lazy, type ComponentType, type ReactNode } from 'react';

/** A page loaded on demand that can be asked to load again. */
export interface RetryablePage {
  (): ReactNode;
  /** The next render imports the page again. */
  retry(): void;
}

/**
 * React.lazy keeps a failed import's error for good, so retrying needs a new lazy component:
 * this one is replaced by retry() (for every later visit too, not only the screen that failed).
 */
export function lazyPage(load: () => Promise<{ default: ComponentType }>): RetryablePage {
  let Lazy = lazy(load);
  return Object.assign(() => <Lazy />, {
    retry() {
      Lazy = lazy(load);
    },
  });
}

interface PageBoundaryProps {
  page: RetryablePage;
  /** The address: another one (a link followed) tries the page again. */
  at: string;
  children: ReactNode;
}

export class PageBoundary extends Component<PageBoundaryProps, { failed: boolean; at: string }> {
  override state = { failed: false, at: this.props.at };

  static getDerivedStateFromError() {
    return { failed: true };
  }

  static getDerivedStateFromProps(props: PageBoundaryProps, state: { failed: boolean; at: string }) {
    return props.at === state.at ? null : { failed: false, at: props.at };
  }

  retry = () => {
    this.props.page.retry();
    this.setState({ failed: false });
  };

  override render() {
    if (!this.state.failed) return this.props.children;
    return (
      <div role="alert">
        <h1>This page could not load</h1>
        <p>The connection may have dropped, or the console was updated since you opened it. Try again; if it still fails, reload the console.</p>
        <div className="actions">
          <button type="button" className="primary" onClick={this.retry}>
            Retry
          </button>
          <button type="button" onClick={() => window.location.reload()}>
            Reload the console
          </button>
        </div>
      </div>
    );
  }
}
