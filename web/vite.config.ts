import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

/**
 * The console's build: `vite build web` (root web/) writes dist/web, which the control plane
 * serves (api/lib/console). `vite web` is the dev server, proxying the API to `npm run dev`.
 */
export default defineConfig({
  plugins: [react()],
  build: {
    outDir: '../dist/web',
    emptyOutDir: true,
    // Hashed names under /assets/: served immutable for a year.
    assetsDir: 'assets',
    // No inline <script> or data: URLs: the Content-Security-Policy allows neither.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    sourcemap: true,
    target: 'es2022',
  },
  server: {
    proxy: Object.fromEntries(['/api', '/ingest', '/auth', '/.well-known'].map((prefix) => [prefix, 'http://127.0.0.1:3000'])),
  },
});
