//! `tools/list` pages: the cursor is the index of a page's first tool in a
//! stable order, so the same list gives the same pages every time.

use std::ops::Range;

use rmcp::ErrorData;

/// The indexes of the page `cursor` starts (`None`: the first page) in a list
/// of `len` tools, `page_size` at most, and the cursor of the next page; a
/// cursor this paging never gave out is an `invalid_params` error.
pub fn page_range(
    cursor: Option<&str>,
    len: usize,
    page_size: usize,
) -> Result<(Range<usize>, Option<String>), ErrorData> {
    let start = match cursor {
        None => 0,
        Some(cursor) => cursor.parse::<usize>().ok().filter(|&start| start < len).ok_or_else(|| {
            let message = format!("the cursor `{}` is not one this server gave out", crate::mcp::shown(cursor));
            ErrorData::invalid_params(message, None)
        })?,
    };
    let end = start.saturating_add(page_size.max(1)).min(len);
    Ok((start..end, (end < len).then(|| end.to_string())))
}
