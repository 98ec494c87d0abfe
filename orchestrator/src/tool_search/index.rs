//! A small BM25F index over tool definitions: three fields per tool (its
//! name, its description, its parameters' names and descriptions), weighted
//! so a word of the name counts more than one of a description. Built once
//! per set of tools; each search scores only the tools the caller may see,
//! with statistics (document frequency, average lengths) over those alone,
//! so the ranking never depends on tools the caller cannot see.
//!
//! Our own rather than a search crate: tantivy is far too heavy for a few
//! thousand short documents, and the light BM25 crates index one text per
//! document (no field weights), hash terms, and break ties in hash order;
//! this one ranks deterministically (ties in listing order).

use std::collections::HashMap;

use module_sdk::contract::ToolDefinition;
use provider_formats::compile::input_schema;
use serde_json::Value;

use super::terms::terms;

/// The fields of a tool, in the order of [`WEIGHTS`].
const FIELDS: usize = 3;
/// How much a matching word counts in the name, the description and the parameters.
const WEIGHTS: [f64; FIELDS] = [3.0, 1.0, 0.6];
/// BM25's term-frequency saturation.
const K1: f64 = 1.2;
/// BM25's length normalization.
const B: f64 = 0.75;
/// The most schema nodes whose names and descriptions are read per tool
/// (schemas are already bounded at discovery by `MAX_SCHEMA_NODES`).
const MAX_SCHEMA_NODES_READ: usize = 2_000;

/// One tool that holds a term, and how often in each field.
#[derive(Debug, Clone)]
struct Posting {
    doc: u32,
    counts: [u16; FIELDS],
}

/// The index of one list of tools; documents are the positions in that list.
#[derive(Debug, Default)]
pub struct ToolIndex {
    postings: HashMap<String, Vec<Posting>>,
    lengths: Vec<[u32; FIELDS]>,
}

impl ToolIndex {
    /// Indexes `tools`, in order.
    pub fn new<'a>(tools: impl IntoIterator<Item = &'a ToolDefinition>) -> Self {
        let mut index = Self::default();
        for (doc, tool) in tools.into_iter().enumerate() {
            let doc = u32::try_from(doc).unwrap_or(u32::MAX);
            let fields = [terms(&tool.name), terms(&tool.description), terms(&parameter_text(tool))];
            let mut counts: HashMap<&str, [u16; FIELDS]> = HashMap::new();
            for (field, words) in fields.iter().enumerate() {
                for word in words {
                    let count = &mut counts.entry(word.as_str()).or_default()[field];
                    *count = count.saturating_add(1);
                }
            }
            index.lengths.push(fields.each_ref().map(|words| u32::try_from(words.len()).unwrap_or(u32::MAX)));
            for (word, counts) in counts {
                index.postings.entry(word.to_owned()).or_default().push(Posting { doc, counts });
            }
        }
        index
    }

    /// How many tools it holds.
    pub fn len(&self) -> usize {
        self.lengths.len()
    }

    /// Whether it holds no tool.
    pub fn is_empty(&self) -> bool {
        self.lengths.is_empty()
    }

    /// The positions of the tools that `visible` allows (one flag per
    /// indexed tool) matching any of `query`'s terms, best first (ties in
    /// listing order), at most `limit`.
    pub fn search(&self, query: &[String], visible: &[bool], limit: usize) -> Vec<usize> {
        let shown = |doc: u32| visible.get(doc as usize).copied().unwrap_or(false);
        let count = self.lengths.iter().enumerate().filter(|(doc, _)| visible.get(*doc) == Some(&true)).count();
        if count == 0 {
            return Vec::new();
        }
        let mut averages = [0.0; FIELDS];
        for (doc, lengths) in self.lengths.iter().enumerate() {
            if visible.get(doc) == Some(&true) {
                for field in 0..FIELDS {
                    averages[field] += f64::from(lengths[field]);
                }
            }
        }
        averages.iter_mut().for_each(|total| *total /= count as f64);
        let mut unique: Vec<&String> = query.iter().collect();
        unique.sort_unstable();
        unique.dedup();
        let mut scores: HashMap<u32, f64> = HashMap::new();
        for term in unique {
            let Some(postings) = self.postings.get(term) else { continue };
            let holders: Vec<&Posting> = postings.iter().filter(|p| shown(p.doc)).collect();
            let df = holders.len() as f64;
            let idf = (1.0 + (count as f64 - df + 0.5) / (df + 0.5)).ln();
            for posting in holders {
                let lengths = &self.lengths[posting.doc as usize];
                let weighted: f64 = (0..FIELDS)
                    .filter(|&field| posting.counts[field] > 0)
                    .map(|field| {
                        let norm = if averages[field] > 0.0 {
                            1.0 - B + B * f64::from(lengths[field]) / averages[field]
                        } else {
                            1.0
                        };
                        WEIGHTS[field] * f64::from(posting.counts[field]) / norm
                    })
                    .sum();
                *scores.entry(posting.doc).or_default() += idf * weighted * (K1 + 1.0) / (weighted + K1);
            }
        }
        let mut ranked: Vec<(u32, f64)> = scores.into_iter().filter(|(_, score)| *score > 0.0).collect();
        ranked.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        ranked.into_iter().take(limit).map(|(doc, _)| doc as usize).collect()
    }
}

/// The names and descriptions of a tool's parameters, at any depth, as one text.
fn parameter_text(tool: &ToolDefinition) -> String {
    let schema = input_schema(tool);
    let mut text = String::new();
    let mut pending: Vec<&Value> = vec![&schema];
    let mut read = 0;
    while let Some(node) = pending.pop() {
        read += 1;
        if read > MAX_SCHEMA_NODES_READ {
            break;
        }
        match node {
            Value::Object(map) => {
                if let Some(Value::String(description)) = map.get("description") {
                    text.push_str(description);
                    text.push(' ');
                }
                if let Some(Value::Object(properties)) = map.get("properties") {
                    for name in properties.keys() {
                        text.push_str(name);
                        text.push(' ');
                    }
                }
                pending.extend(
                    map.iter().filter(|(key, _)| key.as_str() != "enum" && key.as_str() != "const").map(|(_, v)| v),
                );
            }
            Value::Array(items) => pending.extend(items),
            _ => {}
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str, description: &str, schema: Value) -> ToolDefinition {
        serde_json::from_value(json!({"name": name, "description": description, "input_schema": schema})).unwrap()
    }

    fn tools() -> Vec<ToolDefinition> {
        let empty = json!({"type": "object", "properties": {}});
        vec![
            tool("notes.create_note", "Write a new note to the notebook.", empty.clone()),
            tool(
                "research.web_search",
                "Search the web and return result pages.",
                json!({"type": "object",
                "properties": {"query": {"type": "string", "description": "Words to look for."}}}),
            ),
            tool(
                "files.read_file",
                "Read a file from the workspace.",
                json!({"type": "object",
                "properties": {"path": {"type": "string", "description": "Where the file is; search paths are not expanded."}}}),
            ),
            tool("weather.forecast", "Tomorrow's weather for a city.", empty),
        ]
    }

    #[test]
    fn a_name_match_ranks_above_a_description_match() {
        let tools = tools();
        let index = ToolIndex::new(&tools);
        assert_eq!(index.len(), 4);
        let all = [true; 4];
        assert_eq!(index.search(&terms("web search"), &all, 10), [1, 2]);
        assert_eq!(index.search(&terms("webSearch"), &all, 10)[0], 1);
        assert_eq!(index.search(&terms("notes"), &all, 10), [0]);
        assert_eq!(index.search(&terms("weather tomorrow"), &all, 1), [3]);
        assert_eq!(index.search(&terms("nothing matches"), &all, 10), Vec::<usize>::new());
        assert_eq!(index.search(&[], &all, 10), Vec::<usize>::new());
    }

    #[test]
    fn hidden_tools_are_never_found_nor_weigh_on_the_ranking() {
        let tools = tools();
        let index = ToolIndex::new(&tools);
        let without_research = [true, false, true, true];
        assert_eq!(index.search(&terms("web search"), &without_research, 10), [2]);
        assert_eq!(index.search(&terms("web"), &[false; 4], 10), Vec::<usize>::new());
        // A short visibility list hides the rest.
        assert_eq!(index.search(&terms("weather"), &[true], 10), Vec::<usize>::new());
    }

    #[test]
    fn ties_keep_listing_order() {
        let same = json!({"type": "object", "properties": {}});
        let tools: Vec<ToolDefinition> =
            (0..5).map(|i| tool(&format!("m{i}.echo"), "Echo the text back.", same.clone())).collect();
        let index = ToolIndex::new(&tools);
        assert_eq!(index.search(&terms("echo"), &[true; 5], 3), [0, 1, 2]);
    }
}
