//! Search latency over a large notes database: one user with many notes
//! among many users, generated text. Prints p50/p90/p99 per query shape;
//! asserts nothing about time.
//!
//! `cargo bench -p notes --bench search` fills 100,000 notes for one user
//! and 1,000,000 in all; smaller runs:
//! `NOTES_BENCH_NOTES=10000 NOTES_BENCH_TOTAL_NOTES=100000 cargo bench -p notes --bench search`.
//! `NOTES_BENCH_SEARCHES` sets the searches per shape (default 500).

use std::time::{Duration, Instant};

use notes::query::fts_query;
use notes::store::{Filter, Limits, NewNote, Store};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Distinct words in the generated language.
const VOCABULARY: usize = 20_000;
/// Users besides the measured one.
const OTHER_USERS: usize = 1_000;
/// Notes stored per transaction while filling.
const BATCH: usize = 5_000;

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Pronounceable made-up words, so the tokenizer sees ordinary text.
fn vocabulary(rng: &mut StdRng) -> Vec<String> {
    const SYLLABLES: [&str; 24] = [
        "ka", "lo", "mi", "ne", "su", "ta", "ri", "po", "va", "de", "go", "hu", "ze", "ba", "fi", "jo", "qu", "we",
        "xi", "yo", "ca", "ré", "mü", "ño",
    ];
    let mut words: Vec<String> = Vec::with_capacity(VOCABULARY);
    while words.len() < VOCABULARY {
        let length = rng.random_range(2..=4);
        let word: String = (0..length).map(|_| SYLLABLES[rng.random_range(0..SYLLABLES.len())]).collect();
        if !words.contains(&word) {
            words.push(word);
        }
    }
    words
}

/// A word index with a Zipf-like skew: a few words are very common.
fn zipf_index(rng: &mut StdRng) -> usize {
    let x: f64 = rng.random();
    ((VOCABULARY as f64).powf(x) as usize).saturating_sub(1).min(VOCABULARY - 1)
}

fn sentence(rng: &mut StdRng, words: &[String]) -> String {
    let length = rng.random_range(8..=40);
    (0..length).map(|_| words[zipf_index(rng)].as_str()).collect::<Vec<_>>().join(" ")
}

fn fill(store: &Store, user: &str, count: usize, rng: &mut StdRng, words: &[String]) {
    let mut left = count;
    while left > 0 {
        let batch = left.min(BATCH);
        let notes: Vec<NewNote> = (0..batch)
            .map(|i| NewNote { content: sentence(rng, words), tags: vec![format!("tag{}", i % 20)], source: None })
            .collect();
        store.import(user, notes).expect("the import succeeds");
        left -= batch;
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn measure(label: &str, store: &Store, user: &str, queries: &[String], filter: &Filter) {
    let mut times = Vec::with_capacity(queries.len());
    let mut hits = 0;
    for query in queries {
        let fts = fts_query(query).expect("generated queries are accepted").expect("generated queries have words");
        let start = Instant::now();
        hits += store.search(user, &fts, filter, 10, || false).expect("the search succeeds").len();
        times.push(start.elapsed());
    }
    times.sort();
    println!(
        "{label:<44} p50 {:>8.2?}  p90 {:>8.2?}  p99 {:>8.2?}  max {:>8.2?}  ({} searches, {:.1} results each)",
        percentile(&times, 0.5),
        percentile(&times, 0.9),
        percentile(&times, 0.99),
        times[times.len() - 1],
        times.len(),
        hits as f64 / times.len() as f64
    );
}

fn main() {
    let own = setting("NOTES_BENCH_NOTES", 100_000);
    let total = setting("NOTES_BENCH_TOTAL_NOTES", 1_000_000).max(own);
    let searches = setting("NOTES_BENCH_SEARCHES", 500).max(1);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("notes.db");
    let limits = Limits {
        note_max_bytes: 1 << 20,
        user_max_notes: u64::MAX >> 1,
        user_max_bytes: u64::MAX >> 1,
        store_max_bytes: u64::MAX >> 1,
    };
    let store = Store::open(&path, limits, Duration::from_secs(30)).expect("the store opens");
    let mut rng = StdRng::seed_from_u64(7);
    let words = vocabulary(&mut rng);

    let start = Instant::now();
    fill(&store, "measured", own, &mut rng, &words);
    let others = total - own;
    for user in 0..OTHER_USERS {
        let count = others / OTHER_USERS + usize::from(user < others % OTHER_USERS);
        fill(&store, &format!("user{user}"), count, &mut rng, &words);
    }
    let size: u64 = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().metadata().unwrap().len()).sum();
    println!(
        "filled {total} notes ({own} for the measured user, the rest over {OTHER_USERS} users) in {:.1?}; database {:.0} MB",
        start.elapsed(),
        size as f64 / 1e6
    );

    let pick = |rng: &mut StdRng, common: bool| {
        if common { words[rng.random_range(0..50)].clone() } else { words[rng.random_range(1000..VOCABULARY)].clone() }
    };
    let one_rare: Vec<String> = (0..searches).map(|_| pick(&mut rng, false)).collect();
    let one_common: Vec<String> = (0..searches).map(|_| pick(&mut rng, true)).collect();
    let three_mixed: Vec<String> = (0..searches)
        .map(|_| format!("{} {} {}", pick(&mut rng, true), pick(&mut rng, false), pick(&mut rng, false)))
        .collect();
    let sentences: Vec<String> = (0..searches).map(|_| sentence(&mut rng, &words)).collect();
    let none = Filter::default();
    let tagged = Filter { tags: vec!["tag3".to_owned()], since: None };
    measure("measured user, one rare word", &store, "measured", &one_rare, &none);
    measure("measured user, one common word", &store, "measured", &one_common, &none);
    measure("measured user, 1 common + 2 rare words", &store, "measured", &three_mixed, &none);
    measure("measured user, a long sentence (8-40 words)", &store, "measured", &sentences, &none);
    measure("measured user, 3 words + a tag filter", &store, "measured", &three_mixed, &tagged);
    measure("a small user, 1 common + 2 rare words", &store, "user0", &three_mixed, &none);
}
