import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';

// The API serves dist/ itself (apps/api/src/http/dashboard.ts). `vite` (dev server) proxies /api to it.
export default defineConfig({
  plugins: [react()],
  build: { outDir: 'dist', emptyOutDir: true, sourcemap: true },
  server: { proxy: { '/api': process.env.API_URL ?? 'http://localhost:3000' } },
});
