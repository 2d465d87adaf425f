-- What happens to a run its admin may have sent before going away, when no executor can say
-- whether it has it: AT_MOST_ONCE (ended lost, with an alarm) or AT_LEAST_ONCE (sent again).
ALTER TABLE tw_jobs ADD COLUMN delivery TEXT NOT NULL DEFAULT 'AT_MOST_ONCE';
