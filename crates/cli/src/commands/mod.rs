//! One module per subcommand.

pub mod debug;
pub mod diagnose;
pub mod docs;
pub mod extract;
pub mod instrument;
pub mod ladder;
pub mod mutate;
pub mod nvcc;
pub mod parse_stats;
pub mod run;
pub mod sites;
pub mod trace;
