//! An edit policy, written with the SDK. Configuration:
//! `edit_window_secs` (default 300). The sender edits within the window;
//! the sender or a tenant admin deletes at any time; nobody else changes a
//! message.

use switchboard_plugin::edit_policy::{Action, Decision, EditPolicy, Request};

struct EditWindow;

impl EditPolicy for EditWindow {
    fn decide(request: Request) -> Decision {
        let window_secs: i64 = switchboard_plugin::config_parse("edit_window_secs").unwrap_or(300);
        match request.action {
            Action::Edit if !request.by_sender() => {
                Decision::deny("only the sender edits a message")
            }
            Action::Edit if request.age_ms() > window_secs * 1000 => Decision::deny(format!(
                "messages can be edited for {window_secs} seconds after sending"
            )),
            Action::Edit => Decision::Allow,
            Action::Delete if request.by_sender() || request.actor_is_admin => Decision::Allow,
            Action::Delete => Decision::deny("only the sender or an admin deletes a message"),
        }
    }
}

switchboard_plugin::edit_policy!(EditWindow);
