import postgres from 'postgres';
import { templateDatabase } from './global-setup';

export default async function globalTeardown() {
  if (!process.env.DATABASE_URL || !process.env.TEST_TEMPLATE_DB) return;
  const admin = postgres(process.env.DATABASE_URL, { max: 1, onnotice: () => undefined });
  await admin.unsafe(`DROP DATABASE IF EXISTS ${templateDatabase()} WITH (FORCE)`).catch(() => undefined);
  await admin.end();
}
