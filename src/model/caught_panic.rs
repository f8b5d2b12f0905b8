//! The message of a panic caught inside a dependency (`tokenizers`,
//! minijinja), for the error that replaces it.

use std::any::Any;

/// The panic's message, when it carried text.
pub fn message(payload: &(dyn Any + Send)) -> &str {
    payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("no message")
}
