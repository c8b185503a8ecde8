//! What a capture or the daemon asks to be probed: which functions, and which of their
//! halves (entry, return).

use rocsync_common::{Api, Cookie};

/// Which functions a capture probes: the default set (every hooked function but the hot
/// `*GetDevice`), plus those asked for, minus those skipped.
#[derive(Clone, Debug, Default)]
pub struct ApiChoice {
    pub extra: Vec<Api>,
    pub skip: Vec<Api>,
    /// Probed only until [`Probes::detach_temporary`](crate::calls::probes::Probes::detach_temporary) (`attach` learning the devices of
    /// threads that chose theirs before it, through `*GetDevice`).
    pub temporary: Vec<Api>,
    /// Which return probes attach.
    pub returns: ReturnProbes,
}

/// Which return probes of the chosen functions attach: the daemon attaches those that
/// counting does not need ([`Api::return_optional`]) apart, only while something records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReturnProbes {
    #[default]
    All,
    /// Every entry, and the returns counting needs.
    Needed,
    /// Only the returns counting does not need.
    Optional,
}

impl ReturnProbes {
    /// Whether `api`'s program (a return probe: `ret`) attaches.
    pub(in crate::calls::probes) fn wants(self, api: Api, ret: bool) -> bool {
        let optional = ret && api.return_optional();
        match self {
            ReturnProbes::All => true,
            ReturnProbes::Needed => !optional,
            ReturnProbes::Optional => optional,
        }
    }
}

impl ApiChoice {
    pub fn probes(&self, api: Api) -> bool {
        (api.probed_by_default() || self.extra.contains(&api) || self.temporary.contains(&api))
            && !self.skip.contains(&api)
    }

    /// Whether `api`'s entry probe may go where no return probe of it is ever placed
    /// ([`alone`](super::alone)): it has no return probe, or (the daemon counting) its
    /// return is attached apart, only while something records — but not where its probes
    /// read arguments from the stack (launches, NCCL's), whose pointer the frame moves.
    pub(in crate::calls::probes) fn entry_alone(&self, api: Api) -> bool {
        let alone = api.entry_only()
            || (self.returns == ReturnProbes::Needed && !self.returns.wants(api, true));
        alone && Cookie::of(api).stream_source() < Cookie::STREAM_STACK_2
    }
}
