//! `rocsync read-stacks --pid P [--tid T]` (hidden): the stack reader the daemon runs as a
//! bounded child (`stacks::child`); prints a JSON line per phase of the read.

use crate::front::cli::ReadStacksArgs;

pub fn read_stacks(args: ReadStacksArgs) -> i32 {
    crate::stacks::reader::run(args.pid, args.tid.unwrap_or(args.pid))
}
