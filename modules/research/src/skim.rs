//! A linear-time pass over HTML with the HTML tokenizer alone: it measures
//! how deeply elements nest and, for pages nested too deeply to build a
//! tree from, collects their text, title and links.
//!
//! Building the document tree costs time proportional to the number of
//! elements times the nesting depth (the HTML standard's scope checks walk
//! the stack of open elements), so a hostile page of a few megabytes of
//! `<div>` could keep a CPU busy for many minutes. Browsers cap the depth
//! for the same reason (WebKit at 512); pages deeper than [`MAX_DEPTH`] are
//! read from this pass instead.

use std::cell::RefCell;
use std::collections::HashMap;

use html5ever::tendril::StrTendril;
use html5ever::tokenizer::states::RawKind;
use html5ever::tokenizer::{BufferQueue, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts};
use html5ever::{LocalName, local_name};

use crate::text::collapse_whitespace;

/// Nesting beyond which a page is not parsed into a tree.
pub const MAX_DEPTH: usize = 512;

/// What one tokenizer pass found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Skimmed {
    /// True when elements nest deeper than [`MAX_DEPTH`].
    pub too_deep: bool,
    /// The text outside scripts and styles, a line per block element.
    pub text: String,
    /// The text of the first `<title>`.
    pub title: Option<String>,
    /// Every `<a href>`: the raw href and the link's text.
    pub links: Vec<(String, String)>,
}

/// Tokenizes `html` once.
pub fn skim(html: &str) -> Skimmed {
    let tokenizer = Tokenizer::new(Collector::default(), TokenizerOpts::default());
    let input = BufferQueue::default();
    input.push_back(StrTendril::from_slice(html));
    let _ = tokenizer.feed(&input);
    tokenizer.end();
    tokenizer.sink.state.into_inner().finish()
}

/// The tokenizer's sink; the tokenizer hands it tokens through `&self`.
#[derive(Default)]
struct Collector {
    state: RefCell<State>,
}

#[derive(Default)]
struct State {
    /// Open elements, innermost last, at most `MAX_DEPTH + 1` of them.
    open: Vec<LocalName>,
    /// How many of each name are in `open`, to match end tags in O(1).
    open_counts: HashMap<LocalName, usize>,
    too_deep: bool,
    /// Inside `<script>`, `<style>` and the like: their text is not page text.
    hidden: Option<LocalName>,
    text: String,
    title: Option<String>,
    in_title: bool,
    /// The link being read: its href and its text so far.
    link: Option<(String, String)>,
    links: Vec<(String, String)>,
}

impl TokenSink for Collector {
    type Handle = ();

    fn process_token(&self, token: Token, _line_number: u64) -> TokenSinkResult<()> {
        let mut state = self.state.borrow_mut();
        match token {
            Token::TagToken(tag) if tag.kind == TagKind::StartTag => {
                let href = (tag.name == local_name!("a"))
                    .then(|| tag.attrs.iter().find(|a| a.name.local == local_name!("href")))
                    .flatten()
                    .map(|a| a.value.to_string());
                return state.start(tag.name, href);
            }
            Token::TagToken(tag) => state.end(&tag.name),
            Token::CharacterTokens(text) => state.characters(&text),
            _ => {}
        }
        TokenSinkResult::Continue
    }
}

impl State {
    fn start(&mut self, name: LocalName, href: Option<String>) -> TokenSinkResult<()> {
        if is_block(&name) {
            self.text.push('\n');
        }
        if let Some(href) = href {
            self.finish_link();
            self.link = Some((href, String::new()));
        }
        // The tokenizer must be told which elements hold raw text, as the
        // tree builder would; their content is never page text.
        let raw = match &name {
            n if *n == local_name!("script") => Some(RawKind::ScriptData),
            n if [
                local_name!("style"),
                local_name!("xmp"),
                local_name!("iframe"),
                local_name!("noembed"),
                local_name!("noframes"),
                local_name!("noscript"),
            ]
            .contains(n) =>
            {
                Some(RawKind::Rawtext)
            }
            n if *n == local_name!("title") || *n == local_name!("textarea") => Some(RawKind::Rcdata),
            _ => None,
        };
        if name == local_name!("title") {
            self.in_title = self.title.is_none();
        } else if raw.is_some() {
            self.hidden = Some(name.clone());
        }
        self.push(name);
        raw.map_or(TokenSinkResult::Continue, TokenSinkResult::RawData)
    }

    fn push(&mut self, name: LocalName) {
        if is_void(&name) || self.too_deep {
            return;
        }
        // `<p>`, `<li>` and the like close an open sibling of the same name.
        if closes_itself(&name) && self.open.last() == Some(&name) {
            self.pop();
        }
        *self.open_counts.entry(name.clone()).or_default() += 1;
        self.open.push(name);
        self.too_deep = self.open.len() > MAX_DEPTH;
    }

    fn pop(&mut self) -> Option<LocalName> {
        let name = self.open.pop()?;
        if let Some(count) = self.open_counts.get_mut(&name) {
            *count -= 1;
        }
        Some(name)
    }

    fn end(&mut self, name: &LocalName) {
        if is_block(name) {
            self.text.push('\n');
        }
        if *name == local_name!("a") {
            self.finish_link();
        }
        if *name == local_name!("title") {
            self.in_title = false;
        }
        if self.hidden.as_ref() == Some(name) {
            self.hidden = None;
        }
        if self.open_counts.get(name).copied().unwrap_or(0) > 0 {
            while self.pop().is_some_and(|popped| popped != *name) {}
        }
    }

    fn characters(&mut self, text: &str) {
        if self.in_title {
            self.title.get_or_insert_with(String::new).push_str(text);
        } else if self.hidden.is_none() {
            self.text.push_str(text);
            if let Some((_, link_text)) = &mut self.link {
                link_text.push_str(text);
            }
        }
    }

    fn finish_link(&mut self) {
        if let Some(link) = self.link.take() {
            self.links.push(link);
        }
    }

    fn finish(mut self) -> Skimmed {
        self.finish_link();
        let lines: Vec<String> = self.text.lines().map(collapse_whitespace).filter(|line| !line.is_empty()).collect();
        let title = self.title.map(|t| collapse_whitespace(&t)).filter(|t| !t.is_empty());
        Skimmed { too_deep: self.too_deep, text: lines.join("\n"), title, links: self.links }
    }
}

/// Elements that never have content.
fn is_void(name: &LocalName) -> bool {
    matches!(
        name.as_ref(),
        "area"
            | "base"
            | "br"
            | "col"
            | "embed"
            | "hr"
            | "img"
            | "input"
            | "link"
            | "meta"
            | "param"
            | "source"
            | "track"
            | "wbr"
    )
}

/// Elements whose start tag ends an open element of the same name.
fn closes_itself(name: &LocalName) -> bool {
    matches!(name.as_ref(), "p" | "li" | "dt" | "dd" | "option" | "tr" | "td" | "th")
}

/// Elements that start a new line of text.
fn is_block(name: &LocalName) -> bool {
    matches!(
        name.as_ref(),
        "p" | "div"
            | "br"
            | "li"
            | "ul"
            | "ol"
            | "dl"
            | "dt"
            | "dd"
            | "tr"
            | "table"
            | "section"
            | "article"
            | "main"
            | "header"
            | "footer"
            | "nav"
            | "aside"
            | "blockquote"
            | "pre"
            | "h1"
            | "h2"
            | "h3"
            | "h4"
            | "h5"
            | "h6"
            | "hr"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_pages_are_not_too_deep() {
        let page = "<html><head><title>T</title></head><body><ul><li>a<li>b<li>c</ul><p>x<p>y<p>z</body></html>";
        let skimmed = skim(&page.repeat(2000));
        assert!(!skimmed.too_deep);
        let unclosed_items: String = (0..5000).map(|i| format!("<li>{i}")).collect();
        assert!(!skim(&unclosed_items).too_deep, "unclosed list items are siblings");
    }

    #[test]
    fn deep_nesting_is_detected_in_linear_time() {
        let deep = format!("{}deep{}", "<div>".repeat(40_000), "</div>".repeat(40_000));
        let started = std::time::Instant::now();
        let skimmed = skim(&deep);
        assert!(skimmed.too_deep);
        assert_eq!(skimmed.text, "deep");
        // Not a timing assertion: it shows the figure when the test is run with --nocapture.
        eprintln!("skimmed {} bytes in {:?}", deep.len(), started.elapsed());
    }

    #[test]
    fn text_title_and_links_leave_scripts_and_styles_out() {
        let html = r#"<title> A  title </title><style>p{x:1}</style><script>if (a<b) { document.write("<p>no</p>") }</script>
            <p>First <a href="/x">link <b>text</b></a> after</p><div>Second<br>line</div><noscript>ns</noscript>"#;
        let skimmed = skim(html);
        assert_eq!(skimmed.title.as_deref(), Some("A title"));
        assert_eq!(skimmed.text, "First link text after\nSecond\nline");
        assert_eq!(skimmed.links, [("/x".to_owned(), "link text".to_owned())]);
    }
}
