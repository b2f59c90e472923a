//! How an argument of a store method travels in a value: its owned type,
//! the owned value made from what a caller lends, and the loan made back
//! from the owned value. The read list (`reads.rs`) and the store
//! service's calls (`switchboard-store-remote`) both turn method
//! signatures into enums this way.

/// The owned type an argument of type `$t` is kept as: `&str` as
/// `String`, `&[T]` as `Vec<T>`, anything else as itself.
#[doc(hidden)]
#[macro_export]
macro_rules! arg_type {
    (& $($t:tt)+) => { <$($t)+ as ToOwned>::Owned };
    ($($t:tt)+) => { $($t)+ };
}

/// The argument `$arg` (of type `$t`) made owned.
#[doc(hidden)]
#[macro_export]
macro_rules! arg_owned {
    ($arg:ident; & $($t:tt)+) => {
        $arg.to_owned()
    };
    ($arg:ident; $($t:tt)+) => {
        $arg
    };
}

/// The argument as a method of type `$t` takes it, from its owned value.
#[doc(hidden)]
#[macro_export]
macro_rules! arg_lent {
    ($arg:ident; & $($t:tt)+) => {
        &$arg
    };
    ($arg:ident; $($t:tt)+) => {
        $arg
    };
}
