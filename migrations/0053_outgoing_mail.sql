-- Mail waiting for delivery. The send-mail workflow carries only this id, so the one-time tokens
-- in verification and invitation mails never reach Temporal's history; the delivering activity
-- reads the message here and deletes it once delivered (the table holds only undelivered mail).
CREATE TABLE outgoing_mail (
  id         text PRIMARY KEY,
  to_email   text NOT NULL,
  subject    text NOT NULL,
  body       text NOT NULL,
  token      text,
  created_at timestamptz NOT NULL DEFAULT now()
);
