//! A strict parser of the two metrics exposition formats vtsnap's programs write: the
//! OpenMetrics text of a scraped `/metrics` (ending in `# EOF`) and the Prometheus text
//! format (0.0.4) of a `--metrics-file` textfile. Tests read what a program rendered
//! through it instead of looking for substrings, so a malformed line, a sample outside its
//! family, an escape the format does not know or a broken histogram fails the test.
//!
//! Stricter than the formats where vtsnap's output never goes: one space between a
//! sample's parts, no timestamps and no exemplars; every sample under a declared
//! `# TYPE`. The OpenMetrics rules kept: `# EOF` last and nothing after it, no blank line,
//! no other comment, each family's lines together and its metadata before its samples,
//! counters' samples named `<family>_total` (or `_created`). The text format: `# TYPE` of
//! a counter names the sample itself (`…_total`), blank lines and other comments are
//! allowed, `# EOF` is not.

use std::collections::BTreeMap;
use std::fmt;

/// Which exposition format a text is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// OpenMetrics 1.0 text (`application/openmetrics-text`).
    OpenMetrics,
    /// The Prometheus text format 0.0.4 (node-exporter's textfile collector).
    Text,
}

/// A family's `# TYPE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
    Summary,
    Unknown,
}

impl Kind {
    fn parse(s: &str, format: Format) -> Option<Self> {
        Some(match (s, format) {
            ("counter", _) => Self::Counter,
            ("gauge", _) => Self::Gauge,
            ("histogram", _) => Self::Histogram,
            ("summary", _) => Self::Summary,
            ("unknown", Format::OpenMetrics) | ("untyped", Format::Text) => Self::Unknown,
            _ => return None,
        })
    }

    /// The suffixes a sample of a family of this kind may add to the family's name.
    fn suffixes(self, format: Format) -> &'static [&'static str] {
        match (self, format) {
            (Self::Counter, Format::OpenMetrics) => &["_total", "_created"],
            (Self::Counter | Self::Gauge | Self::Unknown, _) => &[""],
            (Self::Histogram, _) => &["_bucket", "_sum", "_count", "_created"],
            (Self::Summary, _) => &["", "_sum", "_count", "_created"],
        }
    }
}

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The sample's own name (`vtsnap_x_total`, `vtsnap_h_bucket`).
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// One metric family: its metadata and its samples, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    pub name: String,
    pub kind: Kind,
    pub help: Option<String>,
    pub samples: Vec<Sample>,
}

impl Family {
    /// The value of the sample named `name` with exactly the labels `labels`.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let want: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        self.samples
            .iter()
            .find(|s| s.name == name && s.labels == want)
            .map(|s| s.value)
    }

    /// Every sample's labels, in order.
    pub fn label_sets(&self) -> Vec<BTreeMap<String, String>> {
        self.samples.iter().map(|s| s.labels.clone()).collect()
    }
}

/// A parsed exposition: its families in the order they came.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Exposition {
    pub families: Vec<Family>,
}

impl Exposition {
    pub fn family(&self, name: &str) -> Option<&Family> {
        self.families.iter().find(|f| f.name == name)
    }

    /// Every family's name and kind, sorted by name.
    pub fn kinds(&self) -> BTreeMap<String, Kind> {
        self.families
            .iter()
            .map(|f| (f.name.clone(), f.kind))
            .collect()
    }
}

/// Why a text is not a valid exposition: the line (1-based, 0 for the whole text) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for ParseError {}

/// Parses `text` in `format`, rejecting anything malformed.
pub fn parse(text: &str, format: Format) -> Result<Exposition, ParseError> {
    let whole = |message: &str| ParseError {
        line: 0,
        message: message.to_owned(),
    };
    if !text.is_empty() && !text.ends_with('\n') {
        return Err(whole("the text does not end in a newline"));
    }
    let mut p = Parser {
        format,
        families: Vec::new(),
        eof: false,
    };
    for (i, line) in text.lines().enumerate() {
        p.line(line).map_err(|message| ParseError {
            line: i + 1,
            message: format!("{message}: {line:?}"),
        })?;
    }
    if format == Format::OpenMetrics && !p.eof {
        return Err(whole("no # EOF"));
    }
    for f in &p.families {
        check_family(f).map_err(|m| whole(&format!("{}: {m}", f.name)))?;
    }
    Ok(Exposition {
        families: p.families,
    })
}

struct Parser {
    format: Format,
    families: Vec<Family>,
    eof: bool,
}

impl Parser {
    fn line(&mut self, line: &str) -> Result<(), String> {
        if self.eof {
            return Err("text after # EOF".into());
        }
        let om = self.format == Format::OpenMetrics;
        if line.is_empty() {
            return if om {
                Err("a blank line".into())
            } else {
                Ok(())
            };
        }
        if line == "# EOF" {
            return if om {
                self.eof = true;
                Ok(())
            } else {
                Err("# EOF in the text format".into())
            };
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            let help = unescape(help, false)?;
            let f = self.metadata(name)?;
            if f.help.replace(help).is_some() {
                return Err("a second # HELP".into());
            }
            return Ok(());
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').ok_or("# TYPE without a type")?;
            let format = self.format;
            let kind = Kind::parse(kind, format).ok_or("an unknown type")?;
            let f = self.metadata(name)?;
            if f.kind != Kind::Unknown || !f.samples.is_empty() {
                return Err("# TYPE after the family's samples or a second # TYPE".into());
            }
            f.kind = kind;
            return Ok(());
        }
        if line.starts_with("# UNIT ") && om {
            let name = line["# UNIT ".len()..].split(' ').next().unwrap_or("");
            self.metadata(name)?;
            return Ok(());
        }
        if line.starts_with('#') {
            return if om {
                Err("a comment OpenMetrics does not have".into())
            } else {
                Ok(())
            };
        }
        self.sample(line)
    }

    /// The family `name` names in a metadata line: the current one, or a new one. A family
    /// that already ended is an error (its lines must be together).
    fn metadata(&mut self, name: &str) -> Result<&mut Family, String> {
        check_name(name)?;
        let current = self.families.last().is_some_and(|f| f.name == name);
        if !current {
            if self.families.iter().any(|f| f.name == name) {
                return Err("a family whose lines are not together".into());
            }
            self.families.push(Family {
                name: name.to_owned(),
                kind: Kind::Unknown,
                help: None,
                samples: Vec::new(),
            });
        }
        self.families.last_mut().ok_or_else(String::new)
    }

    fn sample(&mut self, line: &str) -> Result<(), String> {
        let name_end = line.find(['{', ' ']).ok_or("a sample without a value")?;
        let name = &line[..name_end];
        check_name(name)?;
        let mut rest = &line[name_end..];
        let labels = if rest.starts_with('{') {
            let (labels, r) = parse_labels(rest)?;
            rest = r;
            labels
        } else {
            BTreeMap::new()
        };
        let value = rest
            .strip_prefix(' ')
            .ok_or("no single space before the value")?;
        if value.contains(' ') {
            return Err("more than a value after the series (timestamp or exemplar)".into());
        }
        let value = parse_value(value)?;
        let format = self.format;
        let f = self
            .families
            .last_mut()
            .ok_or("a sample before any # TYPE")?;
        let suffix = name
            .strip_prefix(f.name.as_str())
            .ok_or("a sample outside its family (or without a # TYPE)")?;
        if !f.kind.suffixes(format).contains(&suffix) {
            return Err(format!(
                "a sample named {name} in the {:?} family {}",
                f.kind, f.name
            ));
        }
        let le = labels.contains_key("le");
        if (f.kind == Kind::Histogram) && (suffix == "_bucket") != le {
            return Err("`le` on a histogram's buckets, and only there".into());
        }
        if f.samples
            .iter()
            .any(|s| s.name == name && s.labels == labels)
        {
            return Err("a second sample of the same series".into());
        }
        f.samples.push(Sample {
            name: name.to_owned(),
            labels,
            value,
        });
        Ok(())
    }
}

/// Families must be typed (`unknown`/`untyped` counts as not: vtsnap never writes it); histograms' buckets cumulative and ending in `+Inf` = `_count`.
fn check_family(f: &Family) -> Result<(), String> {
    if f.samples.is_empty() {
        return Ok(());
    }
    if f.kind == Kind::Unknown {
        return Err("samples without a # TYPE".into());
    }
    if f.kind != Kind::Histogram {
        return Ok(());
    }
    // Per series (the labels other than `le`).
    let mut series: BTreeMap<BTreeMap<String, String>, Vec<(f64, f64)>> = BTreeMap::new();
    for s in f.samples.iter().filter(|s| s.name.ends_with("_bucket")) {
        let mut key = s.labels.clone();
        let le = key.remove("le").unwrap_or_default();
        let le = parse_value(&le).map_err(|e| format!("le: {e}"))?;
        series.entry(key).or_default().push((le, s.value));
    }
    for (key, buckets) in series {
        let ordered = buckets
            .windows(2)
            .all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1);
        if !ordered {
            return Err(format!(
                "buckets not increasing and cumulative: {buckets:?}"
            ));
        }
        let Some(&(_, inf)) = buckets.last().filter(|b| b.0 == f64::INFINITY) else {
            return Err("no +Inf bucket".into());
        };
        let count = f
            .samples
            .iter()
            .find(|s| s.name == format!("{}_count", f.name) && s.labels == key)
            .ok_or("no _count")?;
        if count.value != inf {
            return Err(format!(
                "_count {} is not the +Inf bucket {inf}",
                count.value
            ));
        }
        if !f
            .samples
            .iter()
            .any(|s| s.name == format!("{}_sum", f.name) && s.labels == key)
        {
            return Err("no _sum".into());
        }
    }
    Ok(())
}

fn check_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':');
    if first_ok && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
        Ok(())
    } else {
        Err(format!("{name:?} is not a metric name"))
    }
}

fn check_label_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if first_ok && chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        Ok(())
    } else {
        Err(format!("{name:?} is not a label name"))
    }
}

/// `{a="x",b="y"}` at the start of `s`; the labels and what follows the `}`.
fn parse_labels(s: &str) -> Result<(BTreeMap<String, String>, &str), String> {
    let mut labels = BTreeMap::new();
    let mut rest = s.strip_prefix('{').ok_or("no {")?;
    loop {
        if let Some(r) = rest.strip_prefix('}') {
            return Ok((labels, r));
        }
        let eq = rest.find('=').ok_or("a label without =")?;
        let name = &rest[..eq];
        check_label_name(name)?;
        rest = rest[eq + 1..]
            .strip_prefix('"')
            .ok_or("a label value not in quotes")?;
        // The value ends at the first quote not escaped.
        let mut end = None;
        let mut escaped = false;
        for (i, c) in rest.char_indices() {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => {
                    end = Some(i);
                    break;
                }
                (false, '\n') => return Err("a newline in a label value".into()),
                _ => {}
            }
        }
        let end = end.ok_or("an unterminated label value")?;
        let value = unescape(&rest[..end], true)?;
        if labels.insert(name.to_owned(), value).is_some() {
            return Err(format!("label {name} twice"));
        }
        rest = &rest[end + 1..];
        if let Some(r) = rest.strip_prefix(',') {
            rest = r;
            if rest.starts_with('}') {
                return Err("a trailing comma in the labels".into());
            }
        } else if !rest.starts_with('}') {
            return Err("labels not separated by a comma".into());
        }
    }
}

/// Resolves `\\`, `\n` and (in label values) `\"`; any other escape is an error.
fn unescape(s: &str, quote: bool) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('\\') => out.push('\\'),
            Some('n') => out.push('\n'),
            Some('"') if quote => out.push('"'),
            other => return Err(format!("an unknown escape \\{other:?}")),
        }
    }
    Ok(out)
}

fn parse_value(s: &str) -> Result<f64, String> {
    match s {
        "+Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        "NaN" => Ok(f64::NAN),
        _ if s.is_empty()
            || !s
                .chars()
                .all(|c| c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e' | 'E')) =>
        {
            Err(format!("{s:?} is not a number"))
        }
        _ => s.parse().map_err(|_| format!("{s:?} is not a number")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OM: &str = "# HELP a_things Things.\n\
                      # TYPE a_things counter\n\
                      a_things_total{x=\"1\\\"\\\\\\n\"} 2\n\
                      # HELP h Hist.\n\
                      # TYPE h histogram\n\
                      h_sum 1.5\n\
                      h_count 2\n\
                      h_bucket{le=\"0.1\"} 1\n\
                      h_bucket{le=\"+Inf\"} 2\n\
                      # EOF\n";

    #[test]
    fn reads_openmetrics() {
        let e = parse(OM, Format::OpenMetrics).unwrap();
        let f = e.family("a_things").unwrap();
        assert_eq!(f.kind, Kind::Counter);
        assert_eq!(f.help.as_deref(), Some("Things."));
        assert_eq!(f.value("a_things_total", &[("x", "1\"\\\n")]), Some(2.0));
        let h = e.family("h").unwrap();
        assert_eq!(h.value("h_bucket", &[("le", "+Inf")]), Some(2.0));
    }

    #[test]
    fn rejects_what_is_malformed() {
        for (bad, format) in [
            (OM.trim_end_matches("# EOF\n"), Format::OpenMetrics),
            (&*format!("{OM}x 1\n"), Format::OpenMetrics),
            (&*OM.replace("h_count 2", "h_count 3"), Format::OpenMetrics),
            (
                &*OM.replace("{le=\"+Inf\"} 2", "{le=\"+Inf\"} 0"),
                Format::OpenMetrics,
            ),
            (
                &*OM.replace("a_things_total", "a_things"),
                Format::OpenMetrics,
            ),
            (&*OM.replace("x=\"1", "x=1"), Format::OpenMetrics),
            (&*OM.replace("\\\\", "\\t"), Format::OpenMetrics),
            (&*OM.replace(" 2\n#", "  2\n#"), Format::OpenMetrics),
            (&*OM.replace("} 2\n#", "} two\n#"), Format::OpenMetrics),
            (&*OM.replace("h_sum 1.5\n", ""), Format::OpenMetrics),
            (
                &*OM.replace("# TYPE h histogram\n", ""),
                Format::OpenMetrics,
            ),
            (&*OM.replace("# HELP h", "\n# HELP h"), Format::OpenMetrics),
            (
                &*OM.replace("# HELP h", "# just a comment\n# HELP h"),
                Format::OpenMetrics,
            ),
            ("# TYPE g gauge\ng{a=\"1\",a=\"2\"} 1\n", Format::Text),
            ("# TYPE g gauge\ng{a=\"1\",} 1\n", Format::Text),
            ("# TYPE g gauge\ng 1 123\n", Format::Text),
            ("# TYPE g gauge\ng 1\n# EOF\n", Format::Text),
            ("# TYPE g gauge\ng 1\ng 2\n", Format::Text),
            ("g 1\n", Format::Text),
            ("# TYPE g gauge\ng 1", Format::Text),
            ("# TYPE c_total counter\nc 1\n", Format::Text),
        ] {
            assert!(parse(bad, format).is_err(), "accepted:\n{bad}");
        }
    }

    #[test]
    fn reads_the_text_format() {
        let t = "# HELP c_total C.\n# TYPE c_total counter\nc_total{a=\"b\"} 1\n\n# x\n";
        let e = parse(t, Format::Text).unwrap();
        assert_eq!(e.kinds()["c_total"], Kind::Counter);
        assert_eq!(
            e.family("c_total").unwrap().value("c_total", &[("a", "b")]),
            Some(1.0)
        );
    }
}
