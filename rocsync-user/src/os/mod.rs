//! What rocsync needs of the system it runs on: the clocks ([`clock`]), `/proc`
//! ([`procfs`]), a process's environment ([`environ`]), lock files ([`lockfile`]), freed memory
//! ([`memory`]), who
//! may write a path beyond its mode ([`acl`]), the checks before probing ([`preflight`]),
//! signals ([`signals`]), standard input and output ([`stdio`], [`stderr`]) and users
//! ([`users`]).

pub(crate) mod acl;
pub(crate) mod clock;
pub(crate) mod environ;
pub(crate) mod lockfile;
pub(crate) mod memory;
pub(crate) mod preflight;
pub(crate) mod procfs;
pub mod signals;
pub mod stderr;
pub mod stdio;
pub(crate) mod users;
