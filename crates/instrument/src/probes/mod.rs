//! The probe planners, one per stage of the data path. Each walks one kernel of the
//! kernel map and inserts its probes through the [`Emitter`](crate::emit::Emitter).

pub(crate) mod accumulator;
pub(crate) mod context;
pub(crate) mod epilogue;
pub(crate) mod loads;
pub(crate) mod operands;
pub(crate) mod shared;
pub(crate) mod tmem;
pub(crate) mod warpgroups;
