// Operator commands. Build first (`npm run build` at the root), then:
//   node apps/api/dist/cli.js create-owner --email E --password P --org NAME [--name N]
//   pnpm --filter @svc/api cli create-owner --email E --password P --org NAME [--name N]
// create-owner makes an ACTIVE user who owns a new organization (no e-mail verification) and prints the ids as
// JSON on stdout. It applies the signup rules (same schema, same service function as POST /auth/signup).
import { parseArgs } from 'node:util';
import { loadConfigOrExit } from '@svc/config';
import { createPrismaClient } from '@svc/db';
import { HttpError } from './http/errors';
import { systemClock, type Clock } from '@svc/domain';
import { signupBody } from './modules/auth/auth.schemas';
import { createOwnerAccount, type NewOwnerInput } from './modules/auth/accounts';

const USAGE = `Usage:
  cli create-owner --email <e-mail> --password <password> --org <organization name> [--name <display name>]
`;

export interface CliIo {
  env: NodeJS.ProcessEnv;
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  clock?: Clock;
}

const processIo: CliIo = {
  env: process.env,
  stdout: (text) => void process.stdout.write(text),
  stderr: (text) => void process.stderr.write(text),
};

/** Runs one command; resolves to the process exit code (0 ok, 1 failure, 2 usage error). */
export async function runCli(argv: string[], io: CliIo = processIo): Promise<number> {
  const [command, ...rest] = argv;
  if (command !== 'create-owner') {
    io.stderr(command && command !== '--help' ? `Unknown command: ${command}\n${USAGE}` : USAGE);
    return 2;
  }

  let values: Record<string, string | undefined>;
  try {
    ({ values } = parseArgs({
      args: rest,
      options: { email: { type: 'string' }, password: { type: 'string' }, org: { type: 'string' }, name: { type: 'string' } },
      strict: true,
      allowPositionals: false,
    }));
  } catch (err) {
    io.stderr(`${(err as Error).message}\n${USAGE}`);
    return 2;
  }
  const missing = ['email', 'password', 'org'].filter((k) => !values[k]);
  if (missing.length > 0) {
    io.stderr(`Missing ${missing.map((k) => `--${k}`).join(', ')}\n${USAGE}`);
    return 2;
  }
  const { value: input, error } = signupBody.validate(
    {
      email: values.email,
      password: values.password,
      name: values.name ?? values.email!.split('@')[0],
      organization_name: values.org,
    },
    { abortEarly: true, convert: true },
  );
  if (error) {
    io.stderr(`Invalid input: ${error.details[0].message.replace(/"/g, "'")}\n`);
    return 2;
  }

  const config = loadConfigOrExit(io.env);
  const prisma = createPrismaClient(config.databaseUrl, { max: 2 });
  try {
    const account = await createOwnerAccount({ prisma, config, clock: io.clock ?? systemClock }, input as NewOwnerInput, {
      verified: true,
    });
    io.stdout(`${JSON.stringify({ user_id: account.userId, organization_id: account.organizationId, status: account.status })}\n`);
    return 0;
  } catch (err) {
    if (err instanceof HttpError) {
      io.stderr(`create-owner failed: ${err.detail}\n`);
      return 1;
    }
    io.stderr(`create-owner failed: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  } finally {
    await prisma.$disconnect();
  }
}

if (require.main === module) {
  runCli(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.exitCode = 1;
    },
  );
}
