import { Link, useLocation, useSearch } from 'wouter';
import { api, call } from '../api/client';
import { Field, FormError, SubmitButton, useSubmit } from '../components/forms';
import { nextTarget } from '../navigation';
import { useSession } from '../session';

export default function SignIn() {
  const session = useSession();
  const search = useSearch();
  const [, navigate] = useLocation();
  const { busy, error, onSubmit } = useSubmit(async (form) => {
    await call(api.POST('/api/auth/login', { body: { email: String(form.get('email')), password: String(form.get('password')) } }));
    await session.reload();
    navigate(nextTarget(search), { replace: true });
  });
  return (
    <section className="narrow">
      <h1>Sign in</h1>
      <form onSubmit={onSubmit} noValidate>
        <Field label="E-mail" name="email" type="email" autoComplete="username" required error={error} />
        <Field label="Password" name="password" type="password" autoComplete="current-password" required error={error} />
        <FormError error={error} fields={['email', 'password']} />
        <SubmitButton busy={busy}>Sign in</SubmitButton>
      </form>
      <p>
        No account yet? <Link href={`/signup${search ? `?${search}` : ''}`}>Create an account</Link>
      </p>
    </section>
  );
}
