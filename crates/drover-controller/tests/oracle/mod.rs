//! Independent oracles for the property tests: small, naive models of what
//! Kubernetes documents and does, written from its documentation and
//! source, never from drover's code. They use drover-api's data types (the
//! objects are the same) but none of the product's functions: no matcher,
//! no toleration check, no default tolerations, no availability or
//! lifecycle rule of drover's is called here. Slow and plain on purpose.
//!
//! - [`affinity`]: nodeSelector and required node affinity;
//! - [`tolerations`]: taints and tolerations, and a daemon pod's defaults;
//! - [`deployment`]: a rolling update's bounds (`maxSurge`,
//!   `maxUnavailable`);
//! - [`daemon`]: `NodeShouldRunDaemonPod` from the two above;
//! - [`lifecycle`]: the node lifecycle's Ready transitions and taints;
//! - [`availability`]: a pod's readiness and `minReadySeconds`;
//! - [`labels`]: label selectors (`matchLabels`, `matchExpressions`);
//! - [`scheduler`]: kube-scheduler's filters, reasons and scores for one
//!   pending pod, brute force over the whole cluster.

// Each property-test binary uses its own part of the oracles.
#![allow(dead_code)]

pub mod affinity;
pub mod availability;
pub mod daemon;
pub mod deployment;
pub mod labels;
pub mod lifecycle;
pub mod scheduler;
pub mod tolerations;
