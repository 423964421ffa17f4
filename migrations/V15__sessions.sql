-- A user's sessions are their tokens: where each was issued, and when it was last used
-- (kept to the minute, written at most once a minute by each instance that sees it).
ALTER TABLE api_tokens
    ADD COLUMN last_used_at timestamptz,
    ADD COLUMN ip           text,
    ADD COLUMN user_agent   text;
