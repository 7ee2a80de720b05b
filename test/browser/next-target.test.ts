import { nextTarget } from '../../web/src/navigation';

describe("sign-in's ?next= target", () => {
  it.each([
    ['next=%2Fprojects%2Fprj_1', '/projects/prj_1'],
    ['next=%2Finvitations%2Faccept%3Ftoken%3Dabc', '/invitations/accept?token=abc'],
    ['', '/projects'],
  ])('goes to console paths (%s)', (search, target) => {
    expect(nextTarget(search)).toBe(target);
  });

  it.each(['next=https%3A%2F%2Fevil.example', 'next=%2F%2Fevil.example', 'next=%2F%5Cevil.example', 'next=javascript%3Aalert(1)'])(
    'never leaves the console (%s)',
    (search) => {
      expect(nextTarget(search)).toBe('/projects');
    },
  );
});
