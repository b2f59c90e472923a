//! The cursor of a resumable full scan: the driver's paging state, as hex.

use scylla::response::PagingState;
use switchboard_store::{StoreError, StoreResult};

/// A resumable scan's cursor is the driver's paging state, as hex.
pub(crate) fn cursor_encode(state: Option<PagingState>) -> Option<String> {
    let state = state?;
    match state.as_bytes_slice() {
        Some(bytes) => Some(bytes.iter().map(|b| format!("{b:02x}")).collect()),
        None => {
            tracing::warn!("scylla returned more pages without a paging state");
            None
        }
    }
}

pub(crate) fn cursor_decode(cursor: Option<String>) -> StoreResult<PagingState> {
    let Some(text) = cursor else {
        return Ok(PagingState::start());
    };
    let bad = || StoreError::Corrupt(format!("bad scan cursor {text:?}"));
    if text.is_empty() || !text.len().is_multiple_of(2) {
        return Err(bad());
    }
    let bytes = (0..text.len())
        .step_by(2)
        .map(|i| {
            text.get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        })
        .collect::<Option<Vec<u8>>>()
        .ok_or_else(bad)?;
    Ok(PagingState::new_from_raw_bytes(bytes))
}

/// A scan step's page size: at least one row.
pub(crate) fn page_size(budget: usize) -> i32 {
    i32::try_from(budget.max(1)).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn scan_cursors_round_trip_and_bad_ones_are_refused() {
        let state = PagingState::new_from_raw_bytes(vec![0u8, 1, 0x7f, 0xfe, 0xff]);
        let text = cursor_encode(Some(state)).unwrap();
        assert_eq!(text, "00017ffeff");
        let back = cursor_decode(Some(text)).unwrap();
        assert_eq!(
            back.as_bytes_slice().map(|b| b.to_vec()),
            Some(vec![0u8, 1, 0x7f, 0xfe, 0xff])
        );
        for bad in ["", "abc", "zz", "é0"] {
            assert!(cursor_decode(Some(bad.into())).is_err(), "{bad}");
        }
        assert!(cursor_decode(None).unwrap().as_bytes_slice().is_none());
        assert_eq!(cursor_encode(None), None);
    }
}
