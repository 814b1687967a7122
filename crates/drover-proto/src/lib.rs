//! The generated gRPC code of `proto/drover.proto` (package `drover.v1`).
//!
//! Everything on the wire between clients, servers and (later) agents is
//! defined there; this crate only includes what tonic/prost generate.
#![allow(clippy::all, missing_docs)]

pub mod v1 {
    tonic::include_proto!("drover.v1");
}
pub use v1::*;
