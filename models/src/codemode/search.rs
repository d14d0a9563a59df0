//! `search_tools` ranking: BM25 over each tool's names, title, description and parameter names.
//!
//! Every tool is one document of weighted fields: its namespace, method and original name
//! (weight 3), title (2), parameter names (2) and description (1). Words are split at
//! non-alphanumeric characters and camelCase boundaries and lower-cased (`getSum` -> `get`,
//! `sum`). Scores are BM25 (k1 = 1.2, b = 0.75) with field weights as term-frequency
//! multipliers; a query that names a tool exactly (`echo`, `everything.echo`) ranks it first.
//! Ties go by qualified name, so the order is deterministic.

use std::collections::HashMap;

use serde_json::Value;

use super::catalog::{Catalog, Entry};

const K1: f64 = 1.2;
const B: f64 = 0.75;

/// Splits `text` into lower-case words at non-alphanumeric characters and camelCase humps.
pub(crate) fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut previous_lower = false;
    for c in text.chars() {
        if !c.is_alphanumeric() {
            if !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
            previous_lower = false;
            continue;
        }
        if c.is_uppercase() && previous_lower && !current.is_empty() {
            out.push(std::mem::take(&mut current));
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

fn document(entry: &Entry) -> HashMap<String, f64> {
    let mut terms: HashMap<String, f64> = HashMap::new();
    let mut add = |text: &str, weight: f64| {
        for word in words(text) {
            *terms.entry(word).or_default() += weight;
        }
    };
    add(&entry.namespace, 3.0);
    add(&entry.method, 3.0);
    if entry.original != entry.method {
        add(&entry.original, 3.0);
    }
    if let Some(title) = &entry.title {
        add(title, 2.0);
    }
    if let Some(Value::Object(properties)) = entry.input_schema.get("properties") {
        for name in properties.keys() {
            add(name, 2.0);
        }
    }
    add(&entry.description, 1.0);
    terms
}

/// The tools matching `query`, best first, at most `limit`.
pub(crate) fn search<'c>(catalog: &'c Catalog, query: &str, limit: usize) -> Vec<(f64, &'c Entry)> {
    let entries: Vec<&Entry> = catalog.entries().collect();
    let documents: Vec<HashMap<String, f64>> = entries.iter().map(|e| document(e)).collect();
    let lengths: Vec<f64> = documents.iter().map(|d| d.values().sum()).collect();
    let average = lengths.iter().sum::<f64>() / (lengths.len().max(1) as f64);
    let mut query_words = words(query);
    query_words.sort();
    query_words.dedup();
    let n = documents.len() as f64;
    let wanted = query.trim().to_lowercase();
    let mut scored: Vec<(f64, &Entry)> = entries
        .iter()
        .zip(&documents)
        .zip(&lengths)
        .filter_map(|((entry, document), length)| {
            let mut score = 0.0;
            for word in &query_words {
                let Some(tf) = document.get(word) else {
                    continue;
                };
                let df = documents.iter().filter(|d| d.contains_key(word)).count() as f64;
                let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
                score +=
                    idf * (tf * (K1 + 1.0)) / (tf + K1 * (1.0 - B + B * length / average.max(1.0)));
            }
            let exact = [
                entry.method.to_lowercase(),
                entry.original.to_lowercase(),
                format!("{}.{}", entry.namespace, entry.method).to_lowercase(),
                format!("{}.{}", entry.namespace, entry.original).to_lowercase(),
            ];
            if exact.contains(&wanted) {
                score += 100.0;
            }
            (score > 0.0).then_some((score, *entry))
        })
        .collect();
    scored.sort_by(|(a, x), (b, y)| {
        b.total_cmp(a)
            .then_with(|| (&x.namespace, &x.method).cmp(&(&y.namespace, &y.method)))
    });
    scored.truncate(limit);
    scored
}
