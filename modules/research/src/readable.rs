//! HTML turned into what a model can read: the title, the main text as
//! plain text (headings, paragraphs, lists and tables kept), and the links.
//!
//! The main text is the page's `<main>`, `<article>` or `[role=main]`
//! element when it has one (navigation and footers are then left out),
//! else its whole body; html2text renders it and drops scripts and styles.
//! Pages nested too deeply to build a tree from in reasonable time, pages
//! whose tree would exceed its budget of nodes or time (see
//! [`crate::bounded_tree`]), and pages whose tables nest too deeply to lay
//! out in reasonable time, are read from the tokenizer pass of
//! [`crate::skim`] instead (text without layout).

use schemars::JsonSchema;
use scraper::{ElementRef, Html, Selector};
use serde::Serialize;
use url::Url;

use crate::bounded_tree::{self, TreeBudget, TreeError};
use crate::skim::{MAX_DEPTH, skim};
use crate::text::collapse_whitespace;

/// Nesting of tables beyond which a page is not laid out. html2text lays a
/// table's cells out and then copies their lines into the table around
/// it, so its time grows with the table depth times the text inside: 126
/// tables nested around 1.9 MB of text took 12 s, and the layout has no
/// deadline. Real layouts nest a few tables deep.
pub const MAX_TABLE_DEPTH: usize = 8;
/// Width, in columns, that text is wrapped to.
const WRAP_COLUMNS: usize = 100;
/// Most links returned for one page.
const MAX_LINKS: usize = 100;
/// Most characters of a link's text.
const MAX_LINK_TEXT_CHARS: usize = 200;
/// Most characters of a link's URL; longer links are left out (a cut URL
/// would point elsewhere); the page's own address is cut at it.
pub(crate) const MAX_URL_CHARS: usize = 2048;
/// Most characters of the title (of a page or a search result); a longer
/// one is cut.
pub(crate) const MAX_TITLE_CHARS: usize = 300;

/// A link found on a page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Link {
    /// The absolute http(s) URL the link points to.
    pub url: String,
    /// The link's visible text, at most 200 characters (may be empty, e.g.
    /// for an image link).
    pub text: String,
}

/// The readable parts of an HTML page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Readable {
    /// The page's `<title>`, else its `og:title`, else its first `<h1>`,
    /// at most [`MAX_TITLE_CHARS`].
    pub title: Option<String>,
    /// The main text, as plain text.
    pub text: String,
    /// Distinct http(s) links of the page, absolute, in document order.
    pub links: Vec<Link>,
    /// True when the title was cut or links were left out (past
    /// [`MAX_LINKS`], or a URL longer than [`MAX_URL_CHARS`]).
    pub cut: bool,
    /// Why the page was read with the tokenizer alone (text without
    /// layout), when it was.
    pub text_only: Option<TextOnly>,
}

/// Why a page was read without building its document tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TextOnly {
    /// Its elements nest deeper than [`MAX_DEPTH`].
    #[error("its elements nest deeper than {MAX_DEPTH}")]
    TooDeep,
    /// Its tables nest deeper than [`MAX_TABLE_DEPTH`].
    #[error("its tables nest deeper than {MAX_TABLE_DEPTH}")]
    TablesTooDeep,
    /// Its tree would exceed the budget.
    #[error(transparent)]
    Tree(#[from] TreeError),
}

/// Extracts title, main text and links from `html`, resolving relative
/// links against `base` (the page's final URL); its document tree is built
/// within `budget`.
pub fn readable(html: &str, base: &Url, budget: TreeBudget) -> Readable {
    let skimmed = skim(html);
    let document = if skimmed.too_deep {
        Err(TextOnly::TooDeep)
    } else {
        bounded_tree::parse(html, budget).map_err(TextOnly::from).and_then(|document| {
            let depth = tree_depth(&document);
            // Rebuilt formatting elements nest deeper than the source does.
            if depth.nodes > MAX_DEPTH {
                Err(TextOnly::TooDeep)
            } else if depth.tables > MAX_TABLE_DEPTH {
                Err(TextOnly::TablesTooDeep)
            } else {
                Ok(document)
            }
        })
    };
    let document = match document {
        Ok(document) => document,
        Err(reason) => {
            let (links, links_cut) = absolute_links(skimmed.links.into_iter(), base);
            let (title, title_cut) = cut_title(skimmed.title);
            let cut = links_cut || title_cut;
            return Readable { title, text: skimmed.text, links, cut, text_only: Some(reason) };
        }
    };
    let main = ["main", "article", "[role=main]"]
        .into_iter()
        .find_map(|selector| document.select(&selector_of(selector)).next());
    let main_html = main.map_or_else(|| document.html(), |element| element.html());
    let text = html2text::config::plain_no_decorate()
        .string_from_read(main_html.as_bytes(), WRAP_COLUMNS)
        // Rendering fails only for widths too narrow for the content; the
        // plain text of the tree is a faithful, unformatted fallback.
        .unwrap_or_else(|_| collapse_whitespace(&main.unwrap_or(document.root_element()).text().collect::<String>()));
    let anchor_selector = selector_of("a[href]");
    let anchors = document.select(&anchor_selector).filter_map(|anchor| {
        let href = anchor.value().attr("href")?.to_owned();
        Some((href, anchor.text().collect::<String>()))
    });
    let (links, links_cut) = absolute_links(anchors, base);
    let (title, title_cut) = cut_title(title(&document));
    Readable { title, text: text.trim().to_owned(), links, cut: links_cut || title_cut, text_only: None }
}

/// How deeply a document's nodes, and its tables, nest.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Depth {
    nodes: usize,
    tables: usize,
}

/// How deeply the nodes and the tables of `document` nest, in one pass
/// without recursion.
fn tree_depth(document: &Html) -> Depth {
    let is_table = |node: &ego_tree::NodeRef<'_, scraper::Node>| {
        node.value().as_element().is_some_and(|element| element.name() == "table")
    };
    let (mut depth, mut deepest) = (Depth::default(), Depth::default());
    for edge in document.tree.root().traverse() {
        match edge {
            ego_tree::iter::Edge::Open(node) => {
                depth.nodes += 1;
                depth.tables += usize::from(is_table(&node));
                deepest = Depth { nodes: deepest.nodes.max(depth.nodes), tables: deepest.tables.max(depth.tables) };
            }
            ego_tree::iter::Edge::Close(node) => {
                depth.nodes = depth.nodes.saturating_sub(1);
                depth.tables = depth.tables.saturating_sub(usize::from(is_table(&node)));
            }
        }
    }
    deepest
}

fn selector_of(selector: &str) -> Selector {
    Selector::parse(selector).expect("the built-in selectors are valid")
}

fn title(document: &Html) -> Option<String> {
    let element_text = |selector: &str| {
        document
            .select(&selector_of(selector))
            .map(|e: ElementRef<'_>| collapse_whitespace(&e.text().collect::<String>()))
            .find(|t| !t.is_empty())
    };
    let og_title = || {
        document
            .select(&selector_of(r#"meta[property="og:title"]"#))
            .filter_map(|e| e.value().attr("content"))
            .map(collapse_whitespace)
            .find(|t| !t.is_empty())
    };
    element_text("title").or_else(og_title).or_else(|| element_text("h1"))
}

/// `title` cut to [`MAX_TITLE_CHARS`]; true when it was cut.
fn cut_title(title: Option<String>) -> (Option<String>, bool) {
    match title {
        Some(title) if title.chars().nth(MAX_TITLE_CHARS).is_some() => {
            (Some(title.chars().take(MAX_TITLE_CHARS).collect()), true)
        }
        title => (title, false),
    }
}

/// The distinct http(s) targets of `(href, text)` pairs, resolved against
/// `base`, in order, at most [`MAX_LINKS`], each URL at most
/// [`MAX_URL_CHARS`]; true when a link was left out for either limit.
fn absolute_links(anchors: impl Iterator<Item = (String, String)>, base: &Url) -> (Vec<Link>, bool) {
    let mut seen = std::collections::HashSet::new();
    let mut too_long = false;
    let mut links = anchors
        .filter_map(|(href, text)| {
            let url = base.join(href.trim()).ok()?;
            matches!(url.scheme(), "http" | "https").then_some((String::from(url), text))
        })
        .filter(|(url, _)| {
            let fits = url.len() <= MAX_URL_CHARS;
            too_long |= !fits;
            fits
        })
        .filter(|(url, _)| seen.insert(url.clone()))
        .take(MAX_LINKS + 1)
        .map(|(url, text)| Link { url, text: collapse_whitespace(&text).chars().take(MAX_LINK_TEXT_CHARS).collect() })
        .collect::<Vec<_>>();
    let too_many = links.len() > MAX_LINKS;
    links.truncate(MAX_LINKS);
    (links, too_long || too_many)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget() -> TreeBudget {
        TreeBudget { max_nodes: 50_000, deadline: std::time::Instant::now() + std::time::Duration::from_secs(60) }
    }

    fn base() -> Url {
        Url::parse("https://example.org/docs/page.html").unwrap()
    }

    #[test]
    fn title_text_and_links_are_extracted() {
        let html = r#"<!doctype html><html><head><title> The  Page </title>
            <style>p { color: red }</style><script>var secret = "not text";</script></head>
            <body><nav><a href="/home">Home</a></nav>
            <main><h1>Heading</h1><p>First paragraph with <a href="other.html">a link</a>.</p>
            <ul><li>one</li><li>two</li></ul></main>
            <footer><a href="mailto:x@example.org">mail</a><a href="https://example.org/docs/other.html">again</a></footer>
            </body></html>"#;
        let page = readable(html, &base(), budget());
        assert_eq!(page.title.as_deref(), Some("The Page"));
        assert!(page.text.contains("Heading"), "{}", page.text);
        assert!(page.text.contains("First paragraph with"), "{}", page.text);
        assert!(page.text.contains("one") && page.text.contains("two"));
        assert!(!page.text.contains("Home"), "navigation outside <main> is left out: {}", page.text);
        assert!(!page.text.contains("secret") && !page.text.contains("color"), "{}", page.text);
        let urls: Vec<&str> = page.links.iter().map(|l| l.url.as_str()).collect();
        assert_eq!(urls, ["https://example.org/home", "https://example.org/docs/other.html"]);
        assert_eq!(page.links[1].text, "a link");
    }

    #[test]
    fn pages_without_main_use_the_body_and_fall_back_for_the_title() {
        let page = readable(r#"<meta property="og:title" content="OG title"><p>Body text</p>"#, &base(), budget());
        assert_eq!(page.title.as_deref(), Some("OG title"));
        assert_eq!(page.text, "Body text");
        let page = readable("<h1>Only a heading</h1>", &base(), budget());
        assert_eq!(page.title.as_deref(), Some("Only a heading"));
        assert_eq!(readable("", &base(), budget()).title, None);
    }

    #[test]
    fn hostile_markup_is_survived() {
        let deep = format!("{}<a href=/in>deep</a>{}", "<div>".repeat(20_000), "</div>".repeat(20_000));
        let page = readable(&format!("<title>Deep</title>{deep}"), &base(), budget());
        assert_eq!(page.title.as_deref(), Some("Deep"));
        assert_eq!(page.text, "deep");
        assert_eq!(page.links, [Link { url: "https://example.org/in".into(), text: "deep".into() }]);
        assert_eq!(page.text_only, Some(TextOnly::TooDeep));
        let many_links: String = (0..500).map(|i| format!("<a href=\"/p{i}\">{i}</a>")).collect();
        let page = readable(&many_links, &base(), budget());
        assert_eq!((page.links.len(), page.cut), (MAX_LINKS, true));
        let long =
            format!("<title>{}</title><a href=\"/{}\">long</a><a href=/ok>ok</a>", "t".repeat(5000), "u".repeat(3000));
        let page = readable(&long, &base(), budget());
        assert_eq!(page.title.map(|t| t.chars().count()), Some(MAX_TITLE_CHARS));
        assert_eq!(page.links, [Link { url: "https://example.org/ok".into(), text: "ok".into() }]);
        assert!(page.cut);
        let broken =
            readable("<a href=\"http://[::1\">x</a><a href=\"javascript:alert(1)\">y</a><p>ok", &base(), budget());
        assert!(broken.links.is_empty());
        assert!(broken.text.ends_with("ok"), "{}", broken.text);
    }

    #[test]
    fn pages_whose_tree_exceeds_the_budget_are_read_as_text() {
        let formatting: String = (0..1000).map(|i| format!("<p><b id={i}>x{i}</p>")).collect();
        let page = readable(&format!("<title>F</title>{formatting}<a href=/end>end</a>"), &base(), budget());
        assert_eq!(page.text_only, Some(TextOnly::Tree(TreeError::TooManyNodes(50_000))));
        assert_eq!(page.title.as_deref(), Some("F"));
        assert!(page.text.starts_with("x0\nx1\n") && page.text.ends_with("x999\nend"), "{}", page.text);
        assert_eq!(page.links.len(), 1);
        let rebuilt_deep: String = (0..600).map(|i| format!("<p><b id={i}>x</p>")).collect();
        let page = readable(&rebuilt_deep, &base(), TreeBudget { max_nodes: 1_000_000, ..budget() });
        assert_eq!(page.text_only, Some(TextOnly::TooDeep), "600 rebuilt <b> nest 600 deep in the tree");
    }

    #[test]
    fn pages_whose_tables_nest_too_deeply_are_read_as_text() {
        let nested = |depth: usize| format!("{}cell text{}", "<table><tr><td>".repeat(depth), "</table>".repeat(depth));
        let page = readable(&nested(MAX_TABLE_DEPTH + 1), &base(), budget());
        assert_eq!((page.text_only, page.text.as_str()), (Some(TextOnly::TablesTooDeep), "cell text"));
        let page = readable(&nested(MAX_TABLE_DEPTH), &base(), budget());
        assert_eq!(page.text_only, None, "laid out up to the limit");
        assert!(page.text.contains("cell text"), "{}", page.text);
        let siblings = format!("{}<p>after", nested(3).repeat(MAX_TABLE_DEPTH * 4));
        assert_eq!(readable(&siblings, &base(), budget()).text_only, None, "tables side by side do not add up");
    }
}
