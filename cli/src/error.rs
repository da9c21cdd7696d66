//! The one error type of the command line: where (file, line, field) and what.
//!
//! Every bad input ends the program with exit code 2 and exactly one line on stderr, e.g.
//! `error: scenarios/x.toml:12: config.breaker.recoveries: must be between 1 and 1000`.

use std::fmt;
use std::path::Path;

/// An error that points at the input that caused it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliError {
    /// The file, as the user named it (or as a scenario named it).
    pub file: Option<String>,
    /// 1-based line in that file.
    pub line: Option<u64>,
    /// The field or column (`config.breaker.recoveries`, `status`).
    pub field: Option<String>,
    /// What is wrong, in words, on one line.
    pub message: String,
}

impl CliError {
    /// An error with only a message.
    pub fn msg(message: impl Into<String>) -> Self {
        CliError {
            file: None,
            line: None,
            field: None,
            message: one_line(&message.into()),
        }
    }

    /// An error about `file`.
    pub fn in_file(file: &Path, message: impl Into<String>) -> Self {
        CliError::msg(message).file(file)
    }

    /// Sets the file.
    pub fn file(mut self, file: &Path) -> Self {
        self.file = Some(file.display().to_string());
        self
    }

    /// Sets the line.
    pub fn line(mut self, line: u64) -> Self {
        self.line = Some(line);
        self
    }

    /// Sets the line if known.
    pub fn maybe_line(mut self, line: Option<u64>) -> Self {
        if line.is_some() {
            self.line = line;
        }
        self
    }

    /// Sets the field. Control characters are escaped (`\n`): a field may echo a key or a
    /// column name from the input, and the error must stay on one line.
    pub fn field(mut self, field: impl Into<String>) -> Self {
        let f: String = field.into();
        if !f.is_empty() {
            self.field = Some(if f.chars().any(char::is_control) {
                f.chars()
                    .map(|c| {
                        if c.is_control() {
                            c.escape_default().to_string()
                        } else {
                            c.to_string()
                        }
                    })
                    .collect()
            } else {
                f
            });
        }
        self
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(file) = &self.file {
            write!(f, "{file}")?;
            if let Some(line) = self.line {
                write!(f, ":{line}")?;
            }
            write!(f, ": ")?;
        } else if let Some(line) = self.line {
            write!(f, "line {line}: ")?;
        }
        if let Some(field) = &self.field {
            write!(f, "{field}: ")?;
        }
        write!(f, "{}", self.message)
    }
}

impl std::error::Error for CliError {}

/// An error writing the output. When the reader went away (`holdoff ... | head`), there is no
/// one left to tell: the process ends quietly, as command-line tools do.
pub fn output_error(e: std::io::Error) -> CliError {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(0);
    }
    CliError::msg(format!("cannot write the output: {e}"))
}

/// Collapses a possibly multi-line message (nom, toml) into one line.
pub fn one_line(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for part in s.split(['\n', '\r']).map(str::trim).filter(|p| !p.is_empty()) {
        if !out.is_empty() {
            out.push_str("; ");
        }
        out.push_str(part);
    }
    out
}

/// The 1-based line of byte offset `pos` in `text`.
pub fn line_of(text: &str, pos: usize) -> u64 {
    let pos = pos.min(text.len());
    text.as_bytes()[..pos].iter().filter(|b| **b == b'\n').count() as u64 + 1
}

/// Best-effort line of a dotted field path (`config.breaker.open_interval.initial_ms`) in a JSON
/// or TOML document: each segment is looked up as a key after the previous one. Used for errors
/// found after parsing (validation), where the parser's spans are gone.
pub fn locate(text: &str, path: &str) -> Option<u64> {
    let mut from = 0usize;
    let mut found = None;
    for seg in path.split('.') {
        let seg = seg.split('[').next().unwrap_or(seg);
        if seg.is_empty() {
            continue;
        }
        let hit = find_key(text, seg, from).or_else(|| find_key(text, &format!("{seg}_ms"), from));
        match hit {
            Some(p) => {
                from = p + seg.len();
                found = Some(p);
            }
            None => break,
        }
    }
    found.map(|p| line_of(text, p))
}

fn find_key(text: &str, key: &str, from: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'-';
    let mut start = from;
    while let Some(i) = text.get(start..)?.find(key) {
        let p = start + i;
        let before_ok = p == 0 || !ident(bytes[p - 1]);
        let end = p + key.len();
        let after_ok = end >= bytes.len() || !ident(bytes[end]);
        if before_ok && after_ok {
            // A key is followed (after quotes and spaces) by `=`, `:`, `.` or `]`.
            let rest = text[end..].trim_start_matches(['"', '\'', ' ', '\t']);
            if rest.starts_with(['=', ':', '.', ']']) {
                return Some(p);
            }
        }
        start = end;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_has_every_part_on_one_line() {
        let e = CliError::in_file(Path::new("a.toml"), "bad\nvalue")
            .line(3)
            .field("x.y");
        assert_eq!(e.to_string(), "a.toml:3: x.y: bad; value");
    }

    #[test]
    fn locate_follows_segments() {
        let toml = "[config.breaker]\nrecoveries = 3\n[config.breaker.open_interval]\ninitial_ms = -5\n";
        assert_eq!(locate(toml, "config.breaker.open_interval.initial"), Some(4));
        assert_eq!(locate(toml, "config.breaker.recoveries"), Some(2));
        let json = "{\n \"config\": {\n  \"budget\": {\n   \"retry_after_cap_ms\": 0 } } }";
        assert_eq!(locate(json, "config.budget.retry_after_cap"), Some(4));
    }
}
