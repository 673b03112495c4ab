//! Fleets: the directory `hostbench fleet run` fills from many nodes at once (`layout`), and the
//! fleet report made from it.

pub mod layout;
