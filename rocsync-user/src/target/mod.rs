//! Reading target processes from the outside: their mappings and the libraries' symbols.

pub mod maps;
pub mod placement;
pub mod symbols;
