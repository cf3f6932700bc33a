//! Image decoding for Sluice (placeholder until the codec module lands).
