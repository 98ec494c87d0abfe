//! Turning a page's bytes into text in the right character encoding.
//!
//! The order follows the HTML standard's encoding sniffing: a byte order
//! mark, then the `charset` of the `Content-Type` header, then (for HTML) a
//! `<meta charset>` or `<meta http-equiv="content-type">` in the first
//! 1024 bytes, then UTF-8 when the bytes are valid UTF-8, else
//! windows-1252, the web's legacy default.

use encoding_rs::{Encoding, UTF_8, WINDOWS_1252};
use scraper::{Html, Selector};

/// How many leading bytes are searched for a `<meta>` declaration.
const META_PRESCAN_BYTES: usize = 1024;

/// `body` decoded to text, with the name of the encoding used; malformed
/// sequences become U+FFFD.
pub fn decode(body: &[u8], header_charset: Option<&str>, is_html: bool) -> (String, &'static str) {
    let declared = header_charset
        .and_then(|label| Encoding::for_label(label.trim().as_bytes()))
        .or_else(|| is_html.then(|| meta_charset(body)).flatten());
    let fallback = || if std::str::from_utf8(body).is_ok() { UTF_8 } else { WINDOWS_1252 };
    // `output_encoding` maps UTF-16 and `replacement` labels to UTF-8, as
    // browsers do for declarations in an ASCII-compatible byte stream.
    let encoding = declared.map_or_else(fallback, Encoding::output_encoding);
    // `decode` lets a byte order mark override the declared encoding.
    let (text, used, _had_errors) = encoding.decode(body);
    (text.into_owned(), used.name())
}

/// The encoding a page's `<meta>` element declares, if any.
fn meta_charset(body: &[u8]) -> Option<&'static Encoding> {
    let head = String::from_utf8_lossy(&body[..body.len().min(META_PRESCAN_BYTES)]);
    let document = Html::parse_document(&head);
    let meta = Selector::parse("meta").expect("a valid selector");
    document.select(&meta).find_map(|element| {
        let element = element.value();
        if let Some(label) = element.attr("charset") {
            return Encoding::for_label(label.trim().as_bytes());
        }
        let is_content_type = element.attr("http-equiv").is_some_and(|v| v.trim().eq_ignore_ascii_case("content-type"));
        let content = element.attr("content").filter(|_| is_content_type)?;
        let media_type: mime::Mime = content.parse().ok()?;
        Encoding::for_label(media_type.get_param(mime::CHARSET)?.as_str().as_bytes())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_charset_wins_over_meta() {
        let body = b"<meta charset=utf-8><p>caf\xe9</p>";
        let (text, encoding) = decode(body, Some("ISO-8859-1"), true);
        assert!(text.contains("caf\u{e9}"), "{text}");
        assert_eq!(encoding, "windows-1252");
    }

    #[test]
    fn meta_declarations_are_read() {
        let (text, encoding) =
            decode(b"<head><meta charset=\"windows-1251\"></head>\xcf\xf0\xe8\xe2\xe5\xf2", None, true);
        assert!(text.ends_with("Привет"), "{text}");
        assert_eq!(encoding, "windows-1251");
        let http_equiv = b"<meta http-equiv=\"Content-Type\" content=\"text/html; charset=shift_jis\">\x93\xfa\x96\x7b";
        let (text, encoding) = decode(http_equiv, None, true);
        assert!(text.ends_with("日本"), "{text}");
        assert_eq!(encoding, "Shift_JIS");
    }

    #[test]
    fn undeclared_text_is_utf8_when_valid_else_windows_1252() {
        assert_eq!(decode("naïve".as_bytes(), None, false), ("naïve".to_owned(), "UTF-8"));
        assert_eq!(decode(b"na\xefve", None, false), ("naïve".to_owned(), "windows-1252"));
    }

    #[test]
    fn a_byte_order_mark_overrides_the_declaration() {
        let (text, encoding) = decode(b"\xef\xbb\xbfcaf\xc3\xa9", Some("iso-8859-1"), false);
        assert_eq!((text.as_str(), encoding), ("café", "UTF-8"));
    }

    #[test]
    fn meta_is_ignored_for_plain_text_and_unknown_labels() {
        let (_, encoding) = decode(b"<meta charset=windows-1251>", None, false);
        assert_eq!(encoding, "UTF-8");
        let (_, encoding) = decode(b"abc", Some("no-such-charset"), true);
        assert_eq!(encoding, "UTF-8");
    }
}
