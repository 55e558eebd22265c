//! Adapters that execute the core's actions (feature `adapters`). They
//! decide nothing: the protocol lives in [`Node`](crate::Node).
//!
//! - [`clock`]: the [`SuspendAwareClock`](clock::SuspendAwareClock) both
//!   drivers read `now` from (`CLOCK_BOOTTIME` on Linux and Android);
//! - `retry` (internal): every system call a signal interrupts is retried;
//! - [`codec`]: the wire envelope (postcard) and its typed decode errors;
//! - [`auth`]: cluster keys, key files, incarnations, and why tagged
//!   frames cannot be forged or replayed;
//! - [`storage`]: the [`Storage`](storage::Storage) trait, crash-safe
//!   [`FileStorage`](storage::FileStorage) and [`MemStorage`](storage::MemStorage);
//! - [`host_store`]: [`HostStore`](host_store::HostStore), the durable
//!   state of every group of a [`Host`](crate::host::Host): one log, one
//!   fsync per write, compacted;
//! - [`udp`]: UDP transport over `std::net`;
//! - [`host_driver`]: a one-thread std driver for a
//!   [`Host`](crate::host::Host) and its [`HostHandle`](host_driver::HostHandle);
//! - `host_driver_tokio` (feature `tokio`): the same as one tokio task,
//!   with an async handle;
//! - [`host_wire`]: a host's batches on the wire (split into datagrams,
//!   authenticated like a node's messages) and their UDP transport;
//! - [`executor`]: the action-execution loop ([`Executor`](executor::Executor))
//!   both drivers use, public for custom event loops, with synchronous or
//!   asynchronous writes;
//! - [`driver`]: a one-thread std driver and its [`Handle`](driver::Handle);
//! - `driver_tokio` (feature `tokio`): the same over tokio;
//! - [`config`]: the TOML node configuration file.

// Adapters do the I/O the core must not: the clippy.toml bans on sockets,
// files and clocks guard the core, not this module.
#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

pub mod auth;
pub mod clock;
pub mod codec;
pub mod config;
pub mod driver;
#[cfg(feature = "tokio")]
pub mod driver_tokio;
pub mod executor;
pub mod host_driver;
#[cfg(feature = "tokio")]
pub mod host_driver_tokio;
mod host_loop;
pub mod host_store;
pub mod host_wire;
pub(crate) mod retry;
pub mod storage;
pub mod udp;
