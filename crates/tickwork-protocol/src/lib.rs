//! Wire types of the XXL-JOB-compatible admin<->executor protocol (XXL-JOB 2.3.0 to 3.5).
//!
//! Field names are the Java ones, irregular spellings included (`executorParams`, `logDateTim`,
//! `glueUpdatetime`, `isEnd`). Reading is as lenient as the Java side (Gson): absent or `null`
//! fields take their default, numbers may arrive as strings, unknown fields are ignored. Writing
//! omits absent optional fields, as Gson does, and the [`Envelope`] writes its payload under both
//! `content` (<= 3.2) and `data` (3.3+) so that either generation of peer reads it.

pub mod api;
mod envelope;
pub mod job_api;
mod lenient;
mod messages;
pub mod pull;
pub mod submissions;
pub mod workflows;

pub use envelope::Envelope;
pub use messages::{
    AcceptedQuery, AcceptedRuns, HandleCallbackParam, IdleBeatParam, KillParam, LogParam,
    LogResult, MAX_ACCEPTED_QUERY, RegistryParam, TriggerParam, decode_callbacks,
    duplicate_run_msg, log_text,
};

/// The header that carries the access token on every call, in both directions.
pub const ACCESS_TOKEN_HEADER: &str = "XXL-JOB-ACCESS-TOKEN";

/// The header that names the executor's app (XXL-JOB 3.5): a 3.5 executor answers only calls
/// that carry its own app name and token, and sends both on its calls to the admin.
pub const APP_NAME_HEADER: &str = "XXL-JOB-APPNAME";

/// The executor endpoint that tells which runs it accepted (a Tickwork extension; a Java
/// executor answers it with [`msg::uri_not_found`]).
pub const ACCEPTED_PATH: &str = "/tickwork/accepted";

/// The context path under which XXL-JOB admins up to 3.4.0 serve their API.
pub const LEGACY_ADMIN_CONTEXT_PATH: &str = "/xxl-job-admin";

/// Handle code of a successful run.
pub const CODE_SUCCESS: i32 = 200;
/// Code of any failure, in envelopes and as a handle code.
pub const CODE_FAIL: i32 = 500;
/// Handle code of a run that exceeded its timeout.
pub const CODE_TIMEOUT: i32 = 502;
/// Envelope code of XXL-JOB 3.5's job API when its rate limit is reached.
pub const CODE_TOO_MANY_REQUESTS: i32 = 502;

/// The registry group every executor registers under.
pub const REGISTRY_GROUP_EXECUTOR: &str = "EXECUTOR";

/// Exact messages of the protocol, as Java peers write them. Peers and operators match on them.
pub mod msg {
    /// Success message of 3.3+ peers.
    pub const SUCCESS: &str = "Success";
    pub const WRONG_TOKEN: &str = "The access token is wrong.";
    /// 3.5: a call without the token or the app name header.
    pub const TOKEN_OR_APP_EMPTY: &str = "invalid request, accessToken or appname is empty.";
    /// 3.5: a token that is not the named app's.
    pub const TOKEN_OR_APP_INVALID: &str = "invalid request, accessToken or appname invalid.";
    /// 3.5's job API, when its rate limit is reached (code 502).
    pub const TOO_MANY_REQUESTS: &str = "Too many requests, please try again later.";
    pub const METHOD_NOT_SUPPORTED: &str = "invalid request, HttpMethod not support.";
    pub const URI_EMPTY: &str = "invalid request, uri-mapping empty.";
    pub const BODY_EMPTY: &str = "invalid request, requestBody empty.";
    pub const JOB_BUSY: &str = "job thread is running or has trigger queue.";
    pub const JOB_ALREADY_KILLED: &str = "job thread already killed.";
    pub const LOG_FILE_MISSING: &str = "readLog fail, logFile not exists";
    pub const ILLEGAL_ARGUMENT: &str = "Illegal Argument.";
    pub const KILLED_BY_ADMIN: &str = "scheduling center kill job.";
    pub const TIMEOUT: &str = "job execute timeout ";
    pub const RESULT_LOST: &str = "job handle result lost.";

    /// `invalid request, uri-mapping(<uri>) not found.`
    pub fn uri_not_found(uri: &str) -> String {
        format!("invalid request, uri-mapping({uri}) not found.")
    }

    /// `job handler [<name>] not found.`
    pub fn handler_not_found(name: &str) -> String {
        format!("job handler [{name}] not found.")
    }

    /// `glueType[<name>] is not valid.`
    pub fn glue_type_invalid(name: &str) -> String {
        format!("glueType[{name}] is not valid.")
    }

    /// `repeat trigger job, logId:<id>`
    pub fn repeat_trigger(log_id: i64) -> String {
        format!("repeat trigger job, logId:{log_id}")
    }
}

/// A body that could not be read as the message it should be. The message says where and what,
/// and never carries a stack trace.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("request body is empty")]
    EmptyBody,
    #[error("invalid json: {0}")]
    Json(#[from] serde_json::Error),
}

/// Reads a message from a request body.
pub fn decode<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, Error> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(Error::EmptyBody);
    }
    Ok(serde_json::from_slice(body)?)
}

/// Writes a message as a JSON body.
pub fn encode<T: serde::Serialize>(value: &T) -> Vec<u8> {
    // Room for a whole `/run` body (some 300-400 bytes) at once: grown from serde_json's 128,
    // the buffer was allocated three times on every call.
    let mut out = Vec::with_capacity(512);
    // Serialising these plain structs cannot fail: every key is a string and no value is a map
    // with non-string keys.
    serde_json::to_writer(&mut out, value).expect("protocol messages always serialise");
    out
}
