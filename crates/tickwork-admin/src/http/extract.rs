//! Extractors of the REST API whose rejections are [`ApiError`]s, so handlers take their
//! inputs ready-made: a JSON object body ([`ApiJson`], or [`ApiJsonOr`] when it may be
//! empty), query parameters ([`ApiQuery`]), positive ids from the path ([`Id`], [`Ids`]) and
//! the caller the token check found ([`Caller`]).

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Query, RawPathParams, Request};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use super::ApiError;
use crate::Error;
use crate::auth::Principal;

/// Largest body of a JSON API call: a job with a 1 MiB script fits.
pub(super) const API_BODY_LIMIT: usize = 2 * 1024 * 1024;

/// Largest body of a bulk call: 10,000 jobs of 3 KiB each.
pub(super) const BULK_BODY_LIMIT: usize = 32 * 1024 * 1024;

/// A JSON object body of at most `LIMIT` bytes, decoded with our own messages (size,
/// unknown fields, wrong types).
pub(super) struct ApiJson<T, const LIMIT: usize = API_BODY_LIMIT>(pub T);

/// A JSON object body, or the type's default when the body is empty.
pub(super) struct ApiJsonOr<T>(pub T);

/// Query parameters, decoded with our own message.
pub(super) struct ApiQuery<T>(pub T);

/// The one positive id of a path such as `/jobs/{id}`.
pub(super) struct Id(pub i64);

/// The two positive ids of a path such as `/jobs/{id}/script/versions/{version}/restore`.
pub(super) struct Ids(pub i64, pub i64);

/// The text segments of a path such as `/submissions/{app}/{key}`, percent-decoded, in order.
pub(super) struct Names(pub Vec<String>);

/// The authenticated caller, put in the request by the token check.
pub(super) struct Caller(pub Principal);

/// The body, refused with a clear message when over `limit` bytes.
async fn body(req: Request, limit: usize) -> Result<Bytes, ApiError> {
    axum::body::to_bytes(req.into_body(), limit)
        .await
        .map_err(|_| Error::invalid(format!("request body is larger than {limit} bytes")).into())
}

/// Decodes a body that must be a JSON object. Serde would also fill a struct from an array
/// of its fields in order; no client means that, so anything but an object is refused.
fn json_object<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(Error::invalid("invalid json: the request body must be a JSON object").into());
    }
    serde_json::from_slice(body).map_err(|e| Error::invalid(format!("invalid json: {e}")).into())
}

impl<T: DeserializeOwned, S: Send + Sync, const LIMIT: usize> FromRequest<S> for ApiJson<T, LIMIT> {
    type Rejection = ApiError;

    async fn from_request(req: Request, _: &S) -> Result<Self, ApiError> {
        json_object(&body(req, LIMIT).await?).map(ApiJson)
    }
}

impl<T: DeserializeOwned + Default, S: Send + Sync> FromRequest<S> for ApiJsonOr<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, _: &S) -> Result<Self, ApiError> {
        let body = body(req, API_BODY_LIMIT).await?;
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(ApiJsonOr(T::default()));
        }
        json_object(&body).map(ApiJsonOr)
    }
}

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        Query::<T>::try_from_uri(&parts.uri)
            .map(|Query(v)| ApiQuery(v))
            .map_err(|e| Error::invalid(format!("invalid query: {}", e.body_text())).into())
    }
}

/// A path segment as a positive id, named in the error by its route parameter.
fn id(name: &str, text: &str) -> Result<i64, ApiError> {
    text.parse::<i64>()
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| Error::invalid_field(name, format!("{text:?} is not an id")).into())
}

async fn path_ids<S: Send + Sync>(parts: &mut Parts, state: &S) -> Result<Vec<i64>, ApiError> {
    let params = RawPathParams::from_request_parts(parts, state)
        .await
        .map_err(|e| Error::invalid(e.body_text()))?;
    params.iter().map(|(name, text)| id(name, text)).collect()
}

impl<S: Send + Sync> FromRequestParts<S> for Id {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match path_ids(parts, state).await?[..] {
            [id] => Ok(Id(id)),
            _ => Err(Error::Internal("the route does not have one id".into()).into()),
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Ids {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match path_ids(parts, state).await?[..] {
            [a, b] => Ok(Ids(a, b)),
            _ => Err(Error::Internal("the route does not have two ids".into()).into()),
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Names {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let params = RawPathParams::from_request_parts(parts, state)
            .await
            .map_err(|e| Error::invalid(e.body_text()))?;
        Ok(Names(
            params.iter().map(|(_, text)| text.to_owned()).collect(),
        ))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        parts
            .extensions
            .get::<Principal>()
            .cloned()
            .map(Caller)
            .ok_or_else(|| Error::Unauthorized("no api token was checked".into()).into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_positive_integers() {
        assert_eq!(id("id", "7").unwrap(), 7);
        for bad in ["0", "-1", "x", "", "1.5", "99999999999999999999"] {
            let e = id("id", bad).expect_err(bad).0;
            assert_eq!(e.to_string(), format!("id: {bad:?} is not an id"));
            assert_eq!(e.field(), Some("id"));
        }
    }

    #[test]
    fn a_body_must_be_a_json_object() {
        #[derive(serde::Deserialize, Debug)]
        #[serde(deny_unknown_fields)]
        struct In {
            #[allow(dead_code)]
            a: i64,
        }
        assert!(json_object::<In>(b" {\"a\": 1}").is_ok());
        let msg = |b: &[u8]| json_object::<In>(b).unwrap_err().0.to_string();
        assert_eq!(
            msg(b"[1]"),
            "invalid json: the request body must be a JSON object"
        );
        assert!(msg(b"{\"a\": 1, \"b\": 2}").starts_with("invalid json: unknown field `b`"));
    }
}
