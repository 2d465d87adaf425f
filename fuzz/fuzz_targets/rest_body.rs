//! Fuzzes the REST API's request bodies as the admin reads them: any bytes either decode into
//! the input type or are an error; a job input that decodes goes on to the schedule check.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tickwork_core::schedule::Schedule;
use tickwork_protocol::api::{
    AlarmChannelInput, CopyInput, GroupInput, JobInput, PasswordInput, ScriptInput, TokenInput,
    TriggerInput, UserInput, UserUpdateInput,
};

fuzz_target!(|body: &[u8]| {
    if let Ok(job) = serde_json::from_slice::<JobInput>(body) {
        let _ = serde_json::to_vec(&job).expect("a decoded input encodes");
        let spec = job.to_spec("UTC");
        let _ = Schedule::parse(spec.schedule_type, &spec.schedule_conf, &spec.time_zone);
    }
    let _ = serde_json::from_slice::<GroupInput>(body);
    let _ = serde_json::from_slice::<TriggerInput>(body);
    let _ = serde_json::from_slice::<UserInput>(body);
    let _ = serde_json::from_slice::<UserUpdateInput>(body);
    let _ = serde_json::from_slice::<PasswordInput>(body);
    let _ = serde_json::from_slice::<TokenInput>(body);
    let _ = serde_json::from_slice::<ScriptInput>(body);
    let _ = serde_json::from_slice::<CopyInput>(body);
    let _ = serde_json::from_slice::<AlarmChannelInput>(body);
});
