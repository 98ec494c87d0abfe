//! Building a page's document tree within a budget of nodes and time.
//!
//! The tokenizer pass of [`crate::skim`] bounds how deeply the source nests,
//! but the tree builder can create far more nodes than the source has tags:
//! on `<p><b id=1>x</p><p><b id=2>x</p>…` every unclosed `<b>` stays in the
//! list of active formatting elements and is rebuilt inside each later
//! paragraph, so N repetitions (18 KB for N = 1,000) make N²/2 elements and
//! gigabytes of memory. [`parse`] wraps the tree sink in [`Bounded`], which
//! counts the nodes created and watches a deadline; past either, it stops
//! growing the tree (the parser gets one reused node per element name and
//! every change to the tree is ignored), the input is no longer fed, and
//! the caller reads the page from the tokenizer pass instead.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::time::Instant;

use html5ever::tendril::{StrTendril, TendrilSink};
use html5ever::tree_builder::{ElementFlags, NodeOrText, QuirksMode, TreeSink};
use html5ever::{Attribute, ParseOpts, QualName, driver};
use scraper::{Html, HtmlTreeSink};

/// Bytes of HTML fed to the parser at a time: the budget is checked
/// between pieces, so a piece bounds the work done after it is spent.
const PIECE_BYTES: usize = 512;
/// Nodes created between two looks at the clock.
const CLOCK_EVERY_NODES: usize = 1024;

/// The budget of one tree.
#[derive(Debug, Clone, Copy)]
pub struct TreeBudget {
    /// Most elements and comments the tree may have.
    pub max_nodes: usize,
    /// When building must stop, however far it got.
    pub deadline: Instant,
}

/// Why a tree was not built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TreeError {
    /// The page makes more nodes than the budget allows.
    #[error("the page makes more than HTML_MAX_NODES ({0}) document nodes")]
    TooManyNodes(usize),
    /// The deadline passed while building.
    #[error("building the page's document tree did not finish before the call's deadline")]
    Deadline,
}

/// Parses `html` into a tree of at most `budget.max_nodes` nodes, giving up
/// at `budget.deadline`.
pub fn parse(html: &str, budget: TreeBudget) -> Result<Html, TreeError> {
    let mut parser =
        driver::parse_document(Bounded::new(HtmlTreeSink::new(Html::new_document()), budget), ParseOpts::default());
    for piece in pieces(html, PIECE_BYTES) {
        parser.process(StrTendril::from_slice(piece));
        if let Some(error) = parser.tokenizer.sink.sink.stopped.get() {
            return Err(error);
        }
    }
    let (html, stopped) = parser.finish();
    stopped.map_or(Ok(html), Err)
}

/// `text` cut into pieces of about `size` bytes, on character boundaries.
fn pieces(text: &str, size: usize) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut end = size.min(rest.len());
        while !rest.is_char_boundary(end) {
            end += 1;
        }
        let (piece, tail) = rest.split_at(end);
        rest = tail;
        Some(piece)
    })
}

/// A tree sink that passes everything on to `inner` until the budget is
/// spent, and from then on builds nothing.
pub struct Bounded<S: TreeSink> {
    inner: S,
    budget: TreeBudget,
    created: Cell<usize>,
    stopped: Cell<Option<TreeError>>,
    /// Once stopped: one node per element name, handed out again and again.
    spare_elements: RefCell<HashMap<QualName, S::Handle>>,
    /// Once stopped: the one comment handed out for comments and processing instructions.
    spare_comment: RefCell<Option<S::Handle>>,
}

impl<S: TreeSink> Bounded<S> {
    /// Wraps `inner` with `budget`.
    pub fn new(inner: S, budget: TreeBudget) -> Self {
        Self {
            inner,
            budget,
            created: Cell::new(0),
            stopped: Cell::new(None),
            spare_elements: RefCell::new(HashMap::new()),
            spare_comment: RefCell::new(None),
        }
    }

    /// Counts one more node; false once the budget is spent.
    fn admit(&self) -> bool {
        if self.stopped.get().is_some() {
            return false;
        }
        let created = self.created.get() + 1;
        self.created.set(created);
        if created > self.budget.max_nodes {
            self.stopped.set(Some(TreeError::TooManyNodes(self.budget.max_nodes)));
        } else if created.is_multiple_of(CLOCK_EVERY_NODES) && Instant::now() >= self.budget.deadline {
            self.stopped.set(Some(TreeError::Deadline));
        }
        self.stopped.get().is_none()
    }

    /// Whether the tree may still change.
    fn building(&self) -> bool {
        self.stopped.get().is_none()
    }

    fn spare_comment(&self) -> S::Handle {
        self.spare_comment.borrow_mut().get_or_insert_with(|| self.inner.create_comment(StrTendril::new())).clone()
    }
}

impl<S: TreeSink> TreeSink for Bounded<S> {
    type Handle = S::Handle;
    type Output = (S::Output, Option<TreeError>);
    type ElemName<'a>
        = S::ElemName<'a>
    where
        Self: 'a;

    fn finish(self) -> Self::Output {
        (self.inner.finish(), self.stopped.get())
    }

    fn parse_error(&self, msg: Cow<'static, str>) {
        self.inner.parse_error(msg);
    }

    fn get_document(&self) -> Self::Handle {
        self.inner.get_document()
    }

    fn elem_name<'a>(&'a self, target: &'a Self::Handle) -> Self::ElemName<'a> {
        self.inner.elem_name(target)
    }

    fn create_element(&self, name: QualName, attrs: Vec<Attribute>, flags: ElementFlags) -> Self::Handle {
        if self.admit() {
            return self.inner.create_element(name, attrs, flags);
        }
        let mut spares = self.spare_elements.borrow_mut();
        match spares.get(&name) {
            Some(spare) => spare.clone(),
            None => {
                let spare = self.inner.create_element(name.clone(), Vec::new(), flags);
                spares.insert(name, spare.clone());
                spare
            }
        }
    }

    fn create_comment(&self, text: StrTendril) -> Self::Handle {
        if self.admit() { self.inner.create_comment(text) } else { self.spare_comment() }
    }

    fn create_pi(&self, target: StrTendril, data: StrTendril) -> Self::Handle {
        if self.admit() { self.inner.create_pi(target, data) } else { self.spare_comment() }
    }

    fn append(&self, parent: &Self::Handle, child: NodeOrText<Self::Handle>) {
        if self.building() {
            self.inner.append(parent, child);
        }
    }

    fn append_based_on_parent_node(
        &self,
        element: &Self::Handle,
        prev_element: &Self::Handle,
        child: NodeOrText<Self::Handle>,
    ) {
        if self.building() {
            self.inner.append_based_on_parent_node(element, prev_element, child);
        }
    }

    fn append_doctype_to_document(&self, name: StrTendril, public_id: StrTendril, system_id: StrTendril) {
        if self.building() {
            self.inner.append_doctype_to_document(name, public_id, system_id);
        }
    }

    fn mark_script_already_started(&self, node: &Self::Handle) {
        self.inner.mark_script_already_started(node);
    }

    fn pop(&self, node: &Self::Handle) {
        self.inner.pop(node);
    }

    fn get_template_contents(&self, target: &Self::Handle) -> Self::Handle {
        self.inner.get_template_contents(target)
    }

    fn same_node(&self, x: &Self::Handle, y: &Self::Handle) -> bool {
        self.inner.same_node(x, y)
    }

    fn set_quirks_mode(&self, mode: QuirksMode) {
        self.inner.set_quirks_mode(mode);
    }

    fn append_before_sibling(&self, sibling: &Self::Handle, new_node: NodeOrText<Self::Handle>) {
        if self.building() {
            self.inner.append_before_sibling(sibling, new_node);
        }
    }

    fn add_attrs_if_missing(&self, target: &Self::Handle, attrs: Vec<Attribute>) {
        if self.building() {
            self.inner.add_attrs_if_missing(target, attrs);
        }
    }

    fn associate_with_form(
        &self,
        target: &Self::Handle,
        form: &Self::Handle,
        nodes: (&Self::Handle, Option<&Self::Handle>),
    ) {
        if self.building() {
            self.inner.associate_with_form(target, form, nodes);
        }
    }

    fn remove_from_parent(&self, target: &Self::Handle) {
        if self.building() {
            self.inner.remove_from_parent(target);
        }
    }

    fn reparent_children(&self, node: &Self::Handle, new_parent: &Self::Handle) {
        if self.building() {
            self.inner.reparent_children(node, new_parent);
        }
    }

    fn is_mathml_annotation_xml_integration_point(&self, handle: &Self::Handle) -> bool {
        self.inner.is_mathml_annotation_xml_integration_point(handle)
    }

    fn set_current_line(&self, line_number: u64) {
        self.inner.set_current_line(line_number);
    }

    fn allow_declarative_shadow_roots(&self, intended_parent: &Self::Handle) -> bool {
        self.inner.allow_declarative_shadow_roots(intended_parent)
    }

    fn attach_declarative_shadow(&self, location: &Self::Handle, template: &Self::Handle, attrs: &[Attribute]) -> bool {
        self.building() && self.inner.attach_declarative_shadow(location, template, attrs)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn budget(max_nodes: usize) -> TreeBudget {
        TreeBudget { max_nodes, deadline: Instant::now() + Duration::from_secs(60) }
    }

    /// `<p><b id=N>x</p>` repeated: N²/2 elements from N·18 bytes.
    fn formatting(repetitions: usize) -> String {
        (0..repetitions).map(|i| format!("<p><b id={i}>x</p>")).collect()
    }

    #[test]
    fn ordinary_pages_are_built_whole() {
        let page = "<title>T</title><main><p>One <b>two</b></p><ul><li>a<li>b</ul></main>";
        let html = parse(page, budget(1000)).unwrap();
        assert_eq!(html, Html::parse_document(page), "the same tree as an unbounded parse");
        let long: String = "<p>x <a href=/y>y</a> é</p>".repeat(2000);
        assert_eq!(parse(&long, budget(100_000)).unwrap(), Html::parse_document(&long), "pieces join up");
    }

    #[test]
    fn formatting_elements_rebuilt_in_every_paragraph_stop_at_the_node_budget() {
        let started = Instant::now();
        assert_eq!(parse(&formatting(4000), budget(200_000)), Err(TreeError::TooManyNodes(200_000)));
        // Not a timing assertion: the figure shows with --nocapture.
        eprintln!("4,000 repetitions stopped in {:?}", started.elapsed());
        assert!(parse(&formatting(100), budget(200_000)).is_ok(), "about 5,000 nodes are within the budget");
    }

    #[test]
    fn a_passed_deadline_stops_building() {
        let past = TreeBudget { max_nodes: usize::MAX, deadline: Instant::now() };
        assert_eq!(parse(&formatting(1000), past), Err(TreeError::Deadline));
    }

    #[test]
    fn pieces_keep_characters_whole() {
        let text = "aé€😀".repeat(100);
        let pieces: Vec<&str> = pieces(&text, 7).collect();
        assert_eq!(pieces.concat(), text);
        assert!(pieces.iter().all(|p| p.len() >= 7 || std::ptr::eq(*p, *pieces.last().unwrap())));
        assert_eq!(super::pieces("", 7).count(), 0);
    }
}
