//! Python bindings for [`tenure`]: the election engine ([`tenure::Node`])
//! with the wire framing `tenure node` speaks (plain or authenticated with
//! a cluster key) and the state file `tenure state` reads. Imported as
//! `tenure._tenure` and re-exported by the `tenure` package; the asyncio
//! driver (`tenure.aio`) is Python on top of these.
//!
//! Rules: nothing here panics on caller input (misuse raises a typed
//! exception: `ConfigError`, `StateError`, `ValueError`); a datagram that is
//! not a message for the node is dropped and counted, never raised.

// Adapters' I/O: addresses, key files and the state file.
#![allow(clippy::disallowed_types, clippy::disallowed_methods)]
// PyO3's argument conversion takes owned values and `PyRef`s by value.
#![allow(clippy::needless_pass_by_value)]

/// A simple enum as a frozen Python class whose members are named in
/// SCREAMING_SNAKE_CASE (`Role.LEADER`), compared and hashed by value.
macro_rules! value_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident,)* }) => {
        $(#[$meta])*
        #[pyclass(
            module = "tenure",
            frozen,
            eq,
            eq_int,
            hash,
            from_py_object,
            rename_all = "SCREAMING_SNAKE_CASE"
        )]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub(crate) enum $name {
            $($(#[$vmeta])* $variant,)*
        }
    };
}

mod config;
mod node;
mod state;
mod types;

use pyo3::prelude::*;

pyo3::create_exception!(
    tenure,
    ConfigError,
    pyo3::exceptions::PyValueError,
    "A configuration was refused; `setting` names the argument that was wrong."
);
pyo3::create_exception!(
    tenure,
    StateError,
    pyo3::exceptions::PyException,
    "A state file is damaged, another node's, locked, or could not be written: do not start from it."
);

/// A `ConfigError` whose `setting` attribute names the argument.
pub(crate) fn config_error(py: Python<'_>, setting: &str, message: impl Into<String>) -> PyErr {
    let err = ConfigError::new_err(message.into());
    // Setting an attribute on a fresh exception only fails when out of
    // memory; the message still names the setting then.
    let _ = err.value(py).setattr("setting", setting);
    err
}

#[pymodule]
fn _tenure(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("ConfigError", py.get_type::<ConfigError>())?;
    m.add("StateError", py.get_type::<StateError>())?;
    m.add_class::<types::HardState>()?;
    m.add_class::<types::Token>()?;
    m.add_class::<types::Lease>()?;
    m.add_class::<types::Role>()?;
    m.add_class::<types::Status>()?;
    m.add_class::<types::MembershipId>()?;
    m.add_class::<config::Config>()?;
    m.add_class::<node::InputKind>()?;
    m.add_class::<node::Input>()?;
    m.add_class::<node::ActionKind>()?;
    m.add_class::<node::Action>()?;
    m.add_class::<node::EventKind>()?;
    m.add_class::<node::Event>()?;
    m.add_class::<node::Node>()?;
    m.add_class::<state::StateFile>()?;
    m.add_function(wrap_pyfunction!(state::encode_state, m)?)?;
    m.add_function(wrap_pyfunction!(state::decode_state, m)?)?;
    Ok(())
}
