//! rocsync's integration tests, one test binary of topic modules (as aya's
//! `test/integration-test`): one binary links once, where a binary per file linked ~37
//! times. Each module is a former `tests/<topic>.rs`; its tests are `<topic>::<test>`
//! (`cargo test -p rocsync-user --test it -- daemon::recording::sessions::` runs one topic).
//!
//! Every test runs as a thread of this one process, beside the other topics' tests, so a
//! test may change nothing process-wide (environment, working directory, signal
//! dispositions, the umask): what differs per test goes to the processes it starts
//! (`Command::env`, `current_dir`, `pre_exec`), and whatever a test names on the host (a
//! scenario's copy, a daemon's socket and state, a port) is its own (`common::TempDir`,
//! port 0).

// Tests may unwrap (clippy.toml): their helpers too, which clippy does not see as tests.
#![allow(clippy::unwrap_used)]

mod common;

mod agent_filter;
mod annotate;
mod annotate_errors;
mod annotate_hta;
mod annotate_launches;
mod attribution;
mod capture;
mod carried_runtime;
mod cgroup_kill;
mod closed_pipes;
mod collectives;
mod concurrent;
mod conventions;
mod convert;
mod daemon;
mod demo;
mod deploy;
mod deploy_kubernetes;
mod dist_binary;
mod dist_deb;
mod dist_image;
mod dist_wheel;
mod doc_links;
mod doctor;
mod doctor_runtimes;
mod documented_flags;
mod edges;
mod errors;
mod hostile;
mod hostile_target;
mod hsa;
mod hsa_doorbells;
mod hsa_links;
mod hta;
mod hta_analyzers;
mod job_control;
mod losses;
mod messages;
mod neighbours_round_two;
mod never_stopped;
mod no_surprises;
mod offline_memory;
mod outputs;
mod outputs_links;
mod pipeline;
mod placement;
mod processes;
mod readme;
mod real_placement;
mod real_rccl;
mod real_runtimes;
mod report;
mod report_figures;
mod report_folders;
mod report_job;
mod report_progress;
mod report_story;
mod report_story_sections;
mod resolution;
mod returns;
mod run_duration;
mod rust_driver;
mod seccomp_targets;
mod signals;
mod stacks;
mod stacks_hostile;
mod stop;
mod target_table;
mod temporaries;
mod thread_names;
mod under_load;
mod uprobe_links;
mod wakes;
