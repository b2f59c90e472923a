//! An edit policy. Configuration: `edit_window_secs` (default 300). The
//! sender edits within the window; the sender or a tenant admin deletes at
//! any time; nobody else changes a message.

wit_bindgen::generate!({ path: "../../wit/0.1.0", world: "edit-policy-plugin" });

use exports::switchboard::plugin::edit_policy::{Action, Decision, Guest, Request};
use switchboard::plugin::host::config;

struct EditWindow;

impl Guest for EditWindow {
    fn decide(request: Request) -> Decision {
        let window_secs: i64 = config("edit_window_secs")
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(300);
        let is_sender = request.actor == request.sender;
        match request.action {
            Action::Edit if !is_sender => Decision::Deny("only the sender edits a message".into()),
            Action::Edit if request.now_ms - request.created_at_ms > window_secs * 1000 => {
                Decision::Deny(format!(
                    "messages can be edited for {window_secs} seconds after sending"
                ))
            }
            Action::Edit => Decision::Allow,
            Action::Delete if is_sender || request.actor_is_admin => Decision::Allow,
            Action::Delete => {
                Decision::Deny("only the sender or an admin deletes a message".into())
            }
        }
    }
}

export!(EditWindow);
