//! `summarize_text`: an extractive summary by sentence scoring,
//! deterministic and without a model.
//!
//! Sentences are found with Unicode's sentence boundary rules (UAX #29).
//! Each sentence becomes a vector of word weights `(1 + ln tf) * ln(N / sf)`
//! (`tf`: count in the sentence, `N`: number of sentences, `sf`: sentences
//! containing the word), so words found in every sentence ("the", "and")
//! weigh nothing and no stop-word list is needed, in any language. A
//! sentence scores its summed cosine similarity to all other sentences
//! (degree centrality, as in LexRank): the sentences that share the most
//! with the rest of the text carry its topic. The sum is computed in linear
//! time as the similarity to the sum of all unit vectors, minus the
//! sentence's similarity to itself. The best sentences are returned in
//! their original order; ties go to the earlier one.

use std::collections::HashMap;

use module_sdk::{Context, ToolError, tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use unicode_segmentation::UnicodeSegmentation;

use crate::text::collapse_whitespace;

/// The most characters of input that are read; the rest is ignored and
/// `input_truncated` set.
pub const MAX_INPUT_CHARS: usize = 200_000;

/// Sentences with fewer words are only chosen when nothing longer exists.
const MIN_WORDS: usize = 4;

/// Arguments of `summarize_text`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SummarizeText {
    /// The text to summarize (plain text; only its first 200000 characters are read).
    pub text: String,
    /// How many sentences the summary may have (1-20, default 3).
    #[serde(default = "default_max_sentences")]
    #[schemars(range(min = 1, max = 20))]
    pub max_sentences: u8,
}

fn default_max_sentences() -> u8 {
    3
}

/// An extractive summary.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Summary {
    /// The chosen sentences joined into one text.
    pub summary: String,
    /// The chosen sentences, in their original order.
    pub sentences: Vec<String>,
    /// How many sentences the (read part of the) text has.
    pub total_sentences: usize,
    /// True when the text was longer than 200000 characters and only its beginning was read.
    pub input_truncated: bool,
}

/// Summarize a text by picking its most informative sentences (extractive,
/// deterministic: the same text always gives the same summary).
#[tool(read_only, idempotent, timeout_seconds = 20)]
pub async fn summarize_text(_ctx: Context, args: SummarizeText) -> Result<Summary, ToolError> {
    if args.text.trim().is_empty() {
        return Err(ToolError::invalid_arguments("arguments.text is empty; pass the text to summarize"));
    }
    let max = usize::from(args.max_sentences);
    tokio::task::spawn_blocking(move || summarize(&args.text, max))
        .await
        .map_err(|e| ToolError::execution_failed(format!("summarizing failed: {e}")))
}

/// The `max_sentences` best sentences of `text`.
pub fn summarize(text: &str, max_sentences: usize) -> Summary {
    let (text, input_truncated) = match text.char_indices().nth(MAX_INPUT_CHARS) {
        Some((end, _)) => (&text[..end], true),
        None => (text, false),
    };
    let sentences: Vec<Sentence> = text.split_sentence_bounds().filter_map(Sentence::new).collect();
    let vectors = unit_vectors(&sentences);
    let mut centroid: HashMap<&str, f64> = HashMap::new();
    for vector in &vectors {
        for (word, weight) in vector {
            *centroid.entry(word).or_default() += weight;
        }
    }
    let mut ranked: Vec<(usize, f64)> =
        vectors.iter().enumerate().map(|(index, vector)| (index, centrality(vector, &centroid))).collect();
    // Long-enough sentences first, then by score, then by position.
    ranked.sort_by(|(a, score_a), (b, score_b)| {
        let short = |i: usize| sentences[i].word_count < MIN_WORDS;
        short(*a).cmp(&short(*b)).then(score_b.total_cmp(score_a)).then(a.cmp(b))
    });
    let mut chosen: Vec<usize> = ranked.into_iter().take(max_sentences).map(|(index, _)| index).collect();
    chosen.sort_unstable();
    let picked: Vec<String> = chosen.into_iter().map(|i| sentences[i].text.clone()).collect();
    Summary { summary: picked.join(" "), sentences: picked, total_sentences: sentences.len(), input_truncated }
}

/// A sentence: its tidied text and its distinct lowercased words with
/// their counts, in order of first appearance.
struct Sentence {
    text: String,
    terms: Vec<(String, usize)>,
    word_count: usize,
}

impl Sentence {
    /// A sentence from a UAX #29 segment; `None` when it has no words.
    fn new(segment: &str) -> Option<Self> {
        let mut terms: Vec<(String, usize)> = Vec::new();
        let mut position: HashMap<String, usize> = HashMap::new();
        let mut word_count = 0;
        for word in segment.unicode_words().map(str::to_lowercase) {
            word_count += 1;
            match position.get(&word) {
                Some(&at) => terms[at].1 += 1,
                None => {
                    position.insert(word.clone(), terms.len());
                    terms.push((word, 1));
                }
            }
        }
        (word_count > 0).then(|| Self { text: collapse_whitespace(segment), terms, word_count })
    }
}

/// Each sentence's weight vector scaled to length 1 (empty when all its
/// words are in every sentence), in word order so that sums are
/// deterministic.
fn unit_vectors(sentences: &[Sentence]) -> Vec<Vec<(&str, f64)>> {
    let mut sentence_counts: HashMap<&str, usize> = HashMap::new();
    for sentence in sentences {
        for (word, _) in &sentence.terms {
            *sentence_counts.entry(word).or_default() += 1;
        }
    }
    let n = sentences.len() as f64;
    sentences
        .iter()
        .map(|sentence| {
            let vector: Vec<(&str, f64)> = sentence
                .terms
                .iter()
                .map(|(word, tf)| {
                    let isf = (n / sentence_counts[word.as_str()] as f64).ln();
                    (word.as_str(), (1.0 + (*tf as f64).ln()) * isf)
                })
                .filter(|(_, weight)| *weight > 0.0)
                .collect();
            let norm = vector.iter().map(|(_, w)| w * w).sum::<f64>().sqrt();
            vector.into_iter().map(|(word, weight)| (word, weight / norm)).collect()
        })
        .collect()
}

/// A unit vector's summed cosine similarity to all other sentences.
fn centrality(vector: &[(&str, f64)], centroid: &HashMap<&str, f64>) -> f64 {
    if vector.is_empty() {
        return 0.0;
    }
    let with_itself: f64 = vector.iter().map(|(word, weight)| weight * centroid[word]).sum();
    with_itself - 1.0
}

#[cfg(test)]
mod tests {
    use super::*;

    const ARTICLE: &str = "The city council met on Tuesday. \
        The new bridge over the river will cost the city forty million euros, the council said. \
        It was sunny. \
        Engineers expect the bridge to carry twenty thousand cars a day across the river. \
        A local bakery won a prize. \
        Work on the bridge starts next spring and the river crossing opens in two years.";

    #[test]
    fn connected_sentences_are_chosen_in_order_and_asides_left_out() {
        let summary = summarize(ARTICLE, 3);
        assert_eq!(summary.total_sentences, 6);
        assert_eq!(summary.sentences.len(), 3);
        for aside in ["It was sunny.", "A local bakery won a prize."] {
            assert!(!summary.sentences.iter().any(|s| s == aside), "{:?}", summary.sentences);
        }
        assert!(
            summary.sentences[0].contains("bridge") || summary.sentences[1].contains("bridge"),
            "{:?}",
            summary.sentences
        );
        let positions: Vec<usize> = summary.sentences.iter().map(|s| ARTICLE.find(s.as_str()).unwrap()).collect();
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "original order: {positions:?}");
        assert_eq!(summary.summary, summary.sentences.join(" "));
        assert!(!summary.input_truncated);
    }

    #[test]
    fn it_is_deterministic_and_bounded() {
        let first = summarize(ARTICLE, 3);
        for _ in 0..20 {
            assert_eq!(summarize(ARTICLE, 3), first);
        }
        assert_eq!(summarize(ARTICLE, 20).sentences.len(), 6);
        assert_eq!(summarize("Just one sentence", 3).sentences, ["Just one sentence"]);
    }

    #[test]
    fn punctuation_only_and_very_long_input_are_handled() {
        let nothing = summarize("... !!! ???", 3);
        assert_eq!((nothing.total_sentences, nothing.summary.as_str()), (0, ""));
        let long = ARTICLE.repeat(MAX_INPUT_CHARS / ARTICLE.len() + 10);
        let summary = summarize(&long, 3);
        assert!(summary.input_truncated);
        assert_eq!(summary.sentences.len(), 3);
        let unbroken = "word ".repeat(MAX_INPUT_CHARS);
        assert_eq!(summarize(&unbroken, 3).total_sentences, 1);
    }

    #[test]
    fn other_scripts_are_segmented() {
        let text = "Москва — столица России. Москва большой город. Сегодня идёт дождь.";
        let summary = summarize(text, 1);
        assert_eq!(summary.total_sentences, 3);
        assert!(summary.summary.contains("Москва"), "{}", summary.summary);
    }
}
