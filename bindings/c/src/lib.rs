//! Placeholder until this part is built.
