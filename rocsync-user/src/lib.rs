pub static PROBES: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/rocsync"));
