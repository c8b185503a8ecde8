// Empty on purpose: the library target only lets rocsync-user name this crate as a
// build-dependency, so cargo rebuilds the probes when their sources change.
#![no_std]
