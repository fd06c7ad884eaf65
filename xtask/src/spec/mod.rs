//! The YAML specs: their model, loading with positions, validation and writing.

pub mod error;
pub mod load;
pub mod model;
pub mod release;
pub mod text;
pub mod validate;
pub mod warp;
pub mod write;
