//! Document formats, and the checks content passes before it is stored.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The format of a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// Markdown text.
    #[default]
    Md,
    /// Plain text.
    Txt,
    /// A JSON document; it must parse.
    Json,
    /// Comma-separated values; every row must have the same number of fields.
    Csv,
    /// An HTML document.
    Html,
}

/// Why content was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContentError {
    /// The JSON does not parse.
    #[error("the content is not valid JSON: {0}")]
    Json(String),
    /// The CSV is malformed.
    #[error("the content is not valid CSV: {0}")]
    Csv(String),
}

impl Format {
    /// Every format, for looking one up by extension.
    const ALL: [Self; 5] = [Self::Md, Self::Txt, Self::Json, Self::Csv, Self::Html];

    /// The file extension, without the dot.
    pub fn extension(self) -> &'static str {
        match self {
            Self::Md => "md",
            Self::Txt => "txt",
            Self::Json => "json",
            Self::Csv => "csv",
            Self::Html => "html",
        }
    }

    /// The media type stored with the file.
    pub fn media_type(self) -> &'static str {
        match self {
            Self::Md => "text/markdown",
            Self::Txt => "text/plain",
            Self::Json => "application/json",
            Self::Csv => "text/csv",
            Self::Html => "text/html",
        }
    }

    /// The format a file name's extension names, if any (`.htm` and
    /// `.markdown` included).
    pub fn of_file_name(name: &str) -> Option<Self> {
        let (_, extension) = name.rsplit_once('.')?;
        let extension = extension.to_ascii_lowercase();
        match extension.as_str() {
            "htm" => Some(Self::Html),
            "markdown" => Some(Self::Md),
            other => Self::ALL.into_iter().find(|f| f.extension() == other),
        }
    }

    /// `Ok` when `content` is well-formed for this format (JSON parses, CSV
    /// rows are UTF-8 and of equal length); text formats take anything.
    pub fn validate(self, content: &[u8]) -> Result<(), ContentError> {
        match self {
            // Skipping a value is iterative in serde_json: deep nesting cannot overflow the stack.
            Self::Json => serde_json::from_slice::<serde::de::IgnoredAny>(content)
                .map(drop)
                .map_err(|e| ContentError::Json(e.to_string())),
            Self::Csv => {
                let mut reader = csv::ReaderBuilder::new().has_headers(false).flexible(false).from_reader(content);
                let mut record = csv::StringRecord::new();
                loop {
                    match reader.read_record(&mut record) {
                        Ok(true) => {}
                        Ok(false) => return Ok(()),
                        Err(e) => return Err(ContentError::Csv(e.to_string())),
                    }
                }
            }
            Self::Md | Self::Txt | Self::Html => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_must_parse() {
        assert!(Format::Json.validate(br#"{"a": [1, 2, {"b": null}]}"#).is_ok());
        let error = Format::Json.validate(br#"{"a": 1,}"#).unwrap_err().to_string();
        assert!(error.contains("line 1 column 9"), "{error}");
        assert!(Format::Json.validate(b"").is_err());
        let deep = "[".repeat(100_000) + &"]".repeat(100_000);
        assert!(Format::Json.validate(deep.as_bytes()).is_ok(), "deep nesting is checked without recursion");
        assert!(Format::Json.validate(&deep.as_bytes()[1..]).is_err());
    }

    #[test]
    fn csv_rows_must_agree_and_be_utf8() {
        assert!(Format::Csv.validate(b"name,age\nAda,36\n\"Lovelace, A.\",\"3\"\"6\"\n").is_ok());
        assert!(Format::Csv.validate(b"").is_ok());
        let error = Format::Csv.validate(b"a,b\n1,2,3\n").unwrap_err().to_string();
        assert!(error.contains("line: 2"), "{error}");
        assert!(Format::Csv.validate(b"a,b\n\xff,1\n").is_err());
    }

    #[test]
    fn text_formats_take_anything_and_extensions_map_back() {
        assert!(Format::Md.validate(b"\xff\xfe not utf8").is_ok());
        assert_eq!(Format::of_file_name("data.JSON"), Some(Format::Json));
        assert_eq!(Format::of_file_name("page.htm"), Some(Format::Html));
        assert_eq!(Format::of_file_name("photo.png"), None);
        assert_eq!(Format::of_file_name("README"), None);
        assert_eq!(serde_json::to_value(Format::Csv).unwrap(), "csv");
    }
}
