import { Link, useLocation, useSearch } from 'wouter';
import { api, call } from '../api/client';
import { Field, FormError, SubmitButton, useSubmit } from '../components/forms';
import { nextTarget } from '../navigation';
import { useSession } from '../session';

export default function SignUp() {
  const session = useSession();
  const search = useSearch();
  const [, navigate] = useLocation();
  const { busy, error, onSubmit } = useSubmit(async (form) => {
    const body = { name: String(form.get('name')), email: String(form.get('email')), password: String(form.get('password')) };
    await call(api.POST('/api/auth/signup', { body }));
    await session.reload();
    navigate(nextTarget(search), { replace: true });
  });
  return (
    <section className="narrow">
      <h1>Create an account</h1>
      <form onSubmit={onSubmit} noValidate>
        <Field label="Name" name="name" autoComplete="name" required error={error} />
        <Field label="E-mail" name="email" type="email" autoComplete="email" required error={error} />
        <Field label="Password" name="password" type="password" autoComplete="new-password" required minLength={10} error={error} hint="At least 10 characters." />
        <FormError error={error} fields={['name', 'email', 'password']} />
        <SubmitButton busy={busy}>Create account</SubmitButton>
      </form>
      <p>
        Have an account? <Link href={`/signin${search ? `?${search}` : ''}`}>Sign in</Link>
      </p>
    </section>
  );
}
