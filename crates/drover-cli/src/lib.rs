//! drover's client side: the cluster connection ([`client`]), the
//! commands ([`commands`] for the cluster and raw keys, [`kubectl`] for the
//! kubectl-style object commands, [`logs`] for `logs` and `exec`) and what
//! they print ([`printers`], [`describe`], [`table`]).

pub mod annotate;
pub mod args;
pub mod client;
pub mod commands;
pub mod create;
pub mod custom_columns;
pub mod delete;
pub mod describe;
pub mod drain;
pub mod edit;
pub mod editor;
pub mod errors;
pub mod events;
pub mod exec;
pub mod field_selector;
pub mod jsonpath;
pub mod kubectl;
pub mod last_applied;
pub mod log;
pub mod logs;
pub mod patch;
pub mod printers;
pub mod proxy;
pub mod rollout;
pub mod rollout_deploy;
pub mod run;
pub mod scale;
pub mod snapshot;
pub mod sources;
pub mod table;
pub mod tabwriter;
pub use drover_api::timefmt;

pub use client::{Client, ClientConfig, ClientError};
pub use errors::error_text;
