//! Reading a module's HTTP answer up to a byte budget, whatever its framing:
//! a declared `Content-Length` over the budget is refused before reading,
//! and a chunked (or lying) body is cut off as soon as it passes the budget,
//! so what one answer costs in memory is proportional to the budget.

/// Why an answer's body could not be had.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// The body is larger than the budget.
    #[error("the answer is larger than {max} bytes ({setting})")]
    TooLarge {
        /// The budget, in bytes.
        max: usize,
        /// The setting that holds it.
        setting: &'static str,
    },
    /// The connection failed while reading.
    #[error(transparent)]
    Transport(#[from] reqwest::Error),
}

/// `response`'s whole body, or [`BodyError::TooLarge`] once it passes
/// `max` bytes (the budget named `setting`).
pub async fn read_bounded(
    mut response: reqwest::Response,
    max: usize,
    setting: &'static str,
) -> Result<Vec<u8>, BodyError> {
    let too_large = || BodyError::TooLarge { max, setting };
    let declared = response.content_length();
    if declared.is_some_and(|length| length > max as u64) {
        return Err(too_large());
    }
    // Reserve what is declared (never more than the budget), so a body that
    // says its length is read without copies.
    let mut body = Vec::with_capacity(declared.map_or(0, |length| length as usize));
    while let Some(chunk) = response.chunk().await? {
        if body.len() + chunk.len() > max {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}
