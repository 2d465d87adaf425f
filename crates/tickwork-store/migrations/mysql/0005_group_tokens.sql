-- Each executor group may have its own access token. It is sent to the group's executors in
-- XXL-JOB-ACCESS-TOKEN, so it is kept as it is (not as a digest); NULL: the group still uses
-- the admin's global access token.

ALTER TABLE tw_groups ADD COLUMN access_token VARCHAR(128) NULL;
