//! GLUE script versions.

use super::*;

#[async_trait]
impl<B: Backend> ScriptStore for SqlStore<B> {
    async fn script_version_append(
        &self,
        version: ScriptVersionNew,
    ) -> Result<ScriptVersion, Error> {
        check_bytes("source", &version.source, GLUE_MAX_BYTES)?;
        check_len("comment", &version.comment, COMMENT_MAX)?;
        check_required("author", &version.author, USERNAME_MAX)?;
        let mut tx = B::begin_write(&self.writes).await?;
        // Locking the job serialises appends to one job, so numbers never collide.
        let lock = Query::new(format!(
            "SELECT id FROM tw_jobs WHERE id = ?{}",
            B::KIND.for_update()
        ))
        .bind(version.job_id);
        if B::fetch_optional::<(i64,)>(&mut *tx, lock).await?.is_none() {
            return Err(Error::not_found("job", version.job_id));
        }
        let max =
            Query::new("SELECT COALESCE(MAX(version), 0) FROM tw_script_versions WHERE job_id = ?")
                .bind(version.job_id);
        let (newest,): (i64,) = B::fetch_optional(&mut *tx, max)
            .await?
            .ok_or_else(|| Error::corrupt("MAX returned no row".to_owned()))?;
        let number = newest + 1;
        let q = Query::new(format!(
            "INSERT INTO tw_script_versions ({}) VALUES (?, ?, ?, ?, ?, ?, ?)",
            &SCRIPT_VERSION_COLUMNS["id, ".len()..]
        ))
        .bind(version.job_id)
        .bind(number)
        .bind(version.glue_type.as_str())
        .bind(&version.source)
        .bind(&version.comment)
        .bind(&version.author)
        .bind(version.now);
        let id = Self::insert_id(&mut tx, q)
            .await?
            .ok_or_else(|| Error::corrupt("the version insert wrote no row".to_owned()))?;
        tx.commit().await?;
        Ok(ScriptVersion {
            id,
            job_id: version.job_id,
            version: number,
            glue_type: version.glue_type,
            source: version.source,
            comment: version.comment,
            author: version.author,
            created_at: version.now,
        })
    }

    async fn script_versions_list(&self, job_id: i64) -> Result<Vec<ScriptVersion>, Error> {
        let q = Query::new(format!(
            "SELECT {SCRIPT_VERSION_COLUMNS} FROM tw_script_versions WHERE job_id = ? \
             ORDER BY version DESC"
        ))
        .bind(job_id);
        convert(self.fetch_all::<ScriptVersionRow>(q).await?)
    }

    async fn script_version_get(&self, key: ScriptVersionKey) -> Result<ScriptVersion, Error> {
        let q = Query::new(format!(
            "SELECT {SCRIPT_VERSION_COLUMNS} FROM tw_script_versions \
             WHERE job_id = ? AND version = ?"
        ))
        .bind(key.job_id)
        .bind(key.version);
        match self.fetch_optional::<ScriptVersionRow>(q).await? {
            Some(row) => row.try_into(),
            None => Err(Error::not_found(
                "script version",
                format!("{}/{}", key.job_id, key.version),
            )),
        }
    }
}
