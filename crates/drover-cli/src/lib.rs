//! drover's client side: the cluster connection ([`client`]) and what the
//! commands print ([`commands`], [`table`]).

pub mod client;
pub mod commands;
pub mod table;

pub use client::{Client, ClientConfig, ClientError};
