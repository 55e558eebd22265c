//! The adapters (`tenure::adapters`): crash-safe storage, the host store,
//! the wire codec, authenticated framing, the node file, the std and tokio
//! drivers, their handles and their shutdown, the tokio host driver, the
//! public executor, serde, and the replicated key-value example built on
//! them.

#![cfg(feature = "adapters")]

#[cfg(feature = "sim")]
#[path = "../common/mod.rs"]
mod common;

mod framing;

mod auth;
mod codec;
mod config_file;
#[cfg(feature = "tokio")]
mod drivers;
#[cfg(feature = "sim")]
mod executor;
#[cfg(feature = "tokio")]
mod handles;
#[cfg(feature = "tokio")]
mod host_driver_tokio;
mod host_store;
#[cfg(feature = "sim")]
mod host_wire;
mod replicated_kv;
mod serde_roundtrip;
#[cfg(feature = "tokio")]
mod shutdown;
mod storage;
