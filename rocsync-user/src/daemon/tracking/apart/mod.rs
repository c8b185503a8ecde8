//! A runtime file's probes attached apart from its others, each so that one part of the
//! daemon can take them off and put them back: the polling probes (the budget sheds
//! them, `polling.rs`, and logs it, `shed_log.rs`), records', waits' and destroys'
//! entries (its duty cycle, `cycled.rs`) and the returns counting does not need (on while
//! something records, `returns.rs`).

pub(crate) mod cycled;
pub(crate) mod polling;
pub(crate) mod returns;
pub(crate) mod shed_log;

use crate::{
    calls::{
        backend::Runtime,
        probes::{Probes, elf::library::OpenedLibrary},
    },
    daemon::tracking::apart::{
        cycled::Cycled,
        polling::Polling,
        returns::{FileReturns, ReturnsApart},
        shed_log::ShedLog,
    },
};

#[derive(Default)]
pub(crate) struct Apart {
    pub polling: Option<Polling>,
    pub returns: Option<FileReturns>,
    pub cycled: Option<Cycled>,
}

impl Apart {
    /// Attaches `lib`'s probes apart (for `pid`), as `returns` and the budget want them
    /// now; what fails is said (`shown`: the file as the log names it) and left out.
    pub(crate) fn attach(
        probes: &mut Probes,
        lib: &OpenedLibrary,
        (runtime, carried): (&'static Runtime, bool),
        (pid, shown): (u32, &str),
        (returns, log): (&ReturnsApart, &ShedLog),
    ) -> Apart {
        let polling = lib
            .try_clone()
            .and_then(|l| Polling::attach(probes, l, (runtime, carried), pid, log));
        let returns = lib.try_clone().map(|l| {
            let mut f = FileReturns::new(l, runtime, carried);
            if let Err(e) = returns.file_added(probes, &mut f) {
                crate::say!("rocsync daemon: warning: {shown}: {e:#}");
            }
            f
        });
        let cycled = lib.try_clone().and_then(|l| {
            Cycled::attach(probes, l, (runtime, carried), pid)
                .inspect_err(|e| {
                    crate::say!(
                        "rocsync daemon: warning: {shown}: records and waits not probed: {e:#}"
                    )
                })
                .ok()
                .flatten()
        });
        Apart {
            polling,
            returns,
            cycled,
        }
    }
}
