//! Reading traces back: [`report`] (what a user looks at first), [`annotate`] (a
//! capture merged into a torch.profiler trace), over the files someone names
//! ([`input`]).

pub mod annotate;
pub mod input;
pub mod report;
