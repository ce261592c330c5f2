//! Services shipped with the library. PLACEHOLDER.
