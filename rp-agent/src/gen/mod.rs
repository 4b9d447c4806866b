//! Traffic models and the sink (filled in by the next commit).
