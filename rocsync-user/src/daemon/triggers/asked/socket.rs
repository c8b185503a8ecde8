//! A trace asked on the daemon's socket (`rocsync trace`): the request checked into
//! what to record, or a flight recorder dump.

use std::time::Duration;

use anyhow::{Result, bail};

use crate::daemon::{
    serving::protocol::{MAX_PIDS, TraceRequest},
    triggers::{origin::MAX_DURATION, origin::TraceSpec},
    untrusted::stem,
};

/// The request's trace, or `None`: what the flight recorder holds, at once.
pub(crate) fn checked(t: TraceRequest) -> Result<Option<TraceSpec>> {
    let TraceRequest {
        pids,
        all,
        flight,
        cgroup,
        pod,
        agents,
        duration_ms,
        name,
        send_files: _,
    } = t;
    let selectors = usize::from(!pids.is_empty())
        + usize::from(all)
        + usize::from(cgroup.is_some())
        + usize::from(pod.is_some());
    if flight && selectors > 0 {
        bail!("\"flight\" writes every process the recorder holds: no \"pids\" or \"all\"");
    }
    if !flight && selectors != 1 {
        bail!("name processes with \"pids\", \"all\", \"cgroup\" or \"pod\": one of the four");
    }
    if let Some(pod) = &pod {
        pod.check().map_err(anyhow::Error::msg)?;
    }
    if pids.len() > MAX_PIDS {
        bail!("{} pids: a request names at most {MAX_PIDS}", pids.len());
    }
    let duration = Duration::from_millis(duration_ms.unwrap_or(1000));
    if duration.is_zero() || duration > MAX_DURATION {
        bail!(
            "\"duration_ms\" must be from 1 to {}",
            MAX_DURATION.as_millis()
        );
    }
    if flight {
        return Ok(None);
    }
    Ok(Some(TraceSpec {
        pids,
        cgroup,
        pod,
        agents,
        duration,
        name: stem(name.as_deref())?,
    }))
}

/// A client waiting for a trace to be written.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::serving::{protocol::Request, socket::parse};

    fn trace(line: &str) -> Result<Option<TraceSpec>> {
        match parse(line)? {
            Request::Trace(t) => checked(t),
            other => bail!("not a trace request: {other:?}"),
        }
    }

    #[test]
    fn requests_are_checked() {
        let r = trace(r#"{"trace":{"pids":[12,13],"duration_ms":250,"name":"step-9"}}"#)
            .unwrap()
            .unwrap();
        assert_eq!(
            (r.pids, r.duration.as_millis(), r.name.as_str()),
            (vec![12, 13], 250, "step-9")
        );
        assert!(
            trace(r#"{"trace":{"all":true}}"#)
                .unwrap()
                .unwrap()
                .pids
                .is_empty()
        );
        assert!(trace(r#"{"trace":{"flight":true}}"#).unwrap().is_none());
        assert!(trace(r#"{"trace":{"flight":true,"all":true}}"#).is_err());
        let r = trace(r#"{"trace":{"cgroup":"pod-7","agents":"0,2"}}"#)
            .unwrap()
            .unwrap();
        assert_eq!(
            (r.cgroup.as_deref(), r.agents.mask()),
            (Some("pod-7"), 0b101)
        );
        assert!(trace(r#"{"trace":{"all":true,"agents":"99"}}"#).is_err());
        let r = trace(r#"{"trace":{"pod":{"namespace":"ml","name":"trainer-0"}}}"#)
            .unwrap()
            .unwrap();
        assert_eq!(r.pod.unwrap().to_string(), "ml/trainer-0");
        for bad in [
            "nope",
            r#"{"other":{}}"#,
            r#"{"trace":{}}"#,
            r#"{"trace":{"pids":[1],"all":true}}"#,
            r#"{"trace":{"pids":[-1]}}"#,
            r#"{"trace":{"all":true,"duration_ms":0}}"#,
            r#"{"trace":{"all":true,"name":"../etc/x"}}"#,
            r#"{"trace":{"pod":{"namespace":"ml","name":"t"},"all":true}}"#,
            r#"{"trace":{"pod":{"namespace":"ml","name":"t"},"flight":true}}"#,
            r#"{"trace":{"pod":{"namespace":"../x","name":"t"}}}"#,
            r#"{"trace":{"pod":{"namespace":"ml","name":"a\nb"}}}"#,
            r#"{"trace":{"pod":"ml/t"}}"#,
        ] {
            assert!(trace(bad).is_err(), "{bad}");
        }
    }
}
