//! Memory latency: pointer chase over one random cycle of cache lines (Sattolo).
