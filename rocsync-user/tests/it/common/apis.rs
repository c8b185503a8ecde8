//! What the tests know of the traced functions, written from the runtimes' headers
//! (`hip_runtime_api.h`, `cuda_runtime_api.h`) and rocsync's documented defaults — never
//! taken from rocsync's own tables, so a function dropped from them is missed here.

/// Every function a capture probes unless told otherwise, with the names the raw capture
/// gives its arguments, in call order (an out-parameter named after the value it
/// returns). `*GetDevice` is not probed by default (README: `--probe`).
const TRACED: &[(&str, &[&str])] = &[
    ("hipEventRecord", &["event", "stream"]),
    ("hipEventRecord_spt", &["event", "stream"]),
    ("hipEventRecordWithFlags", &["event", "stream", "flags"]),
    ("hipStreamWaitEvent", &["stream", "event", "flags"]),
    ("hipStreamWaitEvent_spt", &["stream", "event", "flags"]),
    ("hipEventSynchronize", &["event"]),
    ("hipEventQuery", &["event"]),
    ("hipStreamSynchronize", &["stream"]),
    ("hipStreamSynchronize_spt", &["stream"]),
    ("hipDeviceSynchronize", &[]),
    ("hipEventDestroy", &["event"]),
    ("hipSetDevice", &["device"]),
    ("hipStreamCreate", &["stream"]),
    ("hipStreamCreateWithFlags", &["stream", "flags"]),
    (
        "hipStreamCreateWithPriority",
        &["stream", "flags", "priority"],
    ),
    ("hipStreamDestroy", &["stream"]),
    ("cudaEventRecord", &["event", "stream"]),
    ("cudaEventRecord_ptsz", &["event", "stream"]),
    ("cudaEventRecordWithFlags", &["event", "stream", "flags"]),
    (
        "cudaEventRecordWithFlags_ptsz",
        &["event", "stream", "flags"],
    ),
    ("cudaStreamWaitEvent", &["stream", "event", "flags"]),
    ("cudaStreamWaitEvent_ptsz", &["stream", "event", "flags"]),
    ("cudaEventSynchronize", &["event"]),
    ("cudaEventQuery", &["event"]),
    ("cudaStreamSynchronize", &["stream"]),
    ("cudaStreamSynchronize_ptsz", &["stream"]),
    ("cudaDeviceSynchronize", &[]),
    ("cudaEventDestroy", &["event"]),
    ("cudaSetDevice", &["device"]),
    ("cudaStreamCreate", &["stream"]),
    ("cudaStreamCreateWithFlags", &["stream", "flags"]),
    (
        "cudaStreamCreateWithPriority",
        &["stream", "flags", "priority"],
    ),
    ("cudaStreamDestroy", &["stream"]),
];

/// Probed only when asked for (`--probe`), or by `attach` for a while to learn devices.
const ON_REQUEST: &[(&str, &[&str])] = &[
    ("hipGetDevice", &["device"]),
    ("cudaGetDevice", &["device"]),
    // The stream is read from r8 / [rsp+16], and written second.
    ("hipLaunchKernel", &["function", "stream"]),
    ("hipMemcpyAsync", &["dst", "stream"]),
    ("cudaLaunchKernel", &["function", "stream"]),
    ("cudaMemcpyAsync", &["dst", "stream"]),
];

/// Whether a capture probes `api` by default.
pub(crate) fn traced_by_default(api: &str) -> bool {
    TRACED.iter().any(|(n, _)| *n == api)
}

/// The functions a capture probes by default.
pub(crate) fn traced_by_default_names() -> impl Iterator<Item = &'static str> {
    TRACED.iter().map(|(n, _)| *n)
}

/// The argument names of `api` in call order; panics on a function the tests do not know.
pub(crate) fn params(api: &str) -> &'static [&'static str] {
    TRACED
        .iter()
        .chain(ON_REQUEST)
        .find(|(n, _)| *n == api)
        .unwrap_or_else(|| panic!("{api}: not a function the tests know"))
        .1
}

/// Handles (`hipEvent_t`, `hipStream_t`) are pointers, compared whole; the rest are C
/// `int`/`unsigned`, compared as their 32 bits.
pub(crate) fn is_handle(param: &str) -> bool {
    matches!(param, "event" | "stream" | "function" | "dst")
}

/// Whether the Kineto trace has a runtime row for `api`: Kineto leaves device selection
/// out.
pub(crate) fn has_runtime_row(api: &str) -> bool {
    !api.ends_with("SetDevice") && !api.ends_with("GetDevice")
}

/// The prefix of a runtime's own fields in a Kineto row (`hip_event`, `cuda_stream`).
pub(crate) fn field_prefix(api: &str) -> &'static str {
    if api.starts_with("cuda") {
        "cuda"
    } else {
        "hip"
    }
}

/// The call probes' link kind rocsync should use here: multi-uprobe links from Linux 6.6
/// (README, `--classic-uprobes`), read from the running kernel's release.
pub(crate) fn expected_call_probe_links() -> &'static str {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let mut v = release
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .map(|n| n.parse::<u32>().unwrap_or(0));
    let (major, minor) = (v.next().unwrap_or(0), v.next().unwrap_or(0));
    if (major, minor) >= (6, 6) {
        "uprobe_multi"
    } else {
        "perf_event"
    }
}
