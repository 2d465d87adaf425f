//! Fuzzes the lenient XXL-JOB decoder with every message the admin and the executor read from
//! the wire: a body either decodes or is an error, and what decodes writes and reads back.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tickwork_protocol::{
    Envelope, HandleCallbackParam, IdleBeatParam, KillParam, LogParam, LogResult, RegistryParam,
    TriggerParam, decode, encode,
};

/// Decodes `body` as `T`; what decodes must encode and decode again.
fn round_trip<T: DeserializeOwned + Serialize>(body: &[u8]) {
    if let Ok(value) = decode::<T>(body) {
        let again = encode(&value);
        decode::<T>(&again).expect("an encoded message decodes");
    }
}

fuzz_target!(|body: &[u8]| {
    round_trip::<TriggerParam>(body);
    round_trip::<Vec<HandleCallbackParam>>(body);
    round_trip::<RegistryParam>(body);
    round_trip::<IdleBeatParam>(body);
    round_trip::<KillParam>(body);
    round_trip::<LogParam>(body);
    round_trip::<Envelope<LogResult>>(body);
    round_trip::<Envelope<String>>(body);
    round_trip::<Envelope>(body);
});
