// Every workflow the worker registers. Workflows import activities by type only.
export { sendMail } from './mail';
