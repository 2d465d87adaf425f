//! The response envelope: `{code, msg, content}` (XXL-JOB <= 3.2, `ReturnT`) and
//! `{code, msg, data}` (3.3+, `Response`), written with both payload keys and read from either.

use serde::de::{DeserializeOwned, Deserializer, Error as _};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};

use crate::{CODE_FAIL, CODE_SUCCESS, lenient};

/// A response. Success is exactly `code == 200`; every other code is a failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope<T = serde_json::Value> {
    pub code: i32,
    pub msg: Option<String>,
    pub payload: Option<T>,
}

impl<T> Envelope<T> {
    /// Success with the 3.3+ message `Success` and no payload.
    pub fn success() -> Self {
        Envelope {
            code: CODE_SUCCESS,
            msg: Some(crate::msg::SUCCESS.to_owned()),
            payload: None,
        }
    }

    /// Success carrying a payload.
    pub fn success_with(payload: T) -> Self {
        Envelope {
            payload: Some(payload),
            ..Self::success()
        }
    }

    /// Failure (code 500) with a message.
    pub fn fail(msg: impl Into<String>) -> Self {
        Envelope {
            code: CODE_FAIL,
            msg: Some(msg.into()),
            payload: None,
        }
    }

    pub fn is_success(&self) -> bool {
        self.code == CODE_SUCCESS
    }
}

impl<T: Serialize> Serialize for Envelope<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let with_payload = self.payload.is_some();
        let mut map = s.serialize_map(Some(if with_payload { 4 } else { 2 }))?;
        map.serialize_entry("code", &self.code)?;
        map.serialize_entry("msg", &self.msg)?;
        if let Some(payload) = &self.payload {
            // Both keys: a <= 3.2 peer reads `content`, a 3.3+ peer reads `data`.
            map.serialize_entry("content", payload)?;
            map.serialize_entry("data", payload)?;
        }
        map.end()
    }
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Envelope<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Raw {
            #[serde(default, deserialize_with = "lenient::int32")]
            code: i32,
            #[serde(default, deserialize_with = "lenient::opt_string")]
            msg: Option<String>,
            #[serde(default)]
            content: Option<serde_json::Value>,
            #[serde(default)]
            data: Option<serde_json::Value>,
        }
        let raw = Raw::deserialize(d)?;
        let payload = match (raw.data, raw.content) {
            (Some(v), _) if !v.is_null() => Some(v),
            (_, Some(v)) if !v.is_null() => Some(v),
            _ => None,
        };
        let payload = payload
            .map(|v| serde_json::from_value(v).map_err(D::Error::custom))
            .transpose()?;
        Ok(Envelope {
            code: raw.code,
            msg: raw.msg,
            payload,
        })
    }
}
